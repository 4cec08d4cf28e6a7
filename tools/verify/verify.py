#!/usr/bin/env python3
"""Independent verifier of a memwall store and the report generated from it.

Python standard library only (sqlite3, json, math); it imports nothing of memwall's and
repeats none of its code: every formula below is written out again from its definition.

    python3 verify.py --db memwall.db [--report results/report]

From the raw rows it recomputes and asserts:
  - each decode ceiling = n_seqs x STREAM bandwidth / mean bytes per step (and the read
    kernel's), each prefill ceiling = min(memory side, compute side);
  - achieved fractions = tok/s / ceiling; achieved GFLOP/s; arithmetic intensity;
  - memory-bound or not: intensity below the ridge (peak / bandwidth);
  - batching amortization: per-token-read bandwidth vs STREAM;
  - KV bytes measured / formula;
  - speculative speedups = speculative / target-only tok/s per repetition, each with a
    passed greedy gate behind it;
  - prediction errors; frontier monotonicity claims;
  - with --report: every figure and claim of figures.json against its row, and every
    table row of report.md against the figures it should print;
  - machines: a host is (hostname, CPU, logical cores, GPU names) read from each run's
    own row, never the hostname alone (two machines may both be called `vm`); every
    printed host cell names its row's machine, the cross-host table holds exactly the
    tests measured on two or more machines, and there is one roofline per machine.
Prints a summary table of checks with counts; exits 1 when any check fails.
"""

import argparse
import json
import math
import os
import sqlite3
import sys
from collections import OrderedDict, defaultdict

# Relative tolerance of a recomputed value against the stored one: both sides are the
# same double-precision arithmetic done in a different order.
REL = 1e-6


class Checks:
    def __init__(self):
        self.counts = OrderedDict()
        self.failures = []

    def _c(self, name):
        return self.counts.setdefault(name, [0, 0, 0])

    def ok(self, name, cond, detail):
        c = self._c(name)
        if cond:
            c[0] += 1
        else:
            c[1] += 1
            self.failures.append("%s: %s" % (name, detail))

    def skip(self, name):
        self._c(name)[2] += 1

    def close(self, name, got, want, detail, rel=REL):
        if got is None or want is None:
            self.ok(name, got is None and want is None, "%s: stored %r, recomputed %r" % (detail, got, want))
            return
        good = math.isfinite(got) and math.isfinite(want) and abs(got - want) <= rel * max(abs(want), 1e-300)
        self.ok(name, good, "%s: stored %r, recomputed %r" % (detail, got, want))


def rows(db, sql, *args):
    try:
        return db.execute(sql, args).fetchall()
    except sqlite3.OperationalError as e:
        if "no such table" in str(e):
            return []
        raise


def check_bench(db, ck):
    for r in rows(db, "SELECT * FROM bench_results ORDER BY id"):
        where = "bench_results row %d" % r["id"]
        decode = r["n_gen"] > 0 and r["n_prompt"] == 0
        prefill = r["n_prompt"] > 0 and r["n_gen"] == 0
        bw, bps, avg = r["bandwidth_gbps"], r["bytes_per_step"], r["avg_ts"]
        samples = json.loads(r["samples_ts"])
        if samples and avg is not None:
            ck.close("bench: avg_ts = mean of samples_ts", avg, sum(samples) / len(samples), where)
        if r["ceiling_ts"] is None or bw is None or bps is None:
            ck.skip("bench: decode ceiling = n_seqs x bandwidth / bytes per step")
        elif decode:
            want = r["n_seqs"] * bw * 1e9 / bps
            ck.close("bench: decode ceiling = n_seqs x bandwidth / bytes per step", r["ceiling_ts"], want, where)
        elif prefill and r["peak_gflops"] is not None and r["flops_per_token"]:
            p = r["n_prompt"]
            n_ub = -(-p // max(r["n_ubatch"], 1))
            memory = p * bw * 1e9 / (n_ub * bps)
            compute = r["peak_gflops"] * 1e9 / r["flops_per_token"]
            ck.close("bench: prefill ceiling = min(memory side, compute side)", r["ceiling_ts"], min(memory, compute), where)
        if r["ceiling_ts"] is not None and r["achieved"] is not None and avg is not None:
            ck.close("bench: achieved = tok/s / ceiling", r["achieved"], avg / r["ceiling_ts"], where)
        rb = r["read_bandwidth_gbps"]
        if decode and rb is not None and bps:
            ck.close("bench: read ceiling = n_seqs x read bandwidth / bytes per step",
                     r["decode_ceiling_ts_read"], r["n_seqs"] * rb * 1e9 / bps, where)
            if r["achieved_read"] is not None:
                ck.close("bench: achieved (read) = tok/s / read ceiling", r["achieved_read"],
                         avg / r["decode_ceiling_ts_read"], where)
        fpt = r["flops_per_token"]
        if fpt is not None and bps and avg is not None:
            ck.close("bench: achieved GFLOP/s = tok/s x FLOPs per token / 1e9", r["achieved_gflops"], avg * fpt / 1e9, where)
            if decode:
                want = fpt * r["n_seqs"] / bps
            else:
                p = r["n_prompt"]
                want = fpt * p / (-(-p // max(r["n_ubatch"], 1)) * bps)
            ck.close("bench: intensity = FLOPs / bytes read", r["intensity"], want, where)
        if decode and avg is not None and r["implied_bandwidth_gbps"] is not None and bps:
            # One token alone reads the weights and its own KV: the step bytes with the
            # other sequences' KV taken out.
            kv_mean = (bps - r["streamed_bytes"]) / r["n_seqs"]
            ck.close("batching: per-token-read bandwidth = tok/s x bytes one token reads",
                     r["implied_bandwidth_gbps"], avg * (r["streamed_bytes"] + kv_mean) / 1e9, where)
            above = r["implied_bandwidth_gbps"] > bw if bw is not None else None
            if r["n_seqs"] == 1 and above is not None:
                # At batch 1 every token reads the weights itself: above STREAM is impossible
                # (up to a cache-resident model, reported as a failure to look at).
                ck.ok("batching: b = 1 reads no faster than STREAM", not above,
                      "%s: %.3f GB/s per-token-read above STREAM %.3f GB/s at batch 1" % (where, r["implied_bandwidth_gbps"], bw))
        if decode and bps is not None:
            ck.ok("bench: bytes per step >= weight bytes", bps >= r["streamed_bytes"],
                  "%s: %r bytes per step below the %r weight bytes" % (where, bps, r["streamed_bytes"]))


def check_roofs(db, ck):
    for r in rows(db, "SELECT * FROM peak_results ORDER BY id"):
        if r["bound_gflops"] is None:
            ck.skip("peak: measured <= plausibility bound")
            continue
        ck.ok("peak: measured <= plausibility bound", r["gflops"] <= r["bound_gflops"] * (1 + REL),
              "peak_results row %d: %.1f above its bound %.1f" % (r["id"], r["gflops"], r["bound_gflops"]))
    for r in rows(db, "SELECT * FROM stream_results ORDER BY id"):
        ck.ok("stream: best >= mean >= worst", r["best_gbps"] * (1 + REL) >= r["avg_gbps"] >= r["worst_gbps"] * (1 - REL),
              "stream_results row %d: best %r mean %r worst %r" % (r["id"], r["best_gbps"], r["avg_gbps"], r["worst_gbps"]))


def check_kv(db, ck):
    for r in rows(db, "SELECT * FROM kv_verify_results ORDER BY id"):
        where = "kv_verify_results row %d" % r["id"]
        ck.close("kv: state growth per token = (state_2n - state_n) / n", r["measured_state_bytes_per_token"],
                 (r["state_2n"] - r["state_n"]) / r["n"], where)
        ck.close("kv: KV bytes = state growth - cell metadata", r["measured_kv_bytes_per_token"],
                 r["measured_state_bytes_per_token"] - r["metadata_bytes_per_token"], where)
        ck.close("kv: measured / formula", r["ratio"], r["measured_kv_bytes_per_token"] / r["predicted_bytes_per_token"], where)


def check_spec(db, ck):
    gates = {g["id"]: g for g in rows(db, "SELECT * FROM spec_gates")}
    bench = rows(db, "SELECT * FROM spec_bench ORDER BY id")
    for r in bench:
        where = "spec_bench row %d" % r["id"]
        if r["k"] == 0 or r["speedup_mean"] is None:
            continue
        g = gates.get(r["gate_id"])
        good = (g is not None and g["mode"] == "greedy" and g["passed"] == 1
                and g["n_prompts_set"] is not None and g["n_prompts"] == g["n_prompts_set"]
                and g["n_identical"] == g["n_prompts"] and g["max_new"] >= r["max_new"]
                and all(g[c] == r[c] for c in ("target_sha256", "drafter_key", "k", "engine_build", "prompt_set_sha256")))
        ck.ok("spec: each speedup has a passed greedy gate behind it", good,
              "%s: gate %r does not unlock it" % (where, r["gate_id"]))
        sp = json.loads(r["speedup_samples"]) if r["speedup_samples"] else []
        if sp:
            ck.close("spec: speedup = mean of per-repetition ratios", r["speedup_mean"], sum(sp) / len(sp), where)
        base = [b for b in bench if b["run_id"] == r["run_id"] and b["k"] == 0 and b["decision"] is None
                and b["category"] == r["category"] and b["drafter_kind"] == "none"]
        if len(base) == 1 and sp:
            t, t0 = json.loads(r["tps_samples"]), json.loads(base[0]["tps_samples"])
            if len(t) == len(t0) == len(sp):
                for i, (a, b0, s) in enumerate(zip(t, t0, sp)):
                    ck.close("spec: speedup = speculative tok/s / target-only tok/s", s, a / b0, "%s rep %d" % (where, i))
                continue
        ck.skip("spec: speedup = speculative tok/s / target-only tok/s")


def check_predictions(db, ck):
    for r in rows(db, "SELECT * FROM prediction_scores ORDER BY sheet_id, run_id"):
        card = json.loads(r["result_json"])
        avgs = [b["avg_ts"] for b in rows(db, "SELECT avg_ts FROM bench_results WHERE run_id = ?", r["run_id"])]
        for i, t in enumerate(card.get("tests", [])):
            where = "prediction_scores sheet %d run %d test %d" % (r["sheet_id"], r["run_id"], i)
            if t.get("predicted_tps") is not None and t.get("measured_tps") is not None:
                ck.close("predict: error % = (measured - predicted) / predicted x 100", t["error_pct"],
                         (t["measured_tps"] - t["predicted_tps"]) / t["predicted_tps"] * 100, where)
            if t.get("measured_tps") is not None:
                ck.ok("predict: the measured figure is a bench row of the scored run",
                      any(a is not None and abs(a - t["measured_tps"]) <= REL * abs(a) for a in avgs),
                      "%s: %r is no row's avg_ts in run %d" % (where, t["measured_tps"], r["run_id"]))


def check_energy(db, ck):
    for r in rows(db, "SELECT e.*, b.run_id AS bench_run FROM row_energy e JOIN bench_results b ON b.id = e.row_id"):
        where = "row_energy row %d" % r["row_id"]
        ck.ok("energy: a row's energy belongs to its bench row's run", r["run_id"] == r["bench_run"], where)
        if r["j_per_token"] is not None:
            ck.ok("energy: J/token > 0", r["j_per_token"] > 0, "%s: %r" % (where, r["j_per_token"]))
            if r["tokens_per_wh"] is not None:
                ck.close("energy: tokens per Wh = 3600 / J per token", r["tokens_per_wh"], 3600 / r["j_per_token"], where)
        else:
            ck.ok("energy: a missing J/token says why", bool(r["reason"]), where)


def check_loadtest(db, ck):
    for r in rows(db, "SELECT * FROM loadtest_points"):
        where = "loadtest_points row %d" % r["id"]
        ck.close("loadtest: request throughput = completed / duration", r["request_throughput_rps"], r["n_completed"] / r["duration_s"], where)
        ck.close("loadtest: output throughput = output tokens / duration", r["output_throughput_tps"], r["total_output_tokens"] / r["duration_s"], where)
        if r["implied_gbps"] is not None and r["bytes_per_token"] is not None:
            ck.close("loadtest: implied GB/s = output tok/s x bytes per token / 1e9", r["implied_gbps"],
                     r["output_throughput_tps"] * r["bytes_per_token"] / 1e9, where)
        if r["pct_of_stream"] is not None and r["stream_gbps"]:
            ck.close("loadtest: % of STREAM = 100 x implied / STREAM", r["pct_of_stream"], 100 * r["implied_gbps"] / r["stream_gbps"], where)


def monotone(vals):
    """Arms sorted by streamed bytes, largest first: tok/s never falls."""
    v = sorted(vals, key=lambda x: (-x[0], x[1]))
    return all(v[i + 1][1] >= v[i][1] for i in range(len(v) - 1))


def basename(p):
    return os.path.basename(p) or p


def gpu_names(gpu_info):
    """GPU names in a stored GPU list: nvidia-smi's "name, memory.total" entries joined
    with ", "; the memory sizes ("143771 MiB") are not names."""
    out = []
    for part in (gpu_info or "").split(","):
        part = part.strip()
        if not part:
            continue
        words = part.split(" ")
        if len(words) == 2 and words[1] in ("KiB", "MiB", "GiB", "TiB", "KB", "MB", "GB", "TB"):
            try:
                float(words[0])
                continue
            except ValueError:
                pass
        out.append(part)
    return out


def host_label(hostname, cpu, cores, gpu_info):
    """'hostname (CPU, N cores, GPU names)': the machine, told apart by all four."""
    parts = [cpu.strip()] if cpu and cpu.strip() else []
    parts.append("1 core" if cores == 1 else "%d cores" % cores)
    counted = OrderedDict()
    for g in gpu_names(gpu_info):
        counted[g] = counted.get(g, 0) + 1
    for g, c in counted.items():
        parts.append("%d\u00d7 %s" % (c, g) if c > 1 else g)
    return "%s (%s)" % (hostname.strip(), ", ".join(parts))


def run_hosts(db):
    """Run id -> its machine's label, from the run's own row (host_json holds the GPUs)."""
    out = {}
    for r in rows(db, "SELECT id, hostname, cpu_info, cores_logical, host_json FROM runs"):
        gpus = json.loads(r["host_json"]).get("gpus") or []
        out[r["id"]] = host_label(r["hostname"], r["cpu_info"], r["cores_logical"], ", ".join(gpus))
    return out


def bench_test(r):
    """llama-bench's test name: pp512, tg128, with ' xN' parallel sequences and ' @ dD' depth."""
    s = "pp%d" % r["n_prompt"] if r["n_prompt"] > 0 else "tg%d" % r["n_gen"]
    if r["n_seqs"] > 1:
        s += " x%d" % r["n_seqs"]
    if r["n_depth"] > 0:
        s += " @ d%d" % r["n_depth"]
    return s


CROSS_HOST = "The same model and test across hosts, each under its own roof"


def check_hosts(db, ck, side, md):
    hosts = run_hosts(db)
    bench = rows(db, "SELECT * FROM bench_results ORDER BY id")
    for r in bench:
        own = host_label(r["hostname"], r["cpu_info"], r["cores_logical"], r["gpu_info"])
        ck.ok("hosts: a bench row's machine is its run's machine", own == hosts.get(r["run_id"]),
              "bench_results row %d: %r, its run %d: %r" % (r["id"], own, r["run_id"], hosts.get(r["run_id"])))
    for t in side.get("tables", []):
        if "host" not in t["headers"]:
            continue
        col = t["headers"].index("host")
        for row in t["rows"]:
            if not row["src"]:
                continue
            want = hosts.get(row["src"]["run_id"])
            ck.ok("hosts: each printed host is its row's machine (hostname, CPU, cores, GPUs)",
                  row["labels"][col] == want,
                  "%s / %s row %d: printed %r, its run's machine is %r" % (
                      t["section"], t["caption"], row["src"]["row_id"], row["labels"][col], want))
    # The cross-host table: every (model, test) measured on two or more machines, every
    # row of it, and nothing else.
    groups = defaultdict(list)
    for r in bench:
        groups[(r["model_type"], bench_test(r))].append(r)
    want = set()
    for g in groups.values():
        if len({hosts.get(r["run_id"]) for r in g}) > 1:
            want |= {r["id"] for r in g}
    got = set()
    for t in side.get("tables", []):
        if t["caption"] == CROSS_HOST:
            got |= {row["src"]["row_id"] for row in t["rows"] if row["src"]}
    ck.ok("hosts: the cross-host table holds exactly the tests measured on two or more machines",
          got == want, "rows printed but not shared by two machines %s; shared but not printed %s" % (
              sorted(got - want)[:10], sorted(want - got)[:10]))
    # One roofline per machine that has a bench row to place on it.
    roofs = {hosts.get(r["run_id"]) for r in bench
             if r["intensity"] is not None and r["achieved_gflops"] is not None and r["bandwidth_gbps"] is not None}
    drawn = set()
    for line in md.splitlines():
        if line.startswith("![Roofline of ") and ": every bench row at" in line:
            drawn.add(line[len("![Roofline of "):line.index(": every bench row at")])
    ck.ok("hosts: one roofline per machine", drawn == roofs,
          "drawn %r, machines with bench rows %r" % (sorted(drawn), sorted(roofs)))


def footnote_of(src):
    """The Markdown footnote label of a source row (bench_results-34; a score names its run too)."""
    if src["table"] == "prediction_scores":
        return "%s-%d-%d" % (src["table"], src["row_id"], src["run_id"])
    return "%s-%d" % (src["table"], src["row_id"])


def check_report(db, ck, report_dir):
    side = json.load(open(os.path.join(report_dir, "figures.json"), encoding="utf-8"))
    md = open(os.path.join(report_dir, "report.md"), encoding="utf-8").read()
    md_rows = defaultdict(list)
    for line in md.splitlines():
        if line.startswith("| ") and "[^" in line:
            cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
            md_rows[cells[-1]].append(cells[:-1])
    cache = {}

    def row(table, rid, run):
        key = (table, rid, run)
        if key not in cache:
            if table == "prediction_scores":
                got = rows(db, "SELECT * FROM prediction_scores WHERE sheet_id = ? AND run_id = ?", rid, run)
            elif table == "row_energy":
                got = rows(db, "SELECT * FROM row_energy WHERE row_id = ?", rid)
            else:
                got = rows(db, "SELECT * FROM %s WHERE id = ?" % table, rid)
            cache[key] = got[0] if got else None
        return cache[key]

    # The per-token floor: refit each (host, format, placement) group of the report's
    # floor table from its rows alone: t = t0 + bytes / BW_eff by least squares.
    floor_groups = defaultdict(set)
    for f in side["figures"]:
        if f["cell"] == "num" and f["column"].startswith("derived:floor_") and f.get("src"):
            floor_groups[tuple(f["labels"][:3])].add(f["src"]["row_id"])
    floor = {}
    for key, ids in floor_groups.items():
        pts = []
        for rid in sorted(ids):
            b = rows(db, "SELECT * FROM bench_results WHERE id = ?", rid)[0]
            pts.append((rid, b["bytes_per_step"], b["avg_ns"] / 1e9 / b["n_gen"], b["bandwidth_gbps"]))

        def line(p):
            n = len(p)
            mx = sum(x for _, x, _, _ in p) / n
            my = sum(y for _, _, y, _ in p) / n
            sxx = sum((x - mx) ** 2 for _, x, _, _ in p)
            b1 = sum((x - mx) * (y - my) for _, x, y, _ in p) / sxx
            return my - b1 * mx, b1

        a0, a1 = line(pts)
        for i, (rid, x, y, bw) in enumerate(pts):
            v = {"seconds_per_token": y, "floor_fit_seconds": a0 + a1 * x, "floor_t0_seconds": a0,
                 "floor_bw_eff_gbps": 1 / a1 / 1e9 if a1 > 0 else None,
                 "floor_achieved_pct": 100 * x / y / (bw * 1e9)}
            if len(pts) >= 4:
                l0, l1 = line(pts[:i] + pts[i + 1:])
                v["floor_loo_seconds"] = l0 + l1 * x
                v["floor_loo_error_pct"] = 100 * (l0 + l1 * x - y) / y
            floor[(key, rid)] = v

    seen_rows = set()
    for f in side["figures"]:
        src = f.get("src")
        where = "%s / %s / %s" % (f["section"], f["table_caption"], f["header"])
        r = row(src["table"], src["row_id"], src["run_id"]) if src else None
        if src:
            where += " (%s row %d)" % (src["table"], src["row_id"])
            if r is None:
                ck.ok("report: every figure's row exists", False, where)
                continue
            if src["table"] != "prediction_scores":
                ck.ok("report: the row belongs to the run named", r["run_id"] == src["run_id"], where)
            foot = "[^%s]" % f["footnote"]
            if (f["table_caption"], foot, tuple(f["labels"])) not in seen_rows:
                seen_rows.add((f["table_caption"], foot, tuple(f["labels"])))
                ck.ok("report: report.md prints the row as its figures say",
                      f["labels"] in md_rows.get(foot, []), "%s: %r not in report.md" % (where, f["labels"]))
        if f["cell"] == "num":
            col = f["column"]
            if col.startswith("derived:"):
                name = col[len("derived:"):]
                if name == "ridge":
                    want = r["peak_gflops"] / r["bandwidth_gbps"]
                elif name == "peak_of_bound":
                    want = r["gflops"] / r["bound_gflops"]
                elif name == "cost_model_error":
                    want = (r["speedup_mean"] - r["predicted_speedup"]) / r["predicted_speedup"]
                elif name == "seconds_per_token" or name.startswith("floor_"):
                    want = floor.get((tuple(f["labels"][:3]), src["row_id"]), {}).get(name)
                    if want is None:
                        ck.ok("report: every per-token floor figure is refitted", False, "%s: %s" % (where, col))
                        continue
                else:
                    ck.ok("report: every derived figure is known", False, "%s: %s" % (where, col))
                    continue
            elif col.startswith("result_json:"):
                want = json.loads(r["result_json"])
                for part in col[len("result_json:"):].split("."):
                    want = want[int(part)] if part.isdigit() else want[part]
            else:
                want = r[col]
            ck.close("report: each figure equals its row's value", f["value"], want, where + " " + col)
            printed = float(f["text"])
            tol = 0.5 * 10 ** -f["decimals"] * (1 + 1e-9) + 1e-12 * abs(want or 0)
            ck.ok("report: each printed number is its value, rounded",
                  want is not None and abs(printed - want * f["scale"]) <= tol,
                  "%s %s: printed %s, row gives %r" % (where, col, f["text"], want))
        elif f["cell"] == "claim":
            c = f["claim"]
            if c == "memory_bound":
                want = r["intensity"] < r["peak_gflops"] / r["bandwidth_gbps"]
            elif c == "amortized":
                want = r["implied_bandwidth_gbps"] > r["bandwidth_gbps"]
            elif c == "gate_passed":
                want = r["passed"] == 1
            elif c == "frontier_speed_monotone":
                host, source, key = f["labels"][0], f["labels"][1], f["labels"][2]
                machines = run_hosts(db)
                vals = [(x["arm_streamed_bytes"], x["value"]) for x in rows(
                    db, "SELECT * FROM frontier_cells WHERE measure = 'speed' AND config_key = ? AND value IS NOT NULL",
                    key) if basename(x["source_file"]) == source and machines.get(x["run_id"]) == host]
                want = monotone(vals)
            else:
                ck.ok("report: every claim is known", False, "%s: %s" % (where, c))
                continue
            ck.ok("report: each claim recomputed from its row", f["value"] == want and f["text"] == ("yes" if want else "no"),
                  "%s: report says %s, recomputed %s" % (where, f["text"], want))
    # Rows whose every number is missing carry no figure: count the sidecar's tables.
    for t in side.get("tables", []):
        for row in t["rows"]:
            if row["src"]:
                foot = "[^%s]" % footnote_of(row["src"])
                key = (t["caption"], foot, tuple(row["labels"]))
                if key not in seen_rows:
                    seen_rows.add(key)
                    ck.ok("report: report.md prints the row as its figures say",
                          row["labels"] in md_rows.get(foot, []),
                          "%s / %s: %r not in report.md" % (t["section"], t["caption"], row["labels"]))
    printed_rows = sum(len(v) for v in md_rows.values())
    ck.ok("report: every sourced row of report.md is in figures.json", printed_rows == len(seen_rows),
          "report.md has %d sourced rows, figures.json %d" % (printed_rows, len(seen_rows)))
    bad_cells = []
    for line in md.splitlines():
        if line.startswith("|") and not line.startswith("| ---"):
            for c in line.strip().strip("|").split(" | "):
                c = c.strip()
                if c.lower() in ("", "nan", "inf", "-inf", "+inf", "infinity", "undefined", "null", "none"):
                    bad_cells.append((c, line))
    ck.ok("report: no NaN, inf, undefined or empty cell (a missing value prints —)", not bad_cells,
          "report.md: %r" % bad_cells[:3])
    check_hosts(db, ck, side, md)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", required=True, help="the memwall SQLite store")
    ap.add_argument("--report", help="a folder written by `memwall report` (report.md, figures.json)")
    a = ap.parse_args()
    if not os.path.isfile(a.db):
        print("verify.py: --db %s: no such file" % a.db, file=sys.stderr)
        return 2
    db = sqlite3.connect("file:%s?mode=ro" % a.db, uri=True)
    db.row_factory = sqlite3.Row
    ck = Checks()
    check_roofs(db, ck)
    check_bench(db, ck)
    check_kv(db, ck)
    check_spec(db, ck)
    check_predictions(db, ck)
    check_energy(db, ck)
    check_loadtest(db, ck)
    if a.report:
        check_report(db, ck, a.report)
    w = max(len(k) for k in ck.counts) if ck.counts else 10
    print("%-*s  %6s  %6s  %7s" % (w, "check", "passed", "failed", "skipped"))
    for k, (p, f, s) in ck.counts.items():
        print("%-*s  %6d  %6d  %7d" % (w, k, p, f, s))
    total_p = sum(c[0] for c in ck.counts.values())
    total_f = sum(c[1] for c in ck.counts.values())
    print("%-*s  %6d  %6d" % (w, "total", total_p, total_f))
    for f in ck.failures[:40]:
        print("FAILED " + f)
    if len(ck.failures) > 40:
        print("... and %d more failures" % (len(ck.failures) - 40))
    if total_p == 0:
        print("FAILED: nothing was checked (an empty store proves nothing)")
        return 1
    return 1 if total_f else 0


if __name__ == "__main__":
    sys.exit(main())
