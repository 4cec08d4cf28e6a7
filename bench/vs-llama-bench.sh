#!/usr/bin/env bash
# memwall bench vs llama.cpp's own llama-bench, same model, threads, p/n, reps,
# alternating in one run; prints memwall ÷ llama-bench for pp512 and tg128.
# Goal ≥ 0.98: the harness must add nothing.
#
# usage: bench/vs-llama-bench.sh [MODEL.gguf|catalogue-name] [ROUNDS]
#   env THREADS (default: physical cores), REPS (default 5)
# llama-bench is built from the llama.cpp sources memwall links (scripts/build-llama-tools.sh).
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
rounds=${2:-3}
if [ -f "$model_arg" ]; then model=$model_arg; else model=$("$mw" models list --json | python3 -c "
import json,sys
for m in json.load(sys.stdin):
    if m['name']=='$model_arg': print(m['path'])"); fi
[ -f "$model" ] || { echo "model $model_arg not found (memwall models fetch $model_arg)" >&2; exit 1; }
threads=${THREADS:-$(lscpu -p=Core,Socket | grep -v '^#' | sort -u | wc -l)}
reps=${REPS:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
lock=/tmp/memwall-engine-tests.lock
echo "model $model, threads $threads, reps $reps, rounds $rounds (alternating llama-bench / memwall)" >&2
for r in $(seq 1 "$rounds"); do
  flock "$lock" "$tools/llama-bench" -m "$model" -p 512 -n 128 -t "$threads" -r "$reps" -o json >"$work/lb-$r.json" 2>/dev/null
  reuse=$([ "$r" -gt 1 ] && echo --reuse-stream || true)
  flock "$lock" "$mw" --db "$work/vs.db" bench -m "$model" -p 512 -n 128 -d 0 -t "$threads" -r "$reps" \
    --no-results --quiet $reuse -o json >"$work/mw-$r.json"
done
python3 - "$work" "$rounds" <<'PY'
import json, sys, statistics as st
work, rounds = sys.argv[1], int(sys.argv[2])
def pick(rows, test):
    for r in rows:
        if test == "pp512" and r["n_prompt"] == 512 and r["n_gen"] == 0 and r.get("n_depth", 0) == 0:
            return r["avg_ts"], r["stddev_ts"]
        if test == "tg128" and r["n_gen"] == 128 and r["n_prompt"] == 0 and r.get("n_depth", 0) == 0:
            return r["avg_ts"], r["stddev_ts"]
    raise SystemExit(f"no {test} row")
print("| round | test  | llama-bench t/s | memwall t/s | memwall ÷ llama-bench |")
print("| ----: | ----- | --------------: | ----------: | --------------------: |")
ratios = {"pp512": [], "tg128": []}
for r in range(1, rounds + 1):
    lb = json.load(open(f"{work}/lb-{r}.json")); mw = json.load(open(f"{work}/mw-{r}.json"))
    for t in ("pp512", "tg128"):
        (a, sa), (b, sb) = pick(lb, t), pick(mw, t)
        ratios[t].append(b / a)
        print(f"| {r:>5} | {t} | {a:8.2f} ± {sa:5.2f} | {b:8.2f} ± {sb:5.2f} | {b / a:21.3f} |")
for t, v in ratios.items():
    m = st.mean(v); s = st.stdev(v) if len(v) > 1 else 0.0
    verdict = "meets" if m >= 0.98 else "BELOW"
    print(f"{t}: memwall ÷ llama-bench = {m:.3f} ± {s:.3f} over {len(v)} rounds ({verdict} the 0.98 goal)")
PY
