#!/usr/bin/env bash
# The live sampler's cost: the same memwall bench with and without the sampler
# (--no-sampler), alternating, several rounds; prints with ÷ without for pp and tg.
# Goal ≥ 0.99 (the sampler costs ≤ 1 % of throughput). Run it on a quiet machine.
#
# usage: bench/sampler-overhead.sh [MODEL.gguf|catalogue-name] [ROUNDS]
#   env THREADS (default: physical cores), REPS (default 5), P (default 512), N (default 128)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
. scripts/features.sh  # the set-up's features: the same build as `memwall bench`, no second one
cargo build --release --locked -q -p memwall-cli ${MEMWALL_FEATURES:+--features "$MEMWALL_FEATURES"}
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
mw="$target/release/memwall"
model_arg=${1:-qwen2.5-coder-0.5b-q4_k_m}
rounds=${2:-4}
if [ -f "$model_arg" ]; then model=$model_arg; else model=$("$mw" models list --json | python3 -c "
import json,sys
for m in json.load(sys.stdin):
    if m['name']=='$model_arg': print(m['path'])"); fi
[ -f "$model" ] || { echo "model $model_arg not found (memwall models fetch $model_arg)" >&2; exit 1; }
threads=${THREADS:-$(lscpu -p=Core,Socket | grep -v '^#' | sort -u | wc -l)}
reps=${REPS:-5}
p=${P:-512}
n=${N:-128}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
lock=/tmp/memwall-engine-tests.lock
echo "model $model, threads $threads, reps $reps, pp$p tg$n, rounds $rounds (alternating: sampler on / off, order swapped each round)" >&2
run() { # $1 = on|off, $2 = round
  local flag=""; [ "$1" = off ] && flag=--no-sampler
  local reuse=--reuse-stream; [ -f "$work/have-stream" ] || reuse=""
  flock "$lock" "$mw" --db "$work/o.db" bench -m "$model" -p "$p" -n "$n" -d 0 -t "$threads" -r "$reps" \
    --no-results --quiet $reuse $flag -o json >"$work/$1-$2.json"
  touch "$work/have-stream"
}
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) -eq 1 ]; then run on "$r"; run off "$r"; else run off "$r"; run on "$r"; fi
done
python3 - "$work" "$rounds" "$p" "$n" <<'PY'
import json, sys, statistics as st
work, rounds, p, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def pick(rows, test):
    for r in rows:
        if test.startswith("pp") and r["n_prompt"] == p and r["n_gen"] == 0:
            return r["avg_ts"], r["stddev_ts"]
        if test.startswith("tg") and r["n_gen"] == n and r["n_prompt"] == 0:
            return r["avg_ts"], r["stddev_ts"]
    raise SystemExit(f"no {test} row")
tests = [f"pp{p}", f"tg{n}"]
print("| round | test | sampler off t/s | sampler on t/s | on ÷ off |")
print("| ----: | ---- | --------------: | -------------: | -------: |")
ratios = {t: [] for t in tests}
for r in range(1, rounds + 1):
    on = json.load(open(f"{work}/on-{r}.json")); off = json.load(open(f"{work}/off-{r}.json"))
    for t in tests:
        (a, sa), (b, sb) = pick(off, t), pick(on, t)
        ratios[t].append(b / a)
        print(f"| {r:>5} | {t} | {a:8.2f} ± {sa:5.2f} | {b:8.2f} ± {sb:5.2f} | {b / a:8.3f} |")
for t, v in ratios.items():
    m = st.mean(v); s = st.stdev(v) if len(v) > 1 else 0.0
    verdict = "meets" if m >= 0.99 else "BELOW"
    print(f"{t}: sampler on ÷ off = {m:.3f} ± {s:.3f} over {len(v)} rounds ({verdict} the 0.99 goal: ≤ 1 % overhead)")
PY
