#!/usr/bin/env python3
"""Plants one error per family in copies of a memwall store and asserts that the
independent verifier (verify.py, beside this file) fails on each, naming the family and
the raw column it recomputes from, and passes on the untouched copy.

    python3 tools/verify/plant.py --db STORE.db [--keep DIR]

The plants (each in its own copy; the store itself is never written):
  bench-std           one row's stddev_ts changed;
  bench-consistent    one tg row's every derived column (samples_ts, avg/stddev/min/max
                      t/s, avg_ns, stddev_ns, achieved fractions, GFLOP/s, implied GB/s)
                      rewritten as if its repetitions had been 5 % faster: all consistent
                      with each other, only samples_ns (and the timed intervals) disagree;
  implied-bandwidth   one tg row's implied GB/s (and its row_energy copy) changed;
  loadtest-percentile one load point's TTFT p90 changed;
  energy-j-per-token  one energy row's energy, J/token, mean power, tokens/Wh and J/token
                      above idle rewritten together (3600 / J still holds);
  spec-speedup        one speculative row's first speedup changed, its mean and std
                      recomputed to match;
  spec-consistent     one speculative row's tok/s and speedups (samples, means, stds)
                      all scaled together: only the timed decodes disagree.
A plant that finds no row to plant in fails: the store must cover every family.
Python standard library only; exits 1 when any plant is not caught.
"""

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import verify  # noqa: E402  (the verifier's statistics, to forge consistently)

VERIFY = os.path.join(HERE, "verify.py")


class NoTarget(Exception):
    pass


def one(db, sql, what):
    r = db.execute(sql).fetchone()
    if r is None:
        raise NoTarget("the store has no %s to plant in" % what)
    return r


def drop_write_once(db):
    """Speculative rows are write-once (triggers refuse an UPDATE): a forger drops them."""
    for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE '%write_once'").fetchall():
        db.execute('DROP TRIGGER "%s"' % name)


def plant_bench_std(db):
    r = one(db, "SELECT id, stddev_ts FROM bench_results WHERE json_array_length(samples_ns) >= 2 ORDER BY id", "bench row with 2+ repetitions")
    db.execute("UPDATE bench_results SET stddev_ts = ? WHERE id = ?", (r["stddev_ts"] * 1.5 + 0.01, r["id"]))
    return "bench_results row %d: stddev_ts %r -> %r" % (r["id"], r["stddev_ts"], r["stddev_ts"] * 1.5 + 0.01)


def plant_bench_consistent(db):
    r = one(db, "SELECT * FROM bench_results WHERE n_gen > 0 AND n_prompt = 0 AND implied_bandwidth_gbps IS NOT NULL "
                "AND ceiling_ts IS NOT NULL ORDER BY id", "tg bench row with a ceiling")
    r = dict(r)
    ns = [round(x / 1.05) for x in json.loads(r["samples_ns"])]
    tpr = verify.tokens_per_rep(r)
    ts = [tpr * 1e9 / x for x in ns]
    avg = verify.mean(ts)
    new = {
        "samples_ts": json.dumps(ts),
        "avg_ts": avg,
        "stddev_ts": verify.sample_std(ts),
        "min_ts": min(ts),
        "max_ts": max(ts),
        "avg_ns": verify.round_half_away(verify.mean([float(x) for x in ns])),
        "stddev_ns": verify.round_half_away(verify.sample_std([float(x) for x in ns])),
        "achieved": avg / r["ceiling_ts"],
        "achieved_gflops": avg * r["flops_per_token"] / 1e9 if r["flops_per_token"] is not None else None,
        "implied_bandwidth_gbps": r["implied_bandwidth_gbps"] * avg / r["avg_ts"],
    }
    if r["decode_ceiling_ts_read"] is not None:
        new["achieved_read"] = avg / r["decode_ceiling_ts_read"]
    db.execute("UPDATE bench_results SET %s WHERE id = ?" % ", ".join("%s = ?" % k for k in new),
               list(new.values()) + [r["id"]])
    db.execute("UPDATE row_energy SET implied_bandwidth_gbps = ? WHERE row_id = ?", (new["implied_bandwidth_gbps"], r["id"]))
    # The forgery is consistent: every relation among derived columns still holds.
    f = dict(db.execute("SELECT * FROM bench_results WHERE id = ?", (r["id"],)).fetchone())
    st = json.loads(f["samples_ts"])
    for got, want in ((f["avg_ts"], verify.mean(st)), (f["stddev_ts"], verify.sample_std(st)), (f["min_ts"], min(st)),
                      (f["max_ts"], max(st)), (f["achieved"], f["avg_ts"] / f["ceiling_ts"])):
        assert verify.agree(got, want), (got, want)
    return "bench_results row %d: samples_ts, avg/stddev/min/max t/s, avg_ns, stddev_ns, achieved, GFLOP/s and implied GB/s " \
           "rewritten as if samples_ns were %r (they stay %s)" % (r["id"], ns, r["samples_ns"])


def plant_implied(db):
    r = one(db, "SELECT id, implied_bandwidth_gbps FROM bench_results WHERE implied_bandwidth_gbps IS NOT NULL ORDER BY id",
            "bench row with an implied bandwidth")
    v = r["implied_bandwidth_gbps"] * 1.1
    db.execute("UPDATE bench_results SET implied_bandwidth_gbps = ? WHERE id = ?", (v, r["id"]))
    db.execute("UPDATE row_energy SET implied_bandwidth_gbps = ? WHERE row_id = ?", (v, r["id"]))
    return "bench_results row %d: implied_bandwidth_gbps %r -> %r" % (r["id"], r["implied_bandwidth_gbps"], v)


def plant_loadtest_percentile(db):
    r = one(db, "SELECT id, ttft_p90_ms FROM loadtest_points WHERE ttft_p90_ms IS NOT NULL ORDER BY id", "load point with a TTFT")
    db.execute("UPDATE loadtest_points SET ttft_p90_ms = ? WHERE id = ?", (r["ttft_p90_ms"] * 1.05, r["id"]))
    return "loadtest_points row %d: ttft_p90_ms %r -> %r" % (r["id"], r["ttft_p90_ms"], r["ttft_p90_ms"] * 1.05)


ENERGY_KEYS = {"row_energy": "row_id", "loadtest_energy": "point_id", "spec_bench_energy": "row_id",
               "spec_synth_energy": "row_id", "serve_energy": "run_id"}


def plant_energy(db):
    for table, key in ENERGY_KEYS.items():
        try:
            r = db.execute("SELECT * FROM %s WHERE j_per_token IS NOT NULL ORDER BY %s" % (table, key)).fetchone()
        except sqlite3.OperationalError:
            continue
        if r is None:
            continue
        r = dict(r)
        e = r["energy_j"] * 1.1
        j = e / r["tokens"]
        above = None
        if r["idle_power_w"] is not None:
            above = (e - r["idle_power_w"] * r["timed_ns"] / 1e9) / r["tokens"]
        db.execute("UPDATE %s SET energy_j = ?, j_per_token = ?, tokens_per_wh = ?, mean_power_w = ?, "
                   "j_per_token_above_idle = ? WHERE %s = ?" % (table, key),
                   (e, j, 3600 / j, e / (r["timed_ns"] / 1e9), above, r[key]))
        return "%s row %d: energy_j %r -> %r, j_per_token %r -> %r (tokens/Wh, mean power, above idle to match)" % (
            table, r[key], r["energy_j"], e, r["j_per_token"], j), table
    raise NoTarget("the store has no energy row with a J/token to plant in")


def spec_target(db):
    for table in ("spec_bench", "spec_synth"):
        try:
            r = db.execute("SELECT * FROM %s WHERE k > 0 AND speedup_samples IS NOT NULL ORDER BY id" % table).fetchone()
        except sqlite3.OperationalError:
            continue
        if r is not None:
            return table, dict(r)
    raise NoTarget("the store has no speculative row with a speedup to plant in")


def plant_spec_speedup(db):
    table, r = spec_target(db)
    drop_write_once(db)
    sp = json.loads(r["speedup_samples"])
    sp[0] *= 1.1
    db.execute("UPDATE %s SET speedup_samples = ?, speedup_mean = ?, speedup_std = ? WHERE id = ?" % table,
               (json.dumps(sp), verify.mean(sp), verify.sample_std(sp), r["id"]))
    return "%s row %d: speedup_samples %s -> %s, mean and std to match" % (table, r["id"], r["speedup_samples"], json.dumps(sp))


def plant_spec_consistent(db):
    table, r = spec_target(db)
    drop_write_once(db)
    tps = [x * 1.1 for x in json.loads(r["tps_samples"])]
    sp = [x * 1.1 for x in json.loads(r["speedup_samples"])]
    db.execute("UPDATE %s SET tps_samples = ?, tps_mean = ?, tps_std = ?, speedup_samples = ?, speedup_mean = ?, "
               "speedup_std = ? WHERE id = ?" % table,
               (json.dumps(tps), verify.mean(tps), verify.sample_std(tps), json.dumps(sp), verify.mean(sp),
                verify.sample_std(sp), r["id"]))
    return "%s row %d: tok/s and speedups (samples, means, stds) all x 1.1" % (table, r["id"])


# name, planting function, the FAILED lines the verifier must print (prefixes).
PLANTS = [
    ("bench-std", plant_bench_std, ["FAILED bench: stddev_ts from samples_ns"]),
    ("bench-consistent", plant_bench_consistent,
     ["FAILED bench: samples_ts from samples_ns", "FAILED bench: avg_ts from samples_ns"]),
    ("implied-bandwidth", plant_implied, ["FAILED implied bandwidth: bench_results.implied_bandwidth_gbps from samples_ns"]),
    ("loadtest-percentile", plant_loadtest_percentile, ["FAILED loadtest: ttft_p90_ms from samples_json"]),
    ("energy-j-per-token", plant_energy, ["FAILED energy: {table}.j_per_token from sampler_series+sampler_intervals"]),
    ("spec-speedup", plant_spec_speedup,
     ["FAILED spec: speedup_samples = tps_samples / the target-only row's tps_samples"]),
    ("spec-consistent", plant_spec_consistent,
     ["FAILED spec: tps_samples from sampler_intervals", "FAILED spec: speedup_samples from sampler_intervals"]),
]


def copy_store(src, dst):
    """A consistent copy of a SQLite store (SQLite's backup: the pages still in the
    write-ahead log of a store another process has open come with it)."""
    if os.path.exists(dst):
        os.remove(dst)
    s = sqlite3.connect("file:%s?mode=ro" % src, uri=True)
    d = sqlite3.connect(dst)
    s.backup(d)
    d.close()
    s.close()


def run_verify(db):
    p = subprocess.run([sys.executable, VERIFY, "--db", db], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", required=True, help="a memwall SQLite store covering every family")
    ap.add_argument("--keep", help="keep the planted copies in this folder")
    ap.add_argument("--save", help="also write a consistent copy of the store here (for later runs of this script)")
    a = ap.parse_args()
    if not os.path.isfile(a.db):
        print("plant.py: --db %s: no such file" % a.db, file=sys.stderr)
        return 2
    work = a.keep or tempfile.mkdtemp(prefix="memwall-plant-")
    os.makedirs(work, exist_ok=True)
    bad = []
    if a.save:
        copy_store(a.db, a.save)
    clean = os.path.join(work, "untouched.db")
    copy_store(a.db, clean)
    rc, out = run_verify(clean)
    print("== untouched copy: verify.py exits %d" % rc)
    lines = out.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith("family ")), len(lines))
    print("\n".join(lines[start:]))
    if rc != 0:
        bad.append("untouched: verify.py exits %d" % rc)
    for name, fn, want in PLANTS:
        path = os.path.join(work, "%s.db" % name)
        copy_store(a.db, path)
        db = sqlite3.connect(path)
        db.row_factory = sqlite3.Row
        try:
            got = fn(db)
        except NoTarget as e:
            print("== %s: NOT PLANTED: %s" % (name, e))
            bad.append("%s: %s" % (name, e))
            continue
        db.commit()
        db.close()
        what, table = got if isinstance(got, tuple) else (got, None)
        rc, out = run_verify(path)
        failed = [l for l in out.splitlines() if l.startswith("FAILED")]
        print("== %s: %s" % (name, what))
        print("   verify.py exits %d" % rc)
        for l in failed:
            print("   " + l)
        missing = [w.format(table=table) for w in want if not any(l.startswith(w.format(table=table)) for l in failed)]
        if rc != 1 or missing:
            bad.append("%s: verify.py exits %d, missing %r" % (name, rc, missing))
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    print()
    if bad:
        for b in bad:
            print("PLANT NOT CAUGHT " + b)
        return 1
    print("every planted error failed the verifier (%d plants), and the untouched copy passed" % len(PLANTS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
