#!/usr/bin/env python3
"""Independent verifier of a memwall store and the report generated from it.

Python standard library only (sqlite3, json, math, subprocess); it imports nothing of
memwall's and repeats none of its code: every formula below is written out again from
its definition, and every derived figure is recomputed from the raw samples it came from.

    python3 verify.py --db memwall.db [--report results/report]
    python3 verify.py --db postgres://user@host/db [--report DIR]   (read through psql)

Each check names its family and the raw column it recomputes from
("bench: avg_ts from samples_ns"). The families:
  - bench: samples_ts, mean, sample standard deviation (n - 1), min and max of tok/s, and
    avg_ns / stddev_ns, from samples_ns (tokens per repetition = n_prompt for pp,
    n_gen x n_seqs for tg); samples_ns against the lengths of the row's timed intervals
    (sampler_intervals); the roof (bandwidth_gbps) against its STREAM row; ceilings,
    achieved fractions, GFLOP/s and intensity from the recomputed tok/s;
  - implied bandwidth: a bench row's per-token-read bandwidth = tok/s (from samples_ns)
    x the bytes one token reads alone; a load point's = output tok/s (from samples_json)
    x bytes_per_token / 1e9, and its share of the server's roof (stream_gbps);
  - energy: every energy row (row_energy, loadtest_energy, spec_bench_energy,
    spec_synth_energy, serve_energy) integrated again over the sampler series
    (sampler_series) inside the stored timed intervals (sampler_intervals): energy,
    J/token, tokens/Wh, mean power, idle power, J/token above idle, sources and scope,
    reads and covered time, other processes' CPU use, temperature and live bandwidth;
  - loadtest: counts, token totals, throughputs, goodput and the mean / median / p90 /
    p99 of TTFT, TPOT, ITL and E2EL (vLLM's definitions, numpy's linear interpolation)
    from the per-request samples (samples_json); duration against the level's interval;
  - spec: tok/s per repetition from the timed decodes (sampler_intervals) and n_emitted,
    speedups from those, means and standard deviations from the per-repetition samples,
    a passed greedy gate (and for set acceptance the prediction) behind every speedup;
  - stream: best / mean / worst GB/s from samples_ns and the bytes a pass moves;
  - peak, kv, predict, batching, hosts; with --report, report: every figure and claim of
    figures.json against its row, and every table row of report.md against the figures.
A row that cannot be recomputed (a store written before its raw columns existed) is
counted as not checkable, never as passed. A family with rows in the store and no check
that passed or failed is an error. Prints every check's counts and a per-family table;
exits 1 when any check fails.
"""

import argparse
import json
import math
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from collections import OrderedDict, defaultdict
from decimal import Decimal

# Relative tolerance of a recomputed value against the stored one: both sides are the
# same double-precision arithmetic done in a different order.
REL = 1e-6
# A timed interval is integrated only with this many sampler reads inside it.
MIN_READS = 2
# The reads inside the intervals must span this share of their time.
MIN_COVERAGE = 0.5
# The idle baseline's phase.
IDLE_PHASE = "idle"
# A sensor at or above this is hot (°C); a clock this far below its highest is throttling.
HOT_C = 85.0
CLOCK_DROP = 0.10

# Energy sources in the order they are summed: (name, scope, cumulative-energy column,
# power column). A GPU's board power counts only where its energy counter did not.
SOURCES = [
    ("RAPL package", "CPU package", "cpu_energy_j", None),
    ("RAPL DRAM", "DRAM", "dram_energy_j", None),
    ("NVML GPU energy", "GPU board", "gpu_energy_j", None),
    ("NVML GPU power", "GPU board", None, "gpu_power_w"),
]
ENERGY_COUNTERS = ("cpu_package_energy", "dram_energy", "gpu_energy", "gpu_power")
ENERGY_TABLES = ("row_energy", "loadtest_energy", "spec_bench_energy", "spec_synth_energy", "serve_energy")

TABLES = (
    "runs", "stream_results", "peak_results", "bench_results", "kv_verify_results",
    "spec_gates", "spec_bench", "spec_synth", "spec_synth_predictions",
    "prediction_scores", "frontier_cells", "loadtest_points",
    "sampler_counters", "sampler_phases", "sampler_intervals", "sampler_series",
) + ENERGY_TABLES


# ---------------------------------------------------------------------------------------
# The store: a SQLite file, or a PostgreSQL database read through the psql client.


class SqliteStore:
    def __init__(self, path):
        self.label = path
        self.db = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
        self.db.row_factory = sqlite3.Row
        self.names = {r[0] for r in self.db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        self.cache = {}

    def table(self, name):
        if name not in self.cache:
            if name in self.names:
                self.cache[name] = [dict(r) for r in self.db.execute('SELECT * FROM "%s"' % name)]
            else:
                self.cache[name] = []
        return self.cache[name]


def redact(url):
    """The URL without its password."""
    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", url)


class PsqlStore:
    """A PostgreSQL store read through `psql` (the database itself, not a copy): every
    table this verifier reads, in one REPEATABLE READ transaction (one moment of the
    store while others push), each row as row_to_json (numbers stay numbers; doubles are
    printed with every digit)."""

    def __init__(self, url):
        self.url = url
        self.label = redact(url)
        if shutil.which("psql") is None:
            raise SystemExit("verify.py: --db %s needs the PostgreSQL client psql on PATH "
                             "(Debian: apt-get install postgresql-client)" % self.label)
        names = self._run("SELECT table_name FROM information_schema.tables "
                          "WHERE table_schema = current_schema();\n")
        self.names = {line for line in names if line}
        script = ["SET extra_float_digits = 3;", "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;"]
        for t in TABLES:
            if t in self.names:
                script.append("SELECT '%s' || chr(31) || row_to_json(x)::text FROM %s x;" % (t, t))
        script.append("COMMIT;")
        self.cache = {t: [] for t in TABLES}
        for line in self._run("\n".join(script) + "\n"):
            if "\x1f" not in line:
                continue
            t, row = line.split("\x1f", 1)
            self.cache[t].append(json.loads(row))

    def _run(self, script):
        p = subprocess.run(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", self.url, "-f", "-"],
                           input=script, capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit("verify.py: psql on %s failed (exit %d): %s" % (self.label, p.returncode, p.stderr.strip()))
        return p.stdout.split("\n")

    def table(self, name):
        return self.cache.get(name, [])


# ---------------------------------------------------------------------------------------
# Checks: each named "family: what, from which raw column"; passed, failed, not checkable.


class Checks:
    def __init__(self):
        self.counts = OrderedDict()
        self.failures = []
        self.unchecked = []

    def _c(self, name):
        return self.counts.setdefault(name, [0, 0, 0])

    def ok(self, name, cond, detail):
        c = self._c(name)
        if cond:
            c[0] += 1
        else:
            c[1] += 1
            self.failures.append("%s: %s" % (name, detail))

    def skip(self, name, why=None):
        """A row this check cannot recompute (its raw columns are missing): counted, not passed."""
        self._c(name)[2] += 1
        if why:
            self.unchecked.append("%s: %s" % (name, why))

    def close(self, name, got, want, detail, rel=REL, abs_tol=0.0):
        self.ok(name, agree(got, want, rel, abs_tol), "%s: stored %r, recomputed %r" % (detail, got, want))

    def families(self):
        out = OrderedDict()
        for name, (p, f, s) in self.counts.items():
            c = out.setdefault(family(name), [0, 0, 0])
            c[0] += p
            c[1] += f
            c[2] += s
        return out


def family(name):
    return name.split(":", 1)[0]


def agree(got, want, rel=REL, abs_tol=0.0):
    """Two values agree: both missing, equal, or within `rel` of the recomputed one."""
    if got is None or want is None:
        return got is None and want is None
    if isinstance(got, str) or isinstance(want, str):
        return got == want
    return (math.isfinite(got) and math.isfinite(want)
            and abs(got - want) <= max(rel * abs(want), abs_tol, 1e-300))


# ---------------------------------------------------------------------------------------
# Statistics, from their definitions.


def mean(xs):
    return math.fsum(xs) / len(xs)


def sample_std(xs):
    """Sample standard deviation (n - 1); 0 for one observation."""
    if len(xs) < 2:
        return 0.0
    m = mean(xs)
    return math.sqrt(math.fsum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def percentile(xs, p):
    """numpy.percentile(xs, p) with numpy's default method ('linear'): the virtual index
    p/100 x (n - 1) between the closest ranks, interpolated as numpy's _lerp does."""
    s = sorted(xs)
    idx = p / 100.0 * (len(s) - 1)
    lo = int(math.floor(idx))
    hi = min(lo + 1, len(s) - 1)
    t = idx - lo
    a, b = s[lo], s[hi]
    d = b - a
    return b - d * (1 - t) if t >= 0.5 else a + d * t


def round_half_away(x):
    return math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)


def rust_f64(x):
    """An f64 as Rust's Display writes it: shortest round-trip digits, no exponent,
    no trailing '.0' (1.0 -> '1', 0.25 -> '0.25')."""
    s = format(Decimal(repr(float(x))), "f")
    if "." in s:
        s = s.rstrip("0").rstrip(".")
    return s


def jl(text):
    return None if text is None else json.loads(text)


# ---------------------------------------------------------------------------------------
# The store's tables, indexed.


class Data:
    def __init__(self, store):
        self.store = store
        self.t = {name: store.table(name) for name in TABLES}
        # A store written before migration 0027 names the drafter `draft_key` in the
        # set-acceptance tables; every other table (and this script) says drafter_key.
        for name in ("spec_synth", "spec_synth_predictions"):
            for r in self.t[name]:
                if "drafter_key" not in r and "draft_key" in r:
                    r["drafter_key"] = r.pop("draft_key")
        self.by_id = {}
        for name in ("bench_results", "stream_results", "spec_bench", "spec_synth", "loadtest_points",
                     "spec_gates", "spec_synth_predictions", "runs"):
            self.by_id[name] = {r["id"]: r for r in self.t[name]}
        self.series = defaultdict(list)
        for r in self.t["sampler_series"]:
            self.series[r["run_id"]].append(r)
        for v in self.series.values():
            v.sort(key=lambda r: (r["t_ns"], r["id"]))
        self.intervals = defaultdict(lambda: defaultdict(list))
        self.runs_with_intervals = set()
        for r in sorted(self.t["sampler_intervals"], key=lambda r: r["id"]):
            self.intervals[r["run_id"]][r["phase"]].append(r)
            self.runs_with_intervals.add(r["run_id"])
        self.phases = defaultdict(set)
        for r in self.t["sampler_phases"]:
            self.phases[r["run_id"]].add(r["name"])
        self.counters = defaultdict(list)
        for r in self.t["sampler_counters"]:
            self.counters[r["run_id"]].append(r)

    def rows(self, name):
        return sorted(self.t[name], key=lambda r: r.get("id", r.get("row_id", r.get("point_id", r.get("run_id", 0)))))


def tokens_per_rep(r):
    """Tokens one timed repetition of a bench row processes: n_prompt for pp, n_gen x
    n_seqs for tg (llama-bench's t/s counts every sequence's tokens)."""
    return r["n_prompt"] if r["n_prompt"] > 0 else r["n_gen"] * r["n_seqs"]


def bench_raw(r):
    """(samples_ns, tok/s per repetition) of a bench row, or None when samples_ns is not a
    non-empty JSON array of positive integers."""
    try:
        ns = json.loads(r["samples_ns"])
    except (TypeError, ValueError):
        return None
    if not isinstance(ns, list) or not ns or not all(isinstance(x, int) and x > 0 for x in ns):
        return None
    tpr = tokens_per_rep(r)
    return ns, [tpr * 1e9 / x for x in ns]


# ---------------------------------------------------------------------------------------
# bench: every rate statistic from samples_ns; the roofline placement from those rates.


def check_bench(d, ck):
    streams = d.by_id["stream_results"]
    for r in d.rows("bench_results"):
        where = "bench_results row %d" % r["id"]
        raw = bench_raw(r)
        if raw is None:
            ck.ok("bench: samples_ns is a non-empty JSON array of positive integers", False,
                  "%s: samples_ns %r" % (where, r["samples_ns"]))
            continue
        ns, ts = raw
        stored_ts = jl(r["samples_ts"]) or []
        ck.ok("bench: samples_ts from samples_ns (tokens per repetition x 1e9 / ns)",
              len(stored_ts) == len(ts) and all(agree(a, b) for a, b in zip(stored_ts, ts)),
              "%s: stored %r, recomputed %r" % (where, stored_ts, ts))
        avg = mean(ts)
        ck.close("bench: avg_ts from samples_ns", r["avg_ts"], avg, where)
        ck.close("bench: stddev_ts from samples_ns (sample std, n - 1)", r["stddev_ts"], sample_std(ts), where,
                 abs_tol=1e-9 * avg)
        ck.close("bench: min_ts from samples_ns", r["min_ts"], min(ts), where)
        ck.close("bench: max_ts from samples_ns", r["max_ts"], max(ts), where)
        mns = mean([float(x) for x in ns])
        ck.ok("bench: avg_ns, stddev_ns from samples_ns (rounded to 1 ns)",
              abs(r["avg_ns"] - round_half_away(mns)) <= 1
              and abs(r["stddev_ns"] - round_half_away(sample_std([float(x) for x in ns]))) <= 1,
              "%s: stored %r / %r, recomputed %r / %r" % (where, r["avg_ns"], r["stddev_ns"], mns,
                                                          sample_std([float(x) for x in ns])))
        s = streams.get(r["stream_id"])
        if s is None:
            ck.skip("bench: bandwidth_gbps is its STREAM row's best (stream_results.best_gbps)",
                    "%s: stream_results row %r is not in this store" % (where, r["stream_id"]))
        elif r["bandwidth_gbps"] is not None:
            ck.close("bench: bandwidth_gbps is its STREAM row's best (stream_results.best_gbps)",
                     r["bandwidth_gbps"], s["best_gbps"], where)
        check_placement(r, avg, where, ck)


def check_placement(r, avg, where, ck):
    """The roofline columns of a bench row, from its recomputed tok/s (`avg`)."""
    decode = r["n_gen"] > 0 and r["n_prompt"] == 0
    prefill = r["n_prompt"] > 0 and r["n_gen"] == 0
    bw, bps = r["bandwidth_gbps"], r["bytes_per_step"]
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
    if r["ceiling_ts"] is not None and r["achieved"] is not None:
        ck.close("bench: achieved = tok/s (from samples_ns) / ceiling", r["achieved"], avg / r["ceiling_ts"], where)
    rb = r.get("read_bandwidth_gbps")
    if decode and rb is not None and bps:
        ck.close("bench: read ceiling = n_seqs x read bandwidth / bytes per step",
                 r["decode_ceiling_ts_read"], r["n_seqs"] * rb * 1e9 / bps, where)
        if r["achieved_read"] is not None:
            ck.close("bench: achieved (read) = tok/s (from samples_ns) / read ceiling", r["achieved_read"],
                     avg / r["decode_ceiling_ts_read"], where)
    fpt = r.get("flops_per_token")
    if fpt is not None and bps:
        ck.close("bench: achieved GFLOP/s = tok/s (from samples_ns) x FLOPs per token / 1e9",
                 r["achieved_gflops"], avg * fpt / 1e9, where)
        if decode:
            want = fpt * r["n_seqs"] / bps
        else:
            p = r["n_prompt"]
            want = fpt * p / (-(-p // max(r["n_ubatch"], 1)) * bps)
        ck.close("bench: intensity = FLOPs / bytes read", r["intensity"], want, where)
    if decode and bps is not None:
        ck.ok("bench: bytes per step >= weight bytes", bps >= r["streamed_bytes"],
              "%s: %r bytes per step below the %r weight bytes" % (where, bps, r["streamed_bytes"]))


# ---------------------------------------------------------------------------------------
# implied bandwidth: tok/s from raw samples x the bytes the row names.


def check_implied(d, ck):
    for r in d.rows("bench_results"):
        where = "bench_results row %d" % r["id"]
        raw = bench_raw(r)
        decode = r["n_gen"] > 0
        if not decode:
            ck.ok("implied bandwidth: a pp row has none", r["implied_bandwidth_gbps"] is None,
                  "%s: %r" % (where, r["implied_bandwidth_gbps"]))
            continue
        bps = r["bytes_per_step"]
        if raw is None or bps is None or r["implied_bandwidth_gbps"] is None:
            ck.skip("implied bandwidth: bench_results.implied_bandwidth_gbps from samples_ns x one token's bytes",
                    "%s: no samples, bytes per step or implied figure" % where)
            continue
        avg = mean(raw[1])
        # One token decoded alone reads the weights and its own KV: the step's bytes with
        # the other sequences' KV taken out (bytes_per_step = weights + n_seqs x KV).
        one = r["streamed_bytes"] + (bps - r["streamed_bytes"]) / r["n_seqs"]
        ck.close("implied bandwidth: bench_results.implied_bandwidth_gbps from samples_ns x one token's bytes",
                 r["implied_bandwidth_gbps"], avg * one / 1e9, where)
        bw = r["bandwidth_gbps"]
        if r["n_seqs"] == 1 and bw is not None:
            # At batch 1 every token reads the weights itself: above STREAM is impossible
            # (up to a cache-resident model, reported as a failure to look at).
            ck.ok("batching: b = 1 reads no faster than STREAM", r["implied_bandwidth_gbps"] <= bw,
                  "%s: %.3f GB/s per-token-read above STREAM %.3f GB/s at batch 1" % (where, r["implied_bandwidth_gbps"], bw))
    bench = d.by_id["bench_results"]
    for e in d.rows("row_energy"):
        b = bench.get(e["row_id"])
        if b is not None:
            ck.close("implied bandwidth: row_energy.implied_bandwidth_gbps is its bench row's",
                     e.get("implied_bandwidth_gbps"), b["implied_bandwidth_gbps"], "row_energy row %d" % e["row_id"])
    for p in d.rows("loadtest_points"):
        where = "loadtest_points row %d" % p["id"]
        tps = loadtest_output_tps(p)
        if p["bytes_per_token"] is None:
            ck.ok("implied bandwidth: a load point without bytes per token has no implied GB/s and says why",
                  p["implied_gbps"] is None and p["pct_of_stream"] is None and bool(p["bandwidth_note"]), where)
        elif tps is None:
            ck.skip("implied bandwidth: loadtest_points.implied_gbps from samples_json x bytes_per_token",
                    "%s: the requests' output token counts are not in samples_json (token_source %s)" % (where, p["token_source"]))
        else:
            ck.close("implied bandwidth: loadtest_points.implied_gbps from samples_json x bytes_per_token",
                     p["implied_gbps"], tps * p["bytes_per_token"] / 1e9, where)
        if p["implied_gbps"] is not None and p["stream_gbps"]:
            ck.close("implied bandwidth: loadtest_points.pct_of_stream = 100 x implied / the server's roof",
                     p["pct_of_stream"], 100 * p["implied_gbps"] / p["stream_gbps"], where)
        else:
            ck.ok("implied bandwidth: a share without the server's roof is missing, with the reason",
                  p["pct_of_stream"] is None and (p["stream_gbps"] is not None or bool(p["bandwidth_note"])), where)
        if "roof_source" in p:
            ck.ok("implied bandwidth: a load point's roof names where it came from (roof_source)",
                  (p["stream_gbps"] is None) == (p["roof_source"] is None),
                  "%s: stream_gbps %r, roof_source %r" % (where, p["stream_gbps"], p["roof_source"]))


# ---------------------------------------------------------------------------------------
# stream, peak, kv: the roofs.


STREAM_ARRAYS = {"copy": 2, "scale": 2, "add": 3, "triad": 3, "read": 1}


def check_roofs(d, ck):
    for r in d.rows("peak_results"):
        if r.get("bound_gflops") is None:
            ck.skip("peak: measured <= plausibility bound", "peak_results row %d has no bound" % r["id"])
            continue
        ck.ok("peak: measured <= plausibility bound", r["gflops"] <= r["bound_gflops"] * (1 + REL),
              "peak_results row %d: %.1f above its bound %.1f" % (r["id"], r["gflops"], r["bound_gflops"]))
    for r in d.rows("stream_results"):
        where = "stream_results row %d" % r["id"]
        ns = jl(r["samples_ns"])
        arrays = STREAM_ARRAYS.get(r["kernel"])
        if not ns or arrays is None or not all(isinstance(x, int) and x > 0 for x in ns):
            ck.skip("stream: best, mean, worst GB/s from samples_ns", "%s: samples_ns %r" % (where, r["samples_ns"]))
            continue
        # Bytes one pass moves by STREAM's convention: arrays touched x bytes per array.
        moved = arrays * r["array_bytes"]
        want = (moved / min(ns), moved / (math.fsum(ns) / len(ns)), moved / max(ns))
        got = (r["best_gbps"], r["avg_gbps"], r["worst_gbps"])
        ck.ok("stream: best, mean, worst GB/s from samples_ns", all(agree(g, w) for g, w in zip(got, want)),
              "%s: stored %r, recomputed %r" % (where, got, want))


def check_kv(d, ck):
    for r in d.rows("kv_verify_results"):
        where = "kv_verify_results row %d" % r["id"]
        ck.close("kv: state growth per token = (state_2n - state_n) / n", r["measured_state_bytes_per_token"],
                 (r["state_2n"] - r["state_n"]) / r["n"], where)
        ck.close("kv: KV bytes = state growth - cell metadata", r["measured_kv_bytes_per_token"],
                 r["measured_state_bytes_per_token"] - r["metadata_bytes_per_token"], where)
        ck.close("kv: measured / formula", r["ratio"], r["measured_kv_bytes_per_token"] / r["predicted_bytes_per_token"], where)


# ---------------------------------------------------------------------------------------
# spec: tok/s per repetition from the timed decodes, speedups from those.


def spec_bench_label(r, rep):
    """The sampler phase of a spec bench cell's repetition (0-based)."""
    if r["k"] == 0:
        return "%s target-only #%d" % (r["category"], rep + 1)
    return "%s %s k=%d #%d" % (r["category"], r["drafter_kind"], r["k"], rep + 1)


def spec_synth_label(r, rep):
    """The sampler phase of a set-acceptance configuration's repetition (0-based); a tree's
    drafter key is `tree <shape>|<draft key>`, its phase `α=… tree <shape> #n`."""
    if r["alpha_set"] is None:
        return "target-only #%d" % (rep + 1)
    key = r["drafter_key"]
    if key.startswith("tree "):
        return "α=%s tree %s #%d" % (rust_f64(r["alpha_set"]), key[len("tree "):].split("|")[0], rep + 1)
    return "α=%s k=%d #%d" % (rust_f64(r["alpha_set"]), r["k"], rep + 1)


def spec_interval_tps(d, r, label):
    """tok/s per repetition from the repetition's timed decodes: the tokens one repetition
    emits (n_emitted / reps: every repetition emits the same greedy outputs) over the
    summed lengths of its prompts' decode intervals. None (with why) when not recomputable."""
    tps = jl(r["tps_samples"])
    if r["run_id"] not in d.runs_with_intervals:
        return None, "run %d has no timed intervals stored" % r["run_id"]
    reps = len(tps)
    if reps == 0 or r["n_emitted"] % reps:
        return False, "n_emitted %d does not split over %d repetitions" % (r["n_emitted"], reps)
    out = []
    for rep in range(reps):
        iv = d.intervals[r["run_id"]].get(label(r, rep), [])
        ns = sum(i["end_ns"] - i["start_ns"] for i in iv)
        if not iv or ns <= 0:
            return False, "phase %r has no timed decode" % label(r, rep)
        out.append((r["n_emitted"] // reps) / (ns / 1e9))
    return out, None


def check_spec_rows(d, ck, table, label, is_base, gate_ok):
    rows = d.rows(table)
    for r in rows:
        where = "%s row %d" % (table, r["id"])
        tps = jl(r["tps_samples"])
        if tps is None:
            # A decision row (k auto's "off"): a decision, not a measurement.
            ck.ok("spec: a decision row carries no measurement", table == "spec_bench" and r["decision"] is not None
                  and r["reps"] == 0 and r["speedup_samples"] is None and r["speedup_mean"] is None,
                  "%s: no tok/s samples but decision %r, reps %r" % (where, r.get("decision"), r["reps"]))
            continue
        if tps:
            ck.close("spec: tps_mean from tps_samples", r["tps_mean"], mean(tps), where)
            ck.close("spec: tps_std from tps_samples (sample std, n - 1)", r["tps_std"], sample_std(tps), where,
                     abs_tol=1e-9 * mean(tps))
        sp = jl(r["speedup_samples"])
        if sp:
            ck.close("spec: speedup_mean from speedup_samples", r["speedup_mean"], mean(sp), where)
            ck.close("spec: speedup_std from speedup_samples (sample std, n - 1)", r["speedup_std"], sample_std(sp),
                     where, abs_tol=1e-9 * abs(mean(sp)))
        if not is_base(r) and r["speedup_mean"] is not None:
            good, why = gate_ok(r)
            ck.ok("spec: each speedup has a passed greedy gate behind it", good, "%s: %s" % (where, why))
        # From the timed decodes.
        got, why = spec_interval_tps(d, r, label)
        name = "spec: tps_samples from sampler_intervals (n_emitted / reps over each repetition's timed decodes)"
        if got is None:
            ck.skip(name, "%s: %s" % (where, why))
        elif got is False:
            ck.ok(name, False, "%s: %s" % (where, why))
        else:
            ck.ok(name, len(got) == len(tps) and all(agree(a, b) for a, b in zip(tps, got)),
                  "%s: stored %r, recomputed %r" % (where, tps, got))
        if is_base(r) or not sp:
            continue
        base = [b for b in rows if b["run_id"] == r["run_id"] and is_base(b) and same_cell(table, b, r)
                and jl(b["tps_samples"]) is not None]
        name_ratio = "spec: speedup_samples = tps_samples / the target-only row's tps_samples (same repetition)"
        name_iv = "spec: speedup_samples from sampler_intervals (this row's and the target-only row's timed decodes)"
        if len(base) != 1:
            ck.skip(name_ratio, "%s: no single target-only row in its run" % where)
            ck.skip(name_iv, "%s: no single target-only row in its run" % where)
            continue
        t0 = jl(base[0]["tps_samples"])
        if len(t0) == len(tps) == len(sp):
            ck.ok(name_ratio, all(agree(s, a / b0) for s, a, b0 in zip(sp, tps, t0)),
                  "%s: stored %r, recomputed %r" % (where, sp, [a / b0 for a, b0 in zip(tps, t0)]))
        else:
            ck.ok(name_ratio, False, "%s: %d speedups, %d and %d tok/s samples" % (where, len(sp), len(tps), len(t0)))
        b_iv, why_b = spec_interval_tps(d, base[0], label)
        if got is None or b_iv is None:
            ck.skip(name_iv, "%s: %s" % (where, why or why_b))
        elif got is False or b_iv is False or len(got) != len(b_iv):
            ck.ok(name_iv, False, "%s: %s" % (where, why or why_b or "repetition counts differ"))
        else:
            want = [a / b0 for a, b0 in zip(got, b_iv)]
            ck.ok(name_iv, len(want) == len(sp) and all(agree(s, w) for s, w in zip(sp, want)),
                  "%s: stored %r, recomputed %r" % (where, sp, want))


def same_cell(table, b, r):
    if table == "spec_bench":
        return b["category"] == r["category"] and b["drafter_kind"] == "none" and b["decision"] is None
    return True


def check_spec(d, ck):
    gates = d.by_id["spec_gates"]

    def unlocking(g, r, drafter_key):
        if g is None:
            return False, "gate %r is not in this store" % r["gate_id"]
        good = (g["mode"] == "greedy" and g["passed"] == 1
                and g["n_prompts_set"] is not None and g["n_prompts"] == g["n_prompts_set"]
                and g["n_identical"] == g["n_prompts"] and g["max_new"] >= r["max_new"]
                and g["target_sha256"] == r["target_sha256"] and g["drafter_key"] == drafter_key
                and g["k"] == r["k"] and g["engine_build"] == r["engine_build"]
                and g["prompt_set_sha256"] == r["prompt_set_sha256"])
        return good, "gate %r does not unlock it" % r["gate_id"]

    check_spec_rows(d, ck, "spec_bench", spec_bench_label, lambda r: r["k"] == 0,
                    lambda r: unlocking(gates.get(r["gate_id"]), r, r["drafter_key"]))

    preds = d.by_id["spec_synth_predictions"]

    def synth_ok(r):
        good, why = unlocking(gates.get(r["gate_id"]), r, r["drafter_key"])
        p = preds.get(r["prediction_id"])
        pred = (p is not None and p["alpha_set"] == r["alpha_set"] and p["k"] == r["k"]
                and p["target_sha256"] == r["target_sha256"] and p["drafter_key"] == r["drafter_key"]
                and p["engine_build"] == r["engine_build"] and p["predicted_speedup"] == r["predicted_speedup"]
                and p["created_at"] <= r["measured_at"])
        if not pred:
            return False, "prediction %r was not stored before it for the same configuration" % r["prediction_id"]
        return good, why

    check_spec_rows(d, ck, "spec_synth", spec_synth_label, lambda r: r["alpha_set"] is None and r["k"] == 0, synth_ok)


# ---------------------------------------------------------------------------------------
# loadtest: every statistic from the per-request samples.


def request_outputs(p, ok):
    """Output tokens of each completed request: the server's usage count, else (token
    source 'chunks') its output chunks; None where the tokenizer counted it (the count is
    not in samples_json)."""
    out = []
    for s in ok:
        if s.get("usage_completion_tokens") is not None:
            out.append(s["usage_completion_tokens"])
        elif p["token_source"] == "chunks":
            out.append(len(s["chunk_ms"]))
        else:
            out.append(None)
    return out


def loadtest_output_tps(p):
    try:
        samples = json.loads(p["samples_json"])
    except (TypeError, ValueError):
        return None
    ok = [s for s in samples if s.get("outcome") == "ok"]
    n = request_outputs(p, ok)
    if not ok or any(x is None for x in n):
        return None
    return sum(n) / p["duration_s"]


def parse_slo(text):
    out = {}
    for item in re.split(r"[, ]", text or ""):
        if item:
            name, v = item.split(":", 1)
            out[name] = float(v)
    return out


def check_loadtest(d, ck):
    for p in d.rows("loadtest_points"):
        where = "loadtest_points row %d" % p["id"]
        try:
            samples = json.loads(p["samples_json"])
            assert isinstance(samples, list)
        except (TypeError, ValueError, AssertionError):
            ck.ok("loadtest: samples_json is a JSON array of requests", False, where)
            continue
        ok = [s for s in samples if s.get("outcome") == "ok"]
        counts = (len(samples), len(ok), sum(s.get("outcome") == "rejected" for s in samples),
                  sum(s.get("outcome") == "failed" for s in samples))
        ck.ok("loadtest: n_sent, n_completed, n_rejected, n_failed from samples_json", counts ==
              (p["n_sent"], p["n_completed"], p["n_rejected"], p["n_failed"]),
              "%s: stored %r, recomputed %r" % (where, (p["n_sent"], p["n_completed"], p["n_rejected"], p["n_failed"]), counts))
        if not ok:
            continue
        bad = [s["index"] for s in ok if not s["chunk_ms"] or s["chunk_ms"][0] < 0
               or any(b < a for a, b in zip(s["chunk_ms"], s["chunk_ms"][1:])) or s["chunk_ms"][-1] > s["e2el_ms"]]
        ck.ok("loadtest: each completed request's chunk times rise from >= 0 to <= its E2EL (samples_json)", not bad,
              "%s: requests %r" % (where, bad[:5]))
        if bad:
            continue
        dur = p["duration_s"]
        last = max(s["start_ms"] + s["e2el_ms"] for s in samples if s.get("outcome") == "ok")
        ck.ok("loadtest: duration_s covers every completed request (start_ms + e2el_ms, samples_json)",
              dur * 1e3 >= last * (1 - 1e-9), "%s: duration %r s, a request ended at %r ms" % (where, dur, last))
        ck.close("loadtest: request_throughput_rps from samples_json (completed / duration_s)",
                 p["request_throughput_rps"], len(ok) / dur, where)
        n_out = request_outputs(p, ok)
        known = all(x is not None for x in n_out)
        name_tot = "loadtest: total_output_tokens, output_throughput_tps from samples_json"
        if known:
            ck.ok(name_tot, p["total_output_tokens"] == sum(n_out) and agree(p["output_throughput_tps"], sum(n_out) / dur),
                  "%s: stored %r tokens / %r tok/s, recomputed %r / %r" % (
                      where, p["total_output_tokens"], p["output_throughput_tps"], sum(n_out), sum(n_out) / dur))
            src = "usage" if all(s.get("usage_completion_tokens") is not None for s in ok) else p["token_source"]
            ck.ok("loadtest: token_source from samples_json (usage when every request had it)",
                  p["token_source"] == src, "%s: stored %r, recomputed %r" % (where, p["token_source"], src))
        else:
            ck.skip(name_tot, "%s: the tokenizer's per-request counts are not in samples_json" % where)
        ins = [s.get("usage_prompt_tokens") for s in ok]
        want_in = sum(ins) if all(x is not None for x in ins) else None
        ck.ok("loadtest: total_input_tokens from samples_json (usage prompt tokens)", p["total_input_tokens"] == want_in,
              "%s: stored %r, recomputed %r" % (where, p["total_input_tokens"], want_in))
        cached = [s["cached_tokens"] for s in ok if s.get("cached_tokens") is not None]
        ck.close("loadtest: mean_cached_tokens from samples_json", p["mean_cached_tokens"],
                 mean(cached) if cached else None, where)
        # vLLM's metric definitions.
        ttft = [s["chunk_ms"][0] for s in ok]
        e2el = [s["e2el_ms"] for s in ok]
        itl = [b - a for s in ok for a, b in zip(s["chunk_ms"], s["chunk_ms"][1:])]
        tpot = [(s["e2el_ms"] - s["chunk_ms"][0]) / (n - 1) for s, n in zip(ok, n_out) if n is not None and n > 1]
        dists = {"ttft": ttft, "itl": itl, "e2el": e2el}
        if known:
            dists["tpot"] = tpot
        else:
            for stat in ("mean", "median", "p90", "p99"):
                ck.skip("loadtest: tpot_%s_ms from samples_json" % stat,
                        "%s: TPOT needs each request's output tokens, which the tokenizer counted" % where)
        for metric, xs in dists.items():
            want = {"mean": mean(xs) if xs else None,
                    "median": percentile(xs, 50) if xs else None,
                    "p90": percentile(xs, 90) if xs else None,
                    "p99": percentile(xs, 99) if xs else None}
            for stat, w in want.items():
                col = "%s_%s_ms" % (metric, stat)
                ck.close("loadtest: %s from samples_json" % col, p[col], w, where)
        slo = parse_slo(p["slo"])
        if not slo:
            ck.ok("loadtest: no goodput without an SLO", p["goodput_rps"] is None, "%s: %r" % (where, p["goodput_rps"]))
        elif not known and "tpot" in slo:
            ck.skip("loadtest: goodput_rps from samples_json and the SLO", "%s: TPOT unknown per request" % where)
        else:
            good = 0
            for s, n in zip(ok, n_out):
                req_tpot = (s["e2el_ms"] - s["chunk_ms"][0]) / (n - 1) if n is not None and n > 1 else None
                vals = {"ttft": s["chunk_ms"][0], "tpot": req_tpot, "e2el": s["e2el_ms"]}
                if all((vals[k] if vals[k] is not None else 0.0) <= b for k, b in slo.items()):
                    good += 1
            ck.close("loadtest: goodput_rps from samples_json and the SLO", p["goodput_rps"], good / dur, where)
        # The level's measured span is its timed interval.
        e = d.loadtest_energy.get(p["id"])
        if e is not None and p["run_id"] in d.runs_with_intervals:
            iv = d.intervals[p["run_id"]].get(e["phase"], [])
            if len(iv) == 1:
                ck.close("loadtest: duration_s is its level's timed interval (sampler_intervals)", dur,
                         (iv[0]["end_ns"] - iv[0]["start_ns"]) / 1e9, where, rel=1e-9)
            else:
                ck.ok("loadtest: duration_s is its level's timed interval (sampler_intervals)", False,
                      "%s: phase %r has %d intervals" % (where, e["phase"], len(iv)))


# ---------------------------------------------------------------------------------------
# energy: each energy row integrated again over the sampler series.


def integrate(windows, inside, sources):
    """Σ over windows of each source's energy: an energy counter's rate between the
    window's first and last read times its length; a power column's mean over the reads
    times its length. A source counts only when it answered in every window; a scope
    already covered (a GPU board with an energy counter) is not counted twice. Returns
    (joules, sources used, True when a counter went backwards)."""
    total, used = 0.0, []
    for src in sources:
        name, scope, energy_col, power_col = src
        if any(u[1] == scope for u in used):
            continue
        s, every = 0.0, True
        for (a, b), v in zip(windows, inside):
            length = (b - a) / 1e9
            first, last = v[0], v[-1]
            if energy_col:
                x, y = first.get(energy_col), last.get(energy_col)
                if x is None or y is None or last["t_ns"] <= first["t_ns"]:
                    every = False
                    break
                s += (y - x) / ((last["t_ns"] - first["t_ns"]) / 1e9) * length
            else:
                w = [r[power_col] for r in v if r.get(power_col) is not None]
                if not w:
                    every = False
                    break
                s += mean(w) * length
        if not every:
            continue
        if s < 0:
            return 0.0, [], True
        total += s
        used.append(src)
    return total, used, False


def reads_inside(series, windows):
    return [[r for r in series if a <= r["t_ns"] <= b] for a, b in windows]


def expected_energy(d, run_id, windows, tokens):
    """What an energy row over `windows` of run `run_id`, whose work produced `tokens`,
    must hold, from the definition (Recording::energy_over's documentation)."""
    series = d.series.get(run_id, [])
    inside = reads_inside(series, windows)
    timed = sum(b - a for a, b in windows)
    full = [v for v in inside if len(v) >= MIN_READS]
    covered = sum(v[-1]["t_ns"] - v[0]["t_ns"] for v in full)
    out = {"samples": sum(len(v) for v in inside), "timed_ns": timed, "covered_ns": covered, "tokens": tokens}
    counters = d.counters.get(run_id, [])
    any_counter = any(c["available"] for c in counters if c["name"] in ENERGY_COUNTERS)
    energy, used = None, []
    if (any_counter and windows and timed > 0 and all(len(v) >= MIN_READS for v in inside)
            and covered / timed >= MIN_COVERAGE):
        j, used, backwards = integrate(windows, inside, SOURCES)
        if not backwards and used:
            energy = j
        else:
            used = []
    out["energy_j"] = energy
    out["energy_source"] = " + ".join(u[0] for u in used)
    out["energy_scope"] = " + ".join(u[1] for u in used)
    timed_s = timed / 1e9
    out["mean_power_w"] = energy / timed_s if energy is not None and timed > 0 else None
    out["j_per_token"] = energy / tokens if energy is not None and tokens > 0 else None
    out["tokens_per_wh"] = 3600 / out["j_per_token"] if out["j_per_token"] else None
    idle = None
    if energy is not None:
        iw = [(i["start_ns"], i["end_ns"]) for i in d.intervals[run_id].get(IDLE_PHASE, [])]
        ii = reads_inside(series, iw)
        idle_ns = sum(b - a for a, b in iw)
        if iw and all(len(v) >= MIN_READS for v in ii) and idle_ns > 0:
            j, u, backwards = integrate(iw, ii, used)
            if not backwards and len(u) == len(used):
                idle = j / (idle_ns / 1e9)
    out["idle_power_w"] = idle
    # A row that drew less than the idle baseline has no figure above it (None).
    above = (energy - idle * timed_s) if energy is not None and idle is not None else None
    out["j_per_token_above_idle"] = above / tokens if above is not None and above >= 0 and tokens > 0 else None
    others = steal = secs = 0.0
    for v in full:
        a, b = v[0], v[-1]
        cols = ("cpu_busy_s", "own_cpu_s", "cpu_steal_s")
        if all(a.get(c) is not None and b.get(c) is not None for c in cols):
            others += (b["cpu_busy_s"] - a["cpu_busy_s"]) - (b["own_cpu_s"] - a["own_cpu_s"])
            steal += b["cpu_steal_s"] - a["cpu_steal_s"]
            secs += (b["t_ns"] - a["t_ns"]) / 1e9
    out["other_cpu_cores"] = others / secs if secs > 0 else None
    gpu_others = [r["gpu_other_util_pct"] for v in inside for r in v if r.get("gpu_other_util_pct") is not None]
    out["other_gpu_util_pct"] = sum(gpu_others) / len(gpu_others) if gpu_others else None
    out["steal_cores"] = steal / secs if secs > 0 else None
    reads = [r for v in inside for r in v]
    temps = [r[c] for r in reads for c in ("cpu_temp_c", "gpu_temp_c") if r.get(c) is not None]
    out["peak_temp_c"] = max(temps) if temps else None
    dram = [r["dram_gbps"] for r in reads if r.get("dram_gbps") is not None]
    out["live_dram_gbps"] = mean(dram) if dram else None
    util = [r["gpu_mem_util_pct"] for r in reads if r.get("gpu_mem_util_pct") is not None]
    out["gpu_mem_util_pct"] = mean(util) if util else None
    throttled = None
    for tc, mc in (("cpu_temp_c", "cpu_mhz"), ("gpu_temp_c", "gpu_sm_mhz")):
        known = [(r[tc], r[mc]) for r in reads if r.get(tc) is not None and r.get(mc) is not None]
        if not known:
            continue
        top = max(m for _, m in known)
        seen = any(t >= HOT_C and m < (1 - CLOCK_DROP) * top for t, m in known)
        throttled = bool(throttled) or seen
    out["throttled"] = throttled
    return out


def energy_rows(d):
    """(table, key, row, run_id, phases, tokens or None, how the tokens are known) for
    every energy row."""
    bench = d.by_id["bench_results"]
    points = d.by_id["loadtest_points"]
    for e in d.rows("row_energy"):
        b = bench.get(e["row_id"])
        raw = bench_raw(b) if b else None
        toks = tokens_per_rep(b) * len(raw[0]) if raw else None
        yield ("row_energy", "row_energy row %d" % e["row_id"], e, e["run_id"], [e["phase"]], toks,
               "tokens per repetition x repetitions (bench_results.samples_ns)")
    for e in d.rows("loadtest_energy"):
        p = points.get(e["point_id"])
        yield ("loadtest_energy", "loadtest_energy row %d" % e["point_id"], e, e["run_id"], [e["phase"]],
               p["total_output_tokens"] if p else None, "the level's total_output_tokens")
    for table, rows, label in (("spec_bench_energy", d.by_id["spec_bench"], spec_bench_label),
                               ("spec_synth_energy", d.by_id["spec_synth"], spec_synth_label)):
        for e in d.rows(table):
            r = rows.get(e["row_id"])
            tps = jl(r["tps_samples"]) if r else None
            phases = [label(r, i) for i in range(len(tps))] if tps else []
            yield (table, "%s row %d" % (table, e["row_id"]), e, e["run_id"], phases,
                   r["n_emitted"] if r else None, "the row's n_emitted")
    for e in d.rows("serve_energy"):
        yield ("serve_energy", "serve_energy run %d" % e["run_id"], e, e["run_id"], [e["phase"]], None,
               "the server's own count (not re-derivable from the store)")


FLOAT_FIELDS = ("energy_j", "mean_power_w", "j_per_token", "tokens_per_wh", "idle_power_w",
                "j_per_token_above_idle", "other_cpu_cores", "steal_cores", "peak_temp_c",
                "live_dram_gbps", "gpu_mem_util_pct", "other_gpu_util_pct")


def check_energy(d, ck):
    src = "sampler_series+sampler_intervals"
    bench = d.by_id["bench_results"]
    for e in d.rows("row_energy"):
        b = bench.get(e["row_id"])
        ck.ok("energy: a row's energy belongs to its bench row's run", b is not None and b["run_id"] == e["run_id"],
              "row_energy row %d: run %r, its bench row's run %r" % (e["row_id"], e["run_id"], b and b["run_id"]))
    for table, where, e, run_id, phases, tokens, how in energy_rows(d):
        # Every energy row: a missing J/token says why; tokens/Wh is 3600 / J/token.
        if e["j_per_token"] is None:
            ck.ok("energy: a missing J/token says why", bool(e["reason"]), where)
        elif e["tokens_per_wh"] is not None:
            ck.close("energy: tokens_per_wh = 3600 / j_per_token", e["tokens_per_wh"], 3600 / e["j_per_token"], where)
        if "tokens" not in e or e.get("timed_ns") is None:
            ck.skip("energy: %s.j_per_token from %s" % (table, src),
                    "%s: stored before energy rows held their tokens and timed time" % where)
            continue
        if tokens is not None:
            ck.ok("energy: %s.tokens = %s" % (table, how), e["tokens"] == tokens,
                  "%s: stored %r, recomputed %r" % (where, e["tokens"], tokens))
        else:
            tokens = e["tokens"]
        if run_id not in d.runs_with_intervals:
            ck.skip("energy: %s.j_per_token from %s" % (table, src),
                    "%s: run %d has no timed intervals stored" % (where, run_id))
            continue
        missing = [p for p in phases if p not in d.intervals[run_id]]
        if not phases or missing:
            ck.ok("energy: %s: every phase of the row has its timed intervals" % table, False,
                  "%s: phases %r have none" % (where, missing or phases))
            continue
        windows = [(i["start_ns"], i["end_ns"]) for p in phases for i in d.intervals[run_id][p]]
        want = expected_energy(d, run_id, windows, tokens)
        ck.ok("energy: %s.samples, timed_ns, covered_ns from %s" % (table, src),
              (e["samples"], e["timed_ns"], e["covered_ns"]) == (want["samples"], want["timed_ns"], want["covered_ns"]),
              "%s: stored %r, recomputed %r" % (where, (e["samples"], e["timed_ns"], e["covered_ns"]),
                                                (want["samples"], want["timed_ns"], want["covered_ns"])))
        ck.close("energy: %s.energy_j from %s" % (table, src), e["energy_j"], want["energy_j"], where, abs_tol=1e-9)
        ck.close("energy: %s.j_per_token from %s" % (table, src), e["j_per_token"], want["j_per_token"], where,
                 abs_tol=1e-12)
        ck.close("energy: %s.tokens_per_wh from %s" % (table, src), e["tokens_per_wh"], want["tokens_per_wh"], where)
        ck.close("energy: %s.mean_power_w from %s" % (table, src), e["mean_power_w"], want["mean_power_w"], where,
                 abs_tol=1e-9)
        ck.ok("energy: %s.energy_source, energy_scope from which counters answered in every interval" % table,
              (e["energy_source"] or "", e.get("energy_scope") or "") == (want["energy_source"], want["energy_scope"]),
              "%s: stored %r / %r, recomputed %r / %r" % (where, e["energy_source"], e.get("energy_scope"),
                                                          want["energy_source"], want["energy_scope"]))
        ck.ok("energy: %s.idle_power_w, j_per_token_above_idle from the idle intervals" % table,
              agree(e["idle_power_w"], want["idle_power_w"], abs_tol=1e-9)
              and agree(e["j_per_token_above_idle"], want["j_per_token_above_idle"], abs_tol=1e-12),
              "%s: stored %r / %r, recomputed %r / %r" % (where, e["idle_power_w"], e["j_per_token_above_idle"],
                                                          want["idle_power_w"], want["j_per_token_above_idle"]))
        ck.ok("energy: %s.other_cpu_cores, steal_cores from sampler_series cpu_busy_s, own_cpu_s, cpu_steal_s" % table,
              agree(e["other_cpu_cores"], want["other_cpu_cores"], abs_tol=1e-9)
              and agree(e["steal_cores"], want["steal_cores"], abs_tol=1e-9),
              "%s: stored %r / %r, recomputed %r / %r" % (where, e["other_cpu_cores"], e["steal_cores"],
                                                          want["other_cpu_cores"], want["steal_cores"]))
        ck.ok("energy: %s.other_gpu_util_pct from sampler_series gpu_other_util_pct" % table,
              agree(e.get("other_gpu_util_pct"), want["other_gpu_util_pct"], abs_tol=1e-9),
              "%s: stored %r, recomputed %r" % (where, e.get("other_gpu_util_pct"), want["other_gpu_util_pct"]))
        stored_thr = None if e["throttled"] is None else bool(e["throttled"])
        ck.ok("energy: %s.peak_temp_c, throttled, live_dram_gbps, gpu_mem_util_pct from sampler_series" % table,
              agree(e["peak_temp_c"], want["peak_temp_c"]) and stored_thr == want["throttled"]
              and agree(e["live_dram_gbps"], want["live_dram_gbps"]) and agree(e["gpu_mem_util_pct"], want["gpu_mem_util_pct"]),
              "%s: stored %r, recomputed %r" % (
                  where, (e["peak_temp_c"], stored_thr, e["live_dram_gbps"], e["gpu_mem_util_pct"]),
                  (want["peak_temp_c"], want["throttled"], want["live_dram_gbps"], want["gpu_mem_util_pct"])))
    # A bench row's samples are its timed intervals' lengths.
    energy_of = {e["row_id"]: e for e in d.t["row_energy"]}
    for r in d.rows("bench_results"):
        where = "bench_results row %d" % r["id"]
        name = "bench: samples_ns are the lengths of the row's timed intervals (sampler_intervals)"
        if r["run_id"] not in d.runs_with_intervals:
            if d.counters.get(r["run_id"]):
                ck.skip(name, "%s: run %d has a sampler recording without timed intervals" % (where, r["run_id"]))
            continue
        e = energy_of.get(r["id"])
        if e is None:
            ck.ok("energy: every bench row of a sampled run has its row_energy", False, where)
            continue
        raw = bench_raw(r)
        lens = [i["end_ns"] - i["start_ns"] for i in sorted(d.intervals[r["run_id"]].get(e["phase"], []),
                                                            key=lambda i: (i["rep"], i["id"]))]
        ck.ok(name, raw is not None and lens == raw[0],
              "%s: samples_ns %r, intervals of phase %r %r" % (where, raw and raw[0], e["phase"], lens))


def check_predictions(d, ck):
    avgs = defaultdict(list)
    for b in d.t["bench_results"]:
        avgs[b["run_id"]].append(b["avg_ts"])
    for r in sorted(d.t["prediction_scores"], key=lambda r: (r["sheet_id"], r["run_id"])):
        card = json.loads(r["result_json"])
        for i, t in enumerate(card.get("tests", [])):
            where = "prediction_scores sheet %d run %d test %d" % (r["sheet_id"], r["run_id"], i)
            if t.get("predicted_tps") is not None and t.get("measured_tps") is not None:
                ck.close("predict: error % = (measured - predicted) / predicted x 100", t["error_pct"],
                         (t["measured_tps"] - t["predicted_tps"]) / t["predicted_tps"] * 100, where)
            if t.get("measured_tps") is not None:
                ck.ok("predict: the measured figure is a bench row of the scored run",
                      any(a is not None and abs(a - t["measured_tps"]) <= REL * abs(a) for a in avgs[r["run_id"]]),
                      "%s: %r is no row's avg_ts in run %d" % (where, t["measured_tps"], r["run_id"]))


# ---------------------------------------------------------------------------------------
# hosts and the report.


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


def run_hosts(d):
    """Run id -> its machine's label, from the run's own row (host_json holds the GPUs)."""
    out = {}
    for r in d.t["runs"]:
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


def check_hosts(d, ck, side, md):
    hosts = run_hosts(d)
    bench = d.rows("bench_results")
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


def check_report(d, ck, report_dir):
    side = json.load(open(os.path.join(report_dir, "figures.json"), encoding="utf-8"))
    md = open(os.path.join(report_dir, "report.md"), encoding="utf-8").read()
    md_rows = defaultdict(list)
    for line in md.splitlines():
        if line.startswith("| ") and "[^" in line:
            cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
            md_rows[cells[-1]].append(cells[:-1])
    keyed = {}
    for table in TABLES:
        for r in d.t[table]:
            if table == "prediction_scores":
                keyed[(table, r["sheet_id"], r["run_id"])] = r
            elif table in ENERGY_TABLES:
                k = r.get("row_id", r.get("point_id", r.get("run_id")))
                keyed[(table, k, None)] = r
            else:
                keyed[(table, r.get("id"), None)] = r

    def row(table, rid, run):
        return keyed.get((table, rid, run if table == "prediction_scores" else None))

    # The per-token floor: refit each (host, format, placement) group of the report's
    # floor table from its rows alone: t = t0 + bytes / BW_eff by least squares.
    floor_groups = defaultdict(set)
    for f in side["figures"]:
        if f["cell"] == "num" and f["column"].startswith("derived:floor_") and f.get("src"):
            floor_groups[tuple(f["labels"][:3])].add(f["src"]["row_id"])
    floor = {}
    bench = d.by_id["bench_results"]
    for key, ids in floor_groups.items():
        pts = []
        for rid in sorted(ids):
            b = bench[rid]
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
                machines = run_hosts(d)
                vals = [(x["arm_streamed_bytes"], x["value"]) for x in d.t["frontier_cells"]
                        if x["measure"] == "speed" and x["config_key"] == key and x["value"] is not None
                        and basename(x["source_file"]) == source and machines.get(x["run_id"]) == host]
                want = monotone(vals)
            else:
                ck.ok("report: every claim is known", False, "%s: %s" % (where, c))
                continue
            ck.ok("report: each claim recomputed from its row", f["value"] == want and f["text"] == ("yes" if want else "no"),
                  "%s: report says %s, recomputed %s" % (where, f["text"], want))
    # Rows whose every number is missing carry no figure: count the sidecar's tables.
    for t in side.get("tables", []):
        for row_ in t["rows"]:
            if row_["src"]:
                foot = "[^%s]" % footnote_of(row_["src"])
                key = (t["caption"], foot, tuple(row_["labels"]))
                if key not in seen_rows:
                    seen_rows.add(key)
                    ck.ok("report: report.md prints the row as its figures say",
                          row_["labels"] in md_rows.get(foot, []),
                          "%s / %s: %r not in report.md" % (t["section"], t["caption"], row_["labels"]))
    printed_rows = sum(len(v) for v in md_rows.values())
    ck.ok("report: every sourced row of report.md is in figures.json", printed_rows == len(seen_rows),
          "report.md has %d sourced rows, figures.json %d" % (printed_rows, len(seen_rows)))
    bad_cells = []
    for line in md.splitlines():
        if line.startswith("|") and not line.startswith("| ---"):
            for c in line.strip().strip("|").split(" | "):
                c = c.strip()
                # Leaks of a missing value: NaN, inf, JavaScript's undefined, JSON's null,
                # Rust's / Python's None. (Lower-case "none" is a label: a spec row's
                # drafter "none" is target-only decoding.)
                if c in ("None", "NULL") or c.lower() in ("", "nan", "inf", "-inf", "+inf", "infinity",
                                                          "-infinity", "undefined", "null"):
                    bad_cells.append((c, line))
    ck.ok("report: no NaN, inf, undefined or empty cell (a missing value prints —)", not bad_cells,
          "report.md: %r" % bad_cells[:3])
    check_hosts(d, ck, side, md)


# ---------------------------------------------------------------------------------------


def family_rows(d):
    """Per family, the rows of the store it must check (and what they are)."""
    n = lambda t: len(d.t[t])
    return OrderedDict([
        ("bench", (n("bench_results"), "bench_results rows")),
        ("implied bandwidth", (n("bench_results") + n("loadtest_points"), "bench_results + loadtest_points rows")),
        ("energy", (sum(n(t) for t in ENERGY_TABLES), " + ".join(t for t in ENERGY_TABLES if n(t)) + " rows")),
        ("loadtest", (n("loadtest_points"), "loadtest_points rows")),
        ("spec", (n("spec_bench") + n("spec_synth"), "spec_bench + spec_synth rows")),
        ("stream", (n("stream_results"), "stream_results rows")),
        ("kv", (n("kv_verify_results"), "kv_verify_results rows")),
    ])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", required=True, help="the memwall store: a SQLite file or a postgres:// URL (read through psql)")
    ap.add_argument("--report", help="a folder written by `memwall report` (report.md, figures.json)")
    a = ap.parse_args()
    if a.db.startswith(("postgres://", "postgresql://")):
        store = PsqlStore(a.db)
    elif not os.path.isfile(a.db):
        print("verify.py: --db %s: no such file" % a.db, file=sys.stderr)
        return 2
    else:
        store = SqliteStore(a.db)
    d = Data(store)
    d.loadtest_energy = {e["point_id"]: e for e in d.t["loadtest_energy"]}
    ck = Checks()
    check_roofs(d, ck)
    check_bench(d, ck)
    check_implied(d, ck)
    check_kv(d, ck)
    check_spec(d, ck)
    check_predictions(d, ck)
    check_energy(d, ck)
    check_loadtest(d, ck)
    if a.report:
        check_report(d, ck, a.report)
    print("store: %s" % store.label)
    w = max([len(k) for k in ck.counts] + [10])
    print("%-*s  %6s  %6s  %13s" % (w, "check", "passed", "failed", "not checkable"))
    for k, (p, f, s) in ck.counts.items():
        print("%-*s  %6d  %6d  %13d" % (w, k, p, f, s))
    total_p = sum(c[0] for c in ck.counts.values())
    total_f = sum(c[1] for c in ck.counts.values())
    total_s = sum(c[2] for c in ck.counts.values())
    print("%-*s  %6d  %6d  %13d" % (w, "total", total_p, total_f, total_s))
    print()
    fams = ck.families()
    rows = family_rows(d)
    print("%-18s  %6s  %6s  %6s  %13s  %s" % ("family", "checks", "passed", "failed", "not checkable", "rows in the store"))
    empty = []
    for fam in list(rows) + [f for f in fams if f not in rows]:
        p, f, s = fams.get(fam, [0, 0, 0])
        nrows, what = rows.get(fam, (None, ""))
        if nrows is None and not (p or f or s):
            continue
        print("%-18s  %6d  %6d  %6d  %13d  %s" % (fam, p + f, p, f, s, "%d %s" % (nrows, what) if nrows is not None else ""))
        if nrows and p + f == 0:
            empty.append("%s: 0 checks but %d %s%s" % (fam, nrows, what, " (%d not checkable)" % s if s else ""))
    for f in ck.failures[:40]:
        print("FAILED " + f)
    if len(ck.failures) > 40:
        print("... and %d more failures" % (len(ck.failures) - 40))
    for e in empty:
        print("FAILED " + e)
    for u in ck.unchecked[:10]:
        print("NOT CHECKABLE " + u)
    if len(ck.unchecked) > 10:
        print("... and %d more not checkable" % (len(ck.unchecked) - 10))
    if total_p == 0:
        print("FAILED: nothing was checked (an empty store proves nothing)")
        return 1
    return 1 if total_f or empty else 0


if __name__ == "__main__":
    sys.exit(main())
