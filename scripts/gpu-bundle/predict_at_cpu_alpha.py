#!/usr/bin/env python3
"""The H200 speculative prediction at the acceptance the real pair shows on the CPU.

Reads the cost-model times a set-acceptance run stored on the GPU machine
(`spec_synth.timings_json` in a call's memwall.db: t_verify(j) for j = 1…k+1 rows and
t_draft, measured before its timed runs) and the per-category realised α̂ of a
`memwall spec bench --json` run of the real Qwen2.5-Coder pair on a CPU, and prints,
per category, the cost model's speedup S(α̂, k) = E(α̂, k) · t_verify(1) ÷
(k · t_draft + t_verify(k + 1)), E = (1 − α̂^(k+1)) ÷ (1 − α̂), at every k the times
cover, and the best k. This is an independent implementation of the closed form: it
first reproduces every prediction memwall stored in the same call
(`spec_synth_predictions`) and stops if one differs by more than 1e-9 relative.

usage: predict_at_cpu_alpha.py CALL_DIR CPU_SPEC.json
"""
import json
import sqlite3
import sys


def expected(a, k):
    return k + 1.0 if a >= 1.0 else (1.0 - a ** (k + 1)) / (1.0 - a)


def speedup(t, a, k):
    v, d = t["t_verify_ns"], t["t_draft_ns"]
    return expected(a, k) * v[0] / (k * d + v[k]) if k < len(v) else None


def main(call, cpu):
    db = sqlite3.connect(f"{call}/memwall.db")
    db.row_factory = sqlite3.Row
    row = db.execute("SELECT target_file, draft_file, timings_json FROM spec_synth WHERE k > 0 ORDER BY id LIMIT 1").fetchone()
    if row is None:
        sys.exit(f"{call}/memwall.db: no set-acceptance row (spec_synth) with timings")
    t = json.loads(row["timings_json"])
    for p in db.execute("SELECT alpha_set, k, predicted_speedup FROM spec_synth_predictions"):
        mine = speedup(t, p["alpha_set"], p["k"])
        if mine is None or abs(mine - p["predicted_speedup"]) > 1e-9 * p["predicted_speedup"]:
            sys.exit(f"closed form {mine} ≠ memwall's stored {p['predicted_speedup']} at α={p['alpha_set']} k={p['k']}")
    rows = json.load(open(cpu))
    rows = rows if isinstance(rows, list) else rows.get("rows", rows)
    cats = [r for r in rows if r.get("k", 0) > 0 and r.get("alpha_hat") is not None]
    if not cats:
        sys.exit(f"{cpu}: no row with a realised α̂")
    ks = range(1, len(t["t_verify_ns"]))
    print(f"Cost model on the H200 times of {call} (target {row['target_file']}, draft {row['draft_file']}: "
          f"t_verify(1) = {t['t_verify_ns'][0] / 1e6:.2f} ms, t_draft = {t['t_draft_ns'] / 1e6:.3f} ms; "
          f"the closed form reproduces memwall's {db.execute('SELECT COUNT(*) FROM spec_synth_predictions').fetchone()[0]} "
          f"stored predictions) at the α̂ the real Qwen2.5-Coder pair showed on the CPU ({cpu}):\n")
    print("| category | CPU target, draft | CPU k | realised α̂ (tested) | " + " | ".join(f"S at k={k}" for k in ks) + " | best k | best S |")
    print("| --- | --- | --- | --- | " + " | ".join("---" for _ in ks) + " | --- | --- |")
    for r in cats:
        a = r["alpha_hat"]
        st = json.loads(r.get("stats_json") or "{}")
        tested = st["n_accepted"] + st["n_rejections"] if "n_rejections" in st else "—"
        s = {k: speedup(t, a, k) for k in ks}
        best = max(s, key=lambda k: s[k])
        print(f"| {r.get('category', '—')} | {r.get('target_file', '—')}, {r.get('drafter_key', '—')} | {r['k']} | "
              f"{a:.3f} ({tested}) | " + " | ".join(f"{s[k]:.3f}" for k in ks) + f" | {best} | {s[best]:.3f} |")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
