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
import sqlite3
import statistics as st
import sys
import tarfile
import tempfile


def load(dirs):
    stream, bench, files = [], [], {}
    for d in dirs:
        db = os.path.join(d, "memwall.db")
        if os.path.exists(db):
            c = sqlite3.connect(db)
            c.row_factory = sqlite3.Row
            stream += [dict(r) for r in c.execute(
                "SELECT s.id, s.run_id, s.kernel, s.best_gbps, s.array_bytes, s.device FROM stream_results s WHERE s.device != 'cpu' ORDER BY s.id")]
            bench += [dict(r) for r in c.execute("SELECT * FROM bench_results ORDER BY id")]
        tgz = os.path.join(d, "results.tgz")
        if os.path.exists(tgz):
            tmp = tempfile.mkdtemp()
            with tarfile.open(tgz) as t:
                t.extractall(tmp, filter="data")
            for f in glob.glob(os.path.join(tmp, "json", "*.json")):
                try:
                    files.setdefault(os.path.basename(f), []).append(json.load(open(f)))
                except json.JSONDecodeError:
                    pass
    return stream, bench, files


def fmt(x, p=1):
    return "—" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{p}f}"


def pick(rows, p, n):
    return [r for r in rows if r["n_prompt"] == p and r["n_gen"] == n and r.get("n_depth", 0) == 0 and r.get("n_seqs", 1) in (1, None)]


def main(dirs):
    stream, bench, files = load(dirs)
    out = []
    w = out.append
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
        w(f"| {k} | {', '.join(f'{r['best_gbps']:.0f} (#{r['id']})' for r in mine) or '—'} | "
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
    if len(tg_points) >= 3:
        w("## Decode time per token against bytes per token: fit t = t0 + bytes ÷ BW_eff (ordinary least squares)\n")
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

    # 4. Batching.
    batch = [r for j in files.get("batch.json", []) for r in j if r["n_gen"] > 0]
    if batch:
        w("## Parallel sequences (memwall bench --n-seqs), decode\n")
        w("| n_seqs | aggregate t/s | weight bytes per token × aggregate t/s (GB/s) | device STREAM triad GB/s | above STREAM (weights shared) |")
        w("| --- | --- | --- | --- | --- |")
        for r in sorted(batch, key=lambda r: r["n_seqs"]):
            per_tok = r["avg_ts"] * r["streamed_bytes"] / 1e9 if r.get("streamed_bytes") else None
            above = per_tok is not None and r.get("bandwidth_gbps") and per_tok > r["bandwidth_gbps"]
            w(f"| {r['n_seqs']} | {r['avg_ts']:.1f} | {fmt(per_tok, 0)} | {fmt(r.get('bandwidth_gbps'), 0)} | {'yes' if above else 'no'} |")
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
    return "\n".join(out)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    print(main(sys.argv[1:]))
