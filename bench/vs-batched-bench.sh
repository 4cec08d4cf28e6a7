#!/usr/bin/env bash
# Batched decode: memwall bench --n-seqs 1,2,4,8 vs llama.cpp's llama-batched-bench on the
# same model, threads, depth/prompt and generation length; prints memwall aggregate
# tok/s ÷ llama.cpp aggregate tok/s (S_TG) per batch size.
#
# memwall fills each sequence's KV cache with D tokens (-d D, untimed) and times N
# batched decode steps; llama-batched-bench prefills D prompt tokens per sequence
# (timed separately as S_PP) and times N steps (S_TG = b·N ÷ t_TG). Both build from
# the llama.cpp sources memwall links (scripts/build-llama-tools.sh).
#
# usage: bench/vs-batched-bench.sh [MODEL|catalogue-name] [BATCHES]   env THREADS, REPS, N (128), D (128)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
"$root/scripts/build-llama-tools.sh" >&2
tools=${MEMWALL_LLAMA_TOOLS:-$HOME/.cache/memwall/llama-tools}/bin
. scripts/features.sh  # the set-up's features: the same build as `memwall bench`, no second one
cargo build --release --locked -q -p memwall-cli ${MEMWALL_FEATURES:+--features "$MEMWALL_FEATURES"}
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
mw="$target/release/memwall"
model_arg=${1:-qwen2.5-coder-0.5b-q4_k_m}
batches=${2:-1,2,4,8}
if [ -f "$model_arg" ]; then model=$model_arg; else model=$("$mw" models list --json | python3 -c "
import json,sys
for m in json.load(sys.stdin):
    if m['name']=='$model_arg': print(m['path'])"); fi
[ -f "$model" ] || { echo "model $model_arg not found (memwall models fetch $model_arg)" >&2; exit 1; }
threads=${THREADS:-$(lscpu -p=Core,Socket | grep -v '^#' | sort -u | wc -l)}
reps=${REPS:-5}; n=${N:-128}; d=${D:-128}
maxb=$(echo "$batches" | tr ',' '\n' | sort -n | tail -1)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
lock=/tmp/memwall-engine-tests.lock
echo "model $model, threads $threads, b = $batches, depth/prompt $d, gen $n, reps $reps" >&2
flock "$lock" "$mw" --db "$work/b.db" bench -m "$model" -p 0 -n "$n" -d "$d" --n-seqs "$batches" -t "$threads" -r "$reps" \
  --no-results --quiet -o json >"$work/mw.json"
for r in $(seq 1 "$reps"); do
  flock "$lock" "$tools/llama-batched-bench" -m "$model" -c $((maxb * (d + n) + 64)) -b 2048 -ub 512 \
    -npp "$d" -ntg "$n" -npl "$batches" -t "$threads" --output-format jsonl 2>/dev/null | grep '^{' >>"$work/lb.jsonl"
done
python3 - "$work" <<'PY'
import json, sys, statistics as st
work = sys.argv[1]
mw = json.load(open(f"{work}/mw.json"))
lb = [json.loads(l) for l in open(f"{work}/lb.jsonl")]
print("| b | llama-batched-bench S_TG t/s | memwall aggregate t/s | memwall ÷ llama.cpp |")
print("| -: | ---: | ---: | ---: |")
for r in sorted(mw, key=lambda r: r["n_seqs"]):
    b = r["n_seqs"]
    s = [x["speed_tg"] for x in lb if x["pl"] == b]
    m, sd = st.mean(s), (st.stdev(s) if len(s) > 1 else 0.0)
    print(f"| {b} | {m:.2f} ± {sd:.2f} (n={len(s)}) | {r['avg_ts']:.2f} ± {r['stddev_ts']:.2f} | {r['avg_ts'] / m:.3f} |")
PY
