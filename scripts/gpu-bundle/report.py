#!/usr/bin/env python3
"""Tables from a GPU pass (scripts/gpu-bundle/run.sh) computed from its rows alone:
memwall.db and the JSON outputs in results.tgz. Nothing here is typed: every figure
is read from a row or computed from rows by the formula printed beside it.

usage: scripts/gpu-bundle/report.py DIR [DIR...]   (each DIR holds memwall.db and
results.tgz of one call; rows of all calls are pooled) > README.md
"""
import glob
import json
import math
import os
import re
import sqlite3
import statistics as st
import sys
import tarfile
import tempfile


def load(dirs):
    stream, bench, energy, files, synth, gates = [], [], [], {}, [], []
    for d in dirs:
        call = os.path.basename(os.path.normpath(d))
        new_synth, call_files = [], {}
        db = os.path.join(d, "memwall.db")
        if os.path.exists(db):
            c = sqlite3.connect(db)
            c.row_factory = sqlite3.Row
            seen = {(r["measured_at"], r["kernel"], r["best_gbps"]) for r in stream}
            stream += [dict(r) for r in c.execute(
                "SELECT s.id, s.run_id, s.measured_at, s.kernel, s.best_gbps, s.array_bytes, s.device FROM stream_results s WHERE s.device != 'cpu' ORDER BY s.id")
                if (r["measured_at"], r["kernel"], r["best_gbps"]) not in seen]
            if c.execute("SELECT 1 FROM sqlite_master WHERE name = 'spec_gates'").fetchone():
                seen_g = {(r["measured_at"], r["k"]) for r in gates}
                gates += [dict(r, call=os.path.basename(os.path.normpath(d))) for r in c.execute("SELECT * FROM spec_gates ORDER BY id")
                          if (r["measured_at"], r["k"]) not in seen_g]
            if c.execute("SELECT 1 FROM sqlite_master WHERE name = 'spec_synth'").fetchone():
                seen_s = {(r["measured_at"], r["alpha_set"], r["k"]) for r in synth}
                # Run ids restart in every call's store: a run is (call, run_id).
                new_synth = [dict(r, call=call) for r in c.execute(
                    "SELECT s.*, u.command AS run_command FROM spec_synth s JOIN runs u ON u.id = s.run_id ORDER BY s.id")
                             if (r["measured_at"], r["alpha_set"], r["k"]) not in seen_s]
                synth += new_synth
            have = {(r["test_time"], r["avg_ts"]) for r in bench}
            bench += [dict(r, call=os.path.basename(os.path.normpath(d))) for r in c.execute("SELECT * FROM bench_results ORDER BY id")
                      if (r["test_time"], r["avg_ts"]) not in have]
            if c.execute("SELECT 1 FROM sqlite_master WHERE name = 'row_energy'").fetchone():
                have_e = {(r["test_time"], r["avg_ts"]) for r in energy}
                energy += [dict(r) for r in c.execute(
                    "SELECT b.id AS bench_id, b.model_type, b.n_prompt, b.n_gen, b.n_seqs, b.n_depth, b.avg_ts, b.test_time, e.* "
                    "FROM row_energy e JOIN bench_results b ON b.id = e.row_id ORDER BY b.id")
                    if (r["test_time"], r["avg_ts"]) not in have_e]
        tgz = os.path.join(d, "results.tgz")
        if os.path.exists(tgz):
            tmp = tempfile.mkdtemp()
            with tarfile.open(tgz) as t:
                t.extractall(tmp, filter="data")
            for f in glob.glob(os.path.join(tmp, "json", "*.json")):
                text = open(f).read()
                # Outputs of the first GPU passes carry llama.cpp's device lines
                # before the JSON (stderr and stdout shared a pipe there).
                starts = [i for i, line in enumerate(text.splitlines()) if line[:1] in "[{"]
                if not starts:
                    continue
                try:
                    # memwall bench -o json prints its ceiling and depth tables after the JSON.
                    doc, _ = json.JSONDecoder().raw_decode("\n".join(text.splitlines()[starts[0]:]))
                except json.JSONDecodeError:
                    continue
                # Each call's results.tgz holds every output of the warm machine so
                # far: one copy of each file is enough.
                files[os.path.basename(f)] = [doc]
                call_files[os.path.basename(f)] = [doc]
        # The rounds this call ran with a measurement switch (run.sh SPEC_AB_ENV), from
        # the call's own log: a warm machine's results.tgz also holds the
        # spec-variant-*.json of earlier calls, whose round numbers repeat.
        variants = {}
        log = os.path.join(d, "log.txt")
        if os.path.exists(log):
            for env, rnd in re.findall(r"set acceptance with (\S+) \(round (\d+), no peer\)", open(log).read()):
                variants[f"-r{rnd}"] = env
        # The peer's JSON of the same call as a set-acceptance run.
        for r in new_synth:
            r["files"] = call_files
            r["variants"] = variants
    return stream, bench, energy, files, synth, gates


def fmt(x, p=1):
    return "—" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{p}f}"


def pick(rows, p, n):
    return [r for r in rows if r["n_prompt"] == p and r["n_gen"] == n and r.get("n_depth", 0) == 0 and r.get("n_seqs", 1) in (1, None)]


def floor_fit(w, label, tg_points):
    """t_token = t0 + bytes / BW_eff by ordinary least squares over tg_points
    (model, bytes per step, seconds per token, STREAM GB/s), each point also
    predicted from the fit of the others (leave-one-out)."""
    w(f"## Decode time per token against bytes per token, {label}: fit t = t0 + bytes ÷ BW_eff (ordinary least squares)\n")
    xs = [b for _, b, _, _ in tg_points]
    ys = [t for _, _, t, _ in tg_points]

    def fit(xs, ys):
        mx, my = st.mean(xs), st.mean(ys)
        sxx = sum((x - mx) ** 2 for x in xs)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
        return my - slope * mx, slope, sxx

    t0, slope, sxx = fit(xs, ys)
    nn = len(xs)
    resid = [y - (t0 + slope * x) for x, y in zip(xs, ys)]
    s2 = sum(r * r for r in resid) / (nn - 2) if nn > 2 else float("nan")
    se_slope = math.sqrt(s2 / sxx) if nn > 2 else float("nan")
    se_t0 = math.sqrt(s2 * (1 / nn + st.mean(xs) ** 2 / sxx)) if nn > 2 else float("nan")
    bw = 1 / slope / 1e9 if slope > 0 else None
    w(f"t0 = {t0 * 1e3:.3f} ms ± {1.96 * se_t0 * 1e3:.3f} (95 %, normal approx.), BW_eff = {fmt(bw, 0)} GB/s "
      f"(slope {slope * 1e12:.4f} ps/B ± {1.96 * se_slope * 1e12:.4f}), {nn} points\n")
    w("| model | bytes per step (GB) | measured ms/token | fit ms/token | leave-one-out predicted ms/token | LOO error % | achieved % of STREAM ceiling |")
    w("| --- | --- | --- | --- | --- | --- | --- |")
    for i, (m, b, t, bwrow) in enumerate(tg_points):
        if nn > 2:
            a0, a1, _ = fit(xs[:i] + xs[i + 1:], ys[:i] + ys[i + 1:])
            loo = a0 + a1 * b
            err = 100 * (loo - t) / t
        else:
            loo = err = None
        ach = 100 * (b / t) / (bwrow * 1e9) if bwrow else None
        w(f"| {m} | {b / 1e9:.3f} | {t * 1e3:.3f} | {(t0 + slope * b) * 1e3:.3f} | {fmt(loo * 1e3 if loo else None, 3)} | {fmt(err)} | {fmt(ach)} |")
    w("")



def ties(stats_json):
    """'n (≤ lead)' of the positions a near-tie tolerance decided, '0' without any,
    '—' where the stats predate the count."""
    try:
        st = json.loads(stats_json or "{}")
    except ValueError:
        return "—"
    if "n_tie_breaks" not in st:
        return "—"
    n = st["n_tie_breaks"]
    return f"{n} of {st.get('n_emitted', 0)} (lead ≤ {st['tie_gap_max']:.2e})" if n else f"0 of {st.get('n_emitted', 0)}"


def spec_table(w, synth, files):
    """Set-acceptance speculative decoding: memwall's measured speedup beside the cost
    model's prediction stored before the run, and beside llama-server
    --spec-synth-rates at the same α and k (spec_peer.py's JSON)."""
    # Calls in the order given (spec-call8 before spec-call10), runs in their store's order.
    order = {c: i for i, c in enumerate(dict.fromkeys(r["call"] for r in synth))}
    runs = sorted({(r["call"], r["run_id"]) for r in synth if r["k"] > 0 and r["speedup_mean"]},
                  key=lambda cr: (order[cr[0]], cr[1]))
    if not runs:
        return
    w("## Speculative decoding at a set acceptance rate (memwall spec bench --synth-acceptance)\n")
    w("The drafter proposes the target's own greedy token with probability α per position and a wrong one "
      "otherwise, paying a real forward of the draft model per drafted token; every output equalled target-only "
      "decoding, where a run with a near-tie tolerance (`--synth-tie-tolerance`, random weights) took the target-only "
      "token at the positions counted under 'near-ties' (the verify argmax led it by at most the lead shown); each speedup row needs the real draft model's passed greedy gate at that k. Predicted = the cost "
      "model on t_verify(j) and t_draft measured before the timed runs (stored then, `spec_synth_predictions`). "
      "llama.cpp = llama-server `--spec-synth-rates α,α²,…,α^k` (output not valid there), same target, draft and k, "
      "decode tok/s of /completion's timings over the target-only server's.\n")
    w("| call | target | draft | α set | k | target-only t/s | speculative t/s | speedup measured (reps) | predicted before | measured ÷ predicted | predicted at realised α̂ | realised α̂ (tested) | near-ties of emitted tokens | llama.cpp speedup | memwall ÷ llama.cpp | row id |")
    w("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    breakdowns = []
    for run in runs:
        rows = [r for r in synth if (r["call"], r["run_id"]) == run]
        base = next((r for r in rows if r["k"] == 0), None)
        target = rows[0]["target_file"]
        m = target[:-5] if target.endswith(".gguf") else target
        mq = m.replace('-F16', ':F16').replace('-Q8_0', ':Q8_0').replace('-Q4_K_M', ':Q4_K_M')
        # Alternating rounds (run.sh SPEC_ROUNDS > 1): the run's own command line names
        # its round (--out …-rN), and pairs it with the peer's file of that round; a
        # warm machine's store also holds the runs of earlier calls, so counting runs
        # would not.
        out = re.search(r"--out (\S+)", rows[0].get("run_command") or "")
        rnd = re.search(r"-r(\d+)$", out.group(1)) if out else None
        sfx = f"-r{rnd.group(1)}" if rnd else ""
        pf = rows[0].get("files", files)
        peer = next(iter(pf.get(f"spec-peer-{mq}{sfx}.json", [])), None)
        env = rows[0].get("variants", {}).get(sfx) if sfx else None
        variant = {"env": env} if env else None
        if variant:
            peer = None
            target_label = f"{target} ({variant.get('env')})"
        else:
            target_label = target
        for r in rows:
            if r["k"] == 0:
                continue
            sp = json.loads(r["speedup_samples"]) if r["speedup_samples"] else []
            p = None
            if peer:
                p = next((x for x in peer.get("rows", []) if x.get("alpha_set") == r["alpha_set"] and x.get("k") == r["k"]), None)
            ps = p.get("speedup_mean") if p else None
            pss = ", ".join(f"{x:.3f}" for x in (p.get("speedup_samples") or [])) if p else ""
            w(f"| {r['call']} | {target_label} | {r['draft_file']} | {r['alpha_set']} | {r['k']} | {fmt(base['tps_mean'] if base else None)} | "
              f"{fmt(r['tps_mean'])} | {fmt(r['speedup_mean'], 3)} ({', '.join(f'{x:.3f}' for x in sp)}) | "
              f"{fmt(r['predicted_speedup'], 3)} | {fmt(r['speedup_mean'] / r['predicted_speedup'] if r['predicted_speedup'] else None, 3)} | "
              f"{fmt(r['predicted_after'], 3)} | {fmt(r['alpha_hat'], 3)} ({r['n_tested']}) | {ties(r.get('stats_json'))} | "
              f"{peer_cell(p, ps, pss)} | {fmt(r['speedup_mean'] / ps if ps else None, 3)} | {r['id']} |")
        breakdowns.append((run, rows, variant))
    w("")
    breakdown_table(w, breakdowns)


PARTS = [("draft forward", "draft_forward_ns"), ("draft logits fetch", "draft_fetch_ns"),
         ("draft pick (argmax / sampling)", "draft_pick_ns"), ("draft KV rollback", "draft_rollback_ns"),
         ("draft other", "draft_other_ns"), ("verify forward", "verify_forward_ns"),
         ("verify logits fetch", "verify_fetch_ns"), ("verify pick (argmax / distribution)", "verify_pick_ns"),
         ("verify discarded mass", "verify_mass_ns"), ("target KV rollback", "target_rollback_ns"),
         ("verify other", "verify_other_ns"), ("accept / reject", "accept_ns"), ("loop other", "other_ns")]


def breakdown_table(w, runs):
    """Where each set-acceptance run's decode time went, from the stats_json the row
    stored (SpecStats.breakdown, summed over repetitions and prompts): ms per
    iteration per part, the parts' sum and the decode clock."""
    cols = []
    for (call, rid), rows, variant in runs:
        for r in rows:
            st = json.loads(r.get("stats_json") or "{}")
            b = st.get("breakdown")
            if not b or not st.get("n_iterations") or not sum(b.get(k, 0) for _, k in PARTS):
                continue
            label = f"{call} run {rid}{' (' + variant.get('env') + ')' if variant else ''}: " + ("target only" if r["k"] == 0 else f"α={r['alpha_set']} k={r['k']}")
            cols.append((label, st, b))
    if not cols:
        return
    w("## Where the time of an iteration goes (SpecStats.breakdown of each row)\n")
    w("Each part is timed on its own with the engines synchronised at its edges (a forward pass ends with "
      "`synchronize`); ms per iteration = the part's ns summed over the row's repetitions and prompts ÷ its "
      "iterations. 'sum ÷ clock' = the parts' sum ÷ the decode time measured by its own clock around the loop.\n")
    w("| part | " + " | ".join(c[0] for c in cols) + " |")
    w("| --- |" + " --- |" * len(cols))
    w("| iterations | " + " | ".join(str(st["n_iterations"]) for _, st, _ in cols) + " |")
    w("| draft passes per iteration | " + " | ".join(f"{st.get('n_draft_passes', 0) / st['n_iterations']:.2f}" for _, st, _ in cols) + " |")
    for name, key in PARTS:
        w(f"| {name} | " + " | ".join(f"{b.get(key, 0) / 1e6 / st['n_iterations']:.3f}" for _, st, b in cols) + " |")
    w("| draft forward per draft pass | " + " | ".join(
        f"{b.get('draft_forward_ns', 0) / 1e6 / st['n_draft_passes']:.3f}" if st.get("n_draft_passes") else "—" for _, st, b in cols) + " |")
    sums = [sum(b.get(k, 0) for _, k in PARTS) for _, _, b in cols]
    w("| **sum of parts** | " + " | ".join(f"{s_ / 1e6 / st['n_iterations']:.3f}" for s_, (_, st, _) in zip(sums, cols)) + " |")
    w("| **decode clock** | " + " | ".join(f"{st['decode_ns'] / 1e6 / st['n_iterations']:.3f}" for _, st, _ in cols) + " |")
    w("| sum ÷ clock | " + " | ".join(f"{s_ / st['decode_ns']:.4f}" for s_, (_, st, _) in zip(sums, cols)) + " |")
    w("")


def peer_cell(p, ps, pss):
    """The peer's speedup with its repetitions, or — and why there is none."""
    if not p:
        return "— (peer not run)"
    if ps is None:
        return f"— (peer: {p.get('error') or 'no speedup'})"
    return fmt(ps, 3) + (f" ({pss})" if pss else "")


def gpu_names(dirs):
    """The GPUs the calls' runs recorded (runs.host_json "gpus"), e.g. "an NVIDIA H100 80GB HBM3"."""
    names = []
    for d in dirs:
        db = os.path.join(d, "memwall.db")
        if not os.path.exists(db):
            continue
        for (h,) in sqlite3.connect(db).execute("SELECT host_json FROM runs"):
            for g in json.loads(h).get("gpus") or []:
                n = g.split(",")[0].strip()
                if n not in names:
                    names.append(n)
    return " and ".join(names) if names else "a machine whose runs name no GPU"


def main(dirs):
    stream, bench, energy, files, synth, gates = load(dirs)
    out = []
    w = out.append
    w(f"# memwall on {gpu_names(dirs)}\n")
    w("Generated by `scripts/gpu-bundle/report.py " + " ".join(os.path.relpath(d) for d in dirs) + "` from the rows those calls "
      "brought back (memwall.db, results.tgz); no figure here is typed. Models are synthetic, shape-exact "
      "Qwen2.5 files written on the machine by `memwall model synth` (random weights: speed is real, text is not).\n")
    hw = next(iter(files.get("hw.json", [])), None)
    if hw:
        for d in hw.get("cuda", {}).get("devices", []):
            w(f"Device: {d['name']}, compute capability {d['compute_capability']}, {d['multiprocessors']} SMs, "
              f"memory bus {d['memory_bus_bits']} bit at {d['memory_clock_khz'] // 1000} MHz, driver CUDA {d['driver_cuda_version']}; "
              f"host CPU {hw['host']['cpu_model']}.\n")

    # 1. GPU STREAM vs PyTorch.
    w("## GPU STREAM (memwall stream --gpu) vs PyTorch, best of 10 passes, 1 GiB f64 arrays\n")
    w("| kernel | memwall GB/s (row ids) | PyTorch GB/s (per round) | memwall ÷ PyTorch |")
    w("| --- | --- | --- | --- |")
    torch = [j for k, v in files.items() if k.startswith("torch-") for j in v]
    for k in ("copy", "scale", "add", "triad"):
        mine = [r for r in stream if r["kernel"] == k]
        best = max((r["best_gbps"] for r in mine), default=None)
        peers = [t["kernels"][k]["best_gbps"] for t in torch if k in t.get("kernels", {})]
        ratio = best / max(peers) if best and peers else None
        ours = ", ".join("%.0f (#%d)" % (r["best_gbps"], r["id"]) for r in mine) or "—"
        w(f"| {k} | {ours} | "
          f"{', '.join(f'{p:.0f}' for p in peers) or '— (no PyTorch kernel)'} | {fmt(ratio, 3)} |")
    w("")

    # 2. memwall bench vs llama-bench per model.
    w("## Decode and prefill, -ngl 99: memwall bench vs llama-bench (same call, same llama.cpp tree, alternating)\n")
    w("| model | test | llama-bench t/s (rounds) | memwall t/s (rounds) | memwall ÷ llama-bench | ceiling t/s | achieved |")
    w("| --- | --- | --- | --- | --- | --- | --- |")
    models = sorted({k[3:].rsplit("-", 1)[0] for k in files if k.startswith("mw-")})
    tg_points = []
    for m in models:
        rounds = sorted(k for k in files if k.startswith(f"mw-{m}-"))
        for test, (p, n) in (("pp512", (512, 0)), ("tg128", (0, 128))):
            mw, lb, rows = [], [], []
            for k in rounds:
                r = k[len(f"mw-{m}-"):-5]
                a = pick(files[k][0], p, n)
                b = pick(files.get(f"lb-{m}-{r}.json", [[]])[0], p, n)
                if a:
                    mw.append(a[0]["avg_ts"]); rows.append(a[0])
                if b:
                    lb.append(b[0]["avg_ts"])
            if not mw:
                continue
            ratio = st.mean(mw) / st.mean(lb) if lb else None
            last = rows[-1]
            w(f"| {m} | {test} | {', '.join(f'{x:.1f}' for x in lb) or '—'} | {', '.join(f'{x:.1f}' for x in mw)} | "
              f"{fmt(ratio, 3)} | {fmt(last.get('ceiling_ts'))} | {fmt(100 * last['achieved'] if last.get('achieved') else None)} % |")
            if test == "tg128" and last.get("bytes_per_step"):
                tg_points.append((m, last["bytes_per_step"], 1.0 / st.mean(mw), last.get("bandwidth_gbps")))
    w("\nceiling = STREAM triad of the device ÷ bytes per step (weights + KV); achieved = t/s ÷ ceiling.\n")

    # 3. The per-token floor: t_token = t0 + bytes / BW_eff.
    quants = sorted({p[0].rsplit(":", 1)[1] for p in tg_points})
    groups = [("every format", tg_points),
              ("every quantized format", [p for p in tg_points if not p[0].endswith(":F16")])]
    groups += [(f"{q} only", [p for p in tg_points if p[0].endswith(":" + q)]) for q in quants]
    for label, pts in groups:
        if len(pts) >= 3:
            floor_fit(w, label, pts)

    # 3b. The 7B frontier, speed and energy only (synthetic weights: no quality).
    seven = [r for r in bench if r.get("n_depth", 0) == 0 and (r.get("n_seqs") or 1) == 1
             and r["model_type"].startswith("qwen2 7.6B") and (r["n_prompt"], r["n_gen"]) in ((512, 0), (0, 128))]
    if seven:
        by = {}
        for r in seven:
            q = r["model_type"].rsplit(" ", 1)[1]
            k = "tg" if r["n_gen"] > 0 else "pp"
            by.setdefault(q, {}).setdefault(k, []).append(r)
        ej = {}
        for e in energy:
            if e["model_type"].startswith("qwen2 7.6B") and e["n_gen"] > 0 and e.get("j_per_token") is not None:
                ej.setdefault(e["model_type"].rsplit(" ", 1)[1], []).append(e["j_per_token"])
        w("## The 7B frontier, speed and energy only (synthetic weights: quality needs real weights and is not measured here)\n")
        w("Means over every depth-0, one-sequence row of the format; J/token over the tg128 rows with a reading.\n")
        w("| format | GB per token | tg128 t/s | pp512 t/s | achieved % of STREAM ceiling (tg) | J/token (tg) | tokens per Wh (tg) | rows |")
        w("| --- | --- | --- | --- | --- | --- | --- | --- |")
        for q, d in sorted(by.items(), key=lambda kv: -kv[1]["tg"][0]["bytes_per_step"] if "tg" in kv[1] else 0):
            tg, pp = d.get("tg", []), d.get("pp", [])
            j = st.mean(ej[q]) if q in ej else None
            w(f"| {q} | {fmt(tg[0]['bytes_per_step'] / 1e9 if tg else None, 2)} | {fmt(st.mean(r['avg_ts'] for r in tg) if tg else None)} | "
              f"{fmt(st.mean(r['avg_ts'] for r in pp) if pp else None, 0)} | {fmt(100 * st.mean(r['achieved'] for r in tg) if tg else None)} | "
              f"{fmt(j, 3)} | {fmt(3600 / j if j else None, 0)} | {', '.join('%s #%d' % (r['call'], r['id']) for r in tg + pp)} |")
        w("")

    # 4. Batching.
    batch = [r for j in files.get("batch.json", []) for r in j if r["n_gen"] > 0]
    if batch:
        w("## Parallel sequences (memwall bench --n-seqs), decode\n")
        w("| n_seqs | n_depth | aggregate t/s | weight bytes per token × aggregate t/s (GB/s) | device STREAM triad GB/s | above STREAM (weights shared) |")
        w("| --- | --- | --- | --- | --- | --- |")
        for r in sorted(batch, key=lambda r: (r.get("n_depth", 0), r["n_seqs"])):
            per_tok = r["avg_ts"] * r["streamed_bytes"] / 1e9 if r.get("streamed_bytes") else None
            above = per_tok is not None and r.get("bandwidth_gbps") and per_tok > r["bandwidth_gbps"]
            w(f"| {r['n_seqs']} | {r.get('n_depth', 0)} | {r['avg_ts']:.1f} | {fmt(per_tok, 0)} | {fmt(r.get('bandwidth_gbps'), 0)} | {'yes' if above else 'no'} |")
        w("")

    # 5. Verify-cost curve and the ideal speculative speedup from it.
    for k, v in sorted(files.items()):
        if not k.startswith("verify-mw-"):
            continue
        m = k[len("verify-mw-"):-5]
        rows = {r["n_prompt"]: r for r in v[0] if r["n_gen"] == 0}
        if 1 not in rows:
            continue
        t1 = 1 / rows[1]["avg_ts"]
        w(f"## Verify cost on {m}: time of one forward pass over j tokens (prefill of j, empty cache)\n")
        w("| j | t/s | ms per pass | t(j) ÷ t(1) |")
        w("| --- | --- | --- | --- |")
        for j in sorted(rows):
            t = j / rows[j]["avg_ts"]
            w(f"| {j} | {rows[j]['avg_ts']:.1f} | {t * 1e3:.3f} | {t / t1:.3f} |")
        w("")
    # 6. Energy per token: the sampler beside each bench row (NVML on the GPU).
    if energy:
        w("## Energy per token (the live sampler beside each bench row)\n")
        w("J/token = energy over the row's phase ÷ tokens it produced; tokens per Wh = 3600 ÷ J/token; "
          "the energy source names the counter (NVML: the board's total energy counter). A row without a "
          "readable counter prints — with its reason.\n")
        w("| model | test | t/s | mean power W | J/token | tokens per Wh | energy source | peak temp °C | GPU memory util % | implied GB/s | row |")
        w("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for r in energy:
            test = (f"pp{r['n_prompt']}" if r["n_prompt"] else f"tg{r['n_gen']}") + (f" x{r['n_seqs']}" if (r.get("n_seqs") or 1) > 1 else "") + (f" @ d{r['n_depth']}" if r.get("n_depth") else "")
            why = f" ({r['reason']})" if r.get("reason") and r.get("j_per_token") is None else ""
            w(f"| {r['model_type']} | {test} | {r['avg_ts']:.1f} | {fmt(r.get('mean_power_w'))} | {fmt(r.get('j_per_token'), 3)}{why} | "
              f"{fmt(r.get('tokens_per_wh'), 0)} | {r['energy_source'] or '—'} | {fmt(r.get('peak_temp_c'))} | {fmt(r.get('gpu_mem_util_pct'))} | "
              f"{fmt(r.get('implied_bandwidth_gbps'), 0)} | #{r['bench_id']} |")
        w("")
    if gates:
        w("## Speculative decoding: the greedy gate (does the verify path reproduce target-only decoding?)\n")
        w("A set-acceptance speedup is stored only at a k whose real draft model passed this gate, and only when every "
          "output of the timed run equals target-only decoding. Near-ties: positions where the verify pass's argmax led "
          "the target-only token by at most the gate's `--tie-tolerance` and the target-only token was taken (random "
          "weights leave near-tied top logits that a k + 1-row kernel sums in another order); '—': a gate without "
          "that count.\n")
        w("| call | target | drafter | k | identical outputs | tokens per prompt | near-ties of emitted tokens | passed | gate row |")
        w("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for g in gates:
            w(f"| {g['call']} | {os.path.basename(g['target_file']) if g.get('target_file') else g['target_sha256'][:12]} | {g['drafter_key']} | {g['k']} | "
              f"{g['n_identical']}/{g['n_prompts']} | {g['max_new']} | {ties(g.get('detail_json'))} | {'yes' if g['passed'] else 'no'} | #{g['id']} |")
        w("")
    spec_table(w, synth, files)
    rep = os.path.join(os.path.dirname(os.path.abspath(dirs[-1])), "report", "report.md")
    if os.path.exists(rep):
        w("## The whole report from the same rows\n")
        w("`results/h200/report/` holds `memwall report` run on a copy of `call3/memwall.db` (report.md and the "
          "self-contained report.html): `memwall --db COPY report --out DIR --verify`, which also runs the independent "
          "verifier (`tools/verify/verify.py`) over every figure and claim in it.")
    return "\n".join(out)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    print(main(sys.argv[1:]))
