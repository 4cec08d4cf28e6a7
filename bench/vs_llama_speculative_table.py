#!/usr/bin/env python3
"""The comparison table of bench/vs-llama-speculative.sh.

usage: vs_llama_speculative_table.py LLAMA_JSON MEMWALL_JSON K

LLAMA_JSON: per prompt, llama-speculative at draft length K and llama-bench tg of the
target alone (written by vs-llama-speculative.sh). MEMWALL_JSON: the rows of
`memwall spec bench --json` (draft-model rows are used).

Only measured speculative runs are compared with llama.cpp: memwall at k = K, memwall's
best fixed k, and --k auto's row when auto speculated (it is then the measured row of
the k it chose). When auto turned speculation off, its row is a decision without a
measurement ("off (predicted ≤ 1)"): it is named, and no ratio is printed for it.
"""
import json
import statistics as st
import sys


def fmt_auto(auto, ls):
    """(auto's cell, its ratio cell) for one category."""
    if auto is None:
        return "—", "—"
    if auto.get("decision"):
        return f"{auto['decision']}: not measured", "— (no measurement)"
    return f"{auto['speedup_mean']:.3f} (k={auto['k']})", f"{auto['speedup_mean'] / ls:.3f}"


def table(ll, mw, k):
    """The Markdown table and summary lines, as a list of lines."""
    out = [
        f"| category | llama.cpp accept % | llama.cpp speedup (k={k}) | memwall acceptance % (k={k}) "
        f"| memwall speedup (k={k}) | memwall k={k} ÷ llama.cpp | memwall best fixed k "
        f"| memwall best fixed k ÷ llama.cpp | memwall --k auto | memwall auto ÷ llama.cpp |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    at_k, best_ratio, notes = [], [], []
    for cat in ("json", "code", "prose"):
        lc = [x for x in ll if x["category"] == cat]
        if not lc:
            continue
        ls = st.mean(x["speedup"] for x in lc)
        la = st.mean(x["accept_pct"] for x in lc)
        dm = [r for r in mw if r["category"] == cat and r["drafter_kind"] == "draft-model"]
        measured = [r for r in dm if not r["k_auto"] and not r.get("decision") and r["k"] > 0
                    and r.get("speedup_mean") is not None]
        fixed = next((r for r in measured if r["k"] == k), None)
        if fixed is None:
            sys.exit(f"memwall rows: no measured draft-model row with k = {k} for {cat}")
        best = max(measured, key=lambda r: r["speedup_mean"])
        auto = next((r for r in dm if r["k_auto"]), None)
        a_cell, a_ratio = fmt_auto(auto, ls)
        if auto is not None and auto.get("decision"):
            notes.append(f"{cat}: --k auto decided {auto['decision']}: a decision, not a measurement; "
                         f"no ratio to llama.cpp")
        at_k.append(fixed["speedup_mean"] / ls)
        best_ratio.append(best["speedup_mean"] / ls)
        acc = fixed.get("acceptance_rate")
        out.append(
            f"| {cat} | {la:.1f} | {ls:.3f} | {'—' if acc is None else f'{100 * acc:.1f}'} "
            f"| {fixed['speedup_mean']:.3f} ± {fixed['speedup_std']:.3f} | {fixed['speedup_mean'] / ls:.3f} "
            f"| {best['speedup_mean']:.3f} (k={best['k']}) | {best['speedup_mean'] / ls:.3f} "
            f"| {a_cell} | {a_ratio} |"
        )
    out.append("")
    out.append(f"memwall k={k} ÷ llama-speculative k={k}, mean over categories: {st.mean(at_k):.3f}")
    out.append(f"memwall best fixed k ÷ llama-speculative k={k}, mean over categories: {st.mean(best_ratio):.3f} "
               f"(the best of several noisy means is biased upward)")
    out.extend(notes)
    return out


def main():
    ll_path, mw_path, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
    ll = json.load(open(ll_path))
    mw = json.load(open(mw_path))
    print("\n".join(table(ll, mw, k)))
    print("\nllama.cpp raw, per prompt: id, llama-speculative decoded t/s (mean ± std), "
          "llama-bench tg t/s at the prompt's depth, accept %")
    for x in ll:
        print(f"  {x['id']}: {x['spec_tps']:.2f} ± {x['spec_std']:.2f} t/s, tg {x['tg_tps']:.2f} t/s, "
              f"accept {x['accept_pct']:.1f} %")
    print("memwall raw: measured rows' tok/s per category (decisions have none)")
    for r in mw:
        if r.get("decision"):
            print(f"  {r['category']} {r['drafter_kind']} auto: {r['decision']} (not measured)")
        elif not r["k_auto"]:
            print(f"  {r['category']} {r['drafter_kind']} k={r['k']}: {r['tps_mean']:.2f} ± {r['tps_std']:.2f} tok/s")


if __name__ == "__main__":
    main()
