"""The table of bench/vs-mlx-lm.sh and scripts/gpu-bundle/mlx.sh: memwall-MLX tg ÷ mlx-lm tg
per round and bit width, from the runs' JSON in WORK: mem-B-R.json (memwall bench -o json,
as shipped), one-B-R.json (memwall with MEMWALL_MLX_LANES=1; optional: the column is
left out when no round has it) and lm-B-R.json (bench/vs_mlx_lm.py's last line; its
tg_tps_sync, mlx-lm's model stepped synchronously as memwall's bench steps, adds a
column and a ratio when every round has it) and gen-B-R.json (`memwall mlx generate
--json`: memwall-MLX's greedy generation pipelined as generate_step is; optional, adds a
column and its ratio to generate_step, the like-for-like one, when every round has it).

usage: vs_mlx_lm_table.py WORK ROUNDS
"""
import json
import os
import statistics as st
import sys


def first_json(path):
    # memwall bench -o json may print its tables after the JSON value.
    return json.JSONDecoder().raw_decode(open(path).read().lstrip())[0]


def lm_line(work, b, r):
    return json.loads(open(f"{work}/lm-{b}-{r}.json").read().strip().splitlines()[-1])


def main():
    work, rounds = sys.argv[1], int(sys.argv[2])
    lanes = any(os.path.exists(f"{work}/one-{b}-{r}.json") for b in (4, 8) for r in range(1, rounds + 1))
    sync = all("tg_tps_sync" in lm_line(work, b, r) for b in (4, 8) for r in range(1, rounds + 1))
    gen = all(os.path.exists(f"{work}/gen-{b}-{r}.json") for b in (4, 8) for r in range(1, rounds + 1))
    head = ["round", "bits", "memwall-MLX tg t/s"] + (["memwall-MLX, one lane"] if lanes else []) + ["mlx-lm tg t/s", "ratio"] + (["ratio, one lane"] if lanes else [])
    head += ["mlx-lm model, synchronous steps t/s", "ratio to it"] if sync else []
    head += ["memwall-MLX pipelined greedy t/s", "pipelined ÷ generate_step"] if gen else []
    print("| " + " | ".join(head) + " |")
    print("| " + " | ".join("---:" for _ in head) + " |")
    ratios = {4: [], 8: []}
    ones = {4: [], 8: []}
    syncs = {4: [], 8: []}
    gens = {4: [], 8: []}
    for r in range(1, rounds + 1):
        for b in (4, 8):
            m = first_json(f"{work}/mem-{b}-{r}.json")[0]["avg_ts"]
            line = lm_line(work, b, r)
            l = line["tg_tps"]
            ratios[b].append(m / l)
            cells = [str(r), str(b), f"{m:.2f}"]
            if lanes:
                o = first_json(f"{work}/one-{b}-{r}.json")[0]["avg_ts"]
                ones[b].append(o / l)
                cells.append(f"{o:.2f}")
            cells += [f"{l:.2f}", f"{m / l:.3f}"]
            if lanes:
                cells.append(f"{o / l:.3f}")
            if sync:
                y = line["tg_tps_sync"]
                syncs[b].append(m / y)
                cells += [f"{y:.2f}", f"{m / y:.3f}"]
            if gen:
                g = json.load(open(f"{work}/gen-{b}-{r}.json"))["avg_ts"]
                gens[b].append(g / l)
                cells += [f"{g:.2f}", f"{g / l:.3f}"]
            print("| " + " | ".join(cells) + " |")
    for b in (4, 8):
        for what, v in (("as shipped", ratios[b]), ("one lane", ones[b])):
            if not v:
                continue
            m = st.mean(v)
            s = st.stdev(v) if len(v) > 1 else 0.0
            verdict = "bench tg steps synchronously, generate_step pipelined" if gen else ("meets" if m >= 0.95 else "BELOW") + " the 0.95 goal"
            print(f"{b}-bit, {what}: memwall-MLX bench tg ÷ mlx-lm generate_step tg = {m:.3f} ± {s:.3f} over {len(v)} rounds ({verdict})")
        if syncs[b]:
            v = syncs[b]
            m = st.mean(v)
            s = st.stdev(v) if len(v) > 1 else 0.0
            print(f"{b}-bit: memwall-MLX bench tg ÷ mlx-lm's model stepped synchronously (both step synchronously) = {m:.3f} ± {s:.3f} over {len(v)} rounds")
        if gens[b]:
            v = gens[b]
            m = st.mean(v)
            s = st.stdev(v) if len(v) > 1 else 0.0
            print(f"{b}-bit: memwall-MLX pipelined greedy ÷ mlx-lm generate_step (both pipelined) = {m:.3f} ± {s:.3f} over {len(v)} rounds ({'meets' if m >= 0.95 else 'BELOW'} the 0.95 goal)")


if __name__ == "__main__":
    main()
