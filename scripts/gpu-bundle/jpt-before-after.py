#!/usr/bin/env python3
"""J/token of each bench row two ways, from one store's raw sampler data (issue 39 §1):

  before: the old formula, mean power over the whole phase (warm-up, untimed depth
          prefills and all) x the timed time / the timed tokens;
  after:  the stored figure, energy integrated over the timed intervals only
          (row_energy.j_per_token), recomputed here from the series as a check.

Energy comes from the cumulative counters in sampler_series (cpu_energy_j + dram_energy_j
+ gpu_energy_j, whichever the run has), interpolated linearly at the interval edges.

usage: jpt-before-after.py STORE.db [RUN_ID]
"""
import sqlite3
import sys


def main():
    db = sqlite3.connect(sys.argv[1])
    run = int(sys.argv[2]) if len(sys.argv) > 2 else db.execute("SELECT MAX(run_id) FROM row_energy").fetchone()[0]
    if run is None:
        sys.exit(f"{sys.argv[1]}: no row_energy rows")
    series = db.execute(
        "SELECT t_ns, cpu_energy_j, dram_energy_j, gpu_energy_j FROM sampler_series WHERE run_id = ? ORDER BY t_ns", (run,)
    ).fetchall()
    cols = [i for i in (1, 2, 3) if all(s[i] is not None for s in series)]
    if not series or not cols:
        sys.exit(f"run {run}: no energy counter in the sampler series: nothing to compare")
    pts = [(s[0], sum(s[i] for i in cols)) for s in series]

    def energy_at(t):
        if t <= pts[0][0] or t >= pts[-1][0]:
            return None
        for (t0, e0), (t1, e1) in zip(pts, pts[1:]):
            if t0 <= t <= t1:
                return e0 + (e1 - e0) * (t - t0) / (t1 - t0)
        return None

    def energy(a, b):
        ea, eb = energy_at(a), energy_at(b)
        return None if ea is None or eb is None else eb - ea

    print(f"run {run}, counters: {', '.join(['cpu_energy_j', 'dram_energy_j', 'gpu_energy_j'][i - 1] for i in cols)}")
    print("| row | test | phase s | timed s | tokens | J/token whole phase (before) | J/token timed intervals (after, recomputed) | stored | after ÷ before |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    rows = db.execute(
        "SELECT e.row_id, e.phase, e.tokens, e.timed_ns, e.j_per_token, b.n_prompt, b.n_gen, b.n_depth "
        "FROM row_energy e JOIN bench_results b ON b.id = e.row_id WHERE e.run_id = ? ORDER BY e.row_id", (run,)
    ).fetchall()
    for row_id, phase, tokens, timed_ns, stored, n_p, n_g, n_d in rows:
        test = (f"pp{n_p}" if n_p else f"tg{n_g}") + (f" @ d{n_d}" if n_d else "")
        ph = db.execute("SELECT start_ns, end_ns FROM sampler_phases WHERE run_id = ? AND name = ?", (run, phase)).fetchone()
        iv = db.execute("SELECT start_ns, end_ns FROM sampler_intervals WHERE run_id = ? AND phase = ?", (run, phase)).fetchall()
        if not ph or not iv or not tokens:
            print(f"| {row_id} | {test} | — | — | — | — | — | {stored} | — |")
            continue
        e_phase = energy(*ph)
        before = None if e_phase is None else e_phase / ((ph[1] - ph[0]) / 1e9) * (timed_ns / 1e9) / tokens
        parts = [energy(a, b) for a, b in iv]
        after = None if any(p is None for p in parts) else sum(parts) / tokens
        f = lambda x, d=4: "—" if x is None else f"{x:.{d}f}"
        ratio = None if before in (None, 0) or after is None else after / before
        print(f"| {row_id} | {test} | {(ph[1] - ph[0]) / 1e9:.2f} | {timed_ns / 1e9:.2f} | {tokens} | {f(before)} | {f(after)} | {f(stored)} | {f(ratio, 3)} |")


if __name__ == "__main__":
    main()
