#!/usr/bin/env bash
# Serving: memwall serve vs llama.cpp's own llama-server, same model, threads, slots,
# context and prompts, measured by the same client (memwall loadtest, closed loop).
# The two servers alternate (A, B, A, B, … one at a time: they share the cores), and
# each repetition runs every concurrency. Prints per concurrency the medians over
# repetitions of aggregate output tok/s and TTFT p50, and the ratios memwall ÷
# llama-server (goals: tok/s ≥ 1.0, TTFT ≤ 1.05).
#
# llama-server: $LLAMA_SERVER, else ~/.cache/memwall/llama-tools/bin/llama-server (built
# from the sources memwall links). When `memwall serve` does not exist in this build,
# llama-server runs on both sides and the script says so (a check of the script and of
# the client's run-to-run spread, not a comparison).
#
# usage: bench/vs-llama-server.sh [MODEL|catalogue-name]
#   env THREADS, SLOTS (16), CTX (per-slot 512 × SLOTS), CONC (1,4,8,16), REPS (3),
#       N (requests per level, 32), IN (128), OUT (128), PORT (18080), KEEP (a folder for
#       the per-repetition JSON, every request's timings)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
. scripts/features.sh  # the set-up's features: the same build as `memwall bench`, no second one
cargo build --release --locked -q -p memwall-cli ${MEMWALL_FEATURES:+--features "$MEMWALL_FEATURES"}
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
mw="$target/release/memwall"
ls_bin=${LLAMA_SERVER:-${MEMWALL_LLAMA_TOOLS:-$HOME/.cache/memwall/llama-tools}/bin/llama-server}
[ -x "$ls_bin" ] || { echo "llama-server not found at $ls_bin (set LLAMA_SERVER)" >&2; exit 1; }
model_arg=${1:-qwen2.5-coder-0.5b-q4_k_m}
if [ -f "$model_arg" ]; then model=$model_arg; else model=$("$mw" models list --json | python3 -c "
import json,sys
for m in json.load(sys.stdin):
    if m['name']=='$model_arg': print(m['path'])"); fi
[ -f "$model" ] || { echo "model $model_arg not found (memwall models fetch $model_arg)" >&2; exit 1; }
threads=${THREADS:-$(lscpu -p=Core,Socket | grep -v '^#' | sort -u | wc -l)}
slots=${SLOTS:-16}; ctx=${CTX:-$((512 * slots))}; conc=${CONC:-1,4,8,16}; reps=${REPS:-3}
n=${N:-32}; in=${IN:-128}; out=${OUT:-128}; port=${PORT:-18080}
work=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
if "$mw" serve --help >/dev/null 2>&1; then
  a_name="memwall serve"
  a_cmd=("$mw" serve --model "$model" --parallel "$slots" --ctx-size "$ctx" --threads "$threads" --port "$port")
else
  a_name="llama-server (memwall serve absent in this build)"
  a_cmd=("$ls_bin" -m "$model" -np "$slots" -c "$ctx" -t "$threads" --port "$port" --host 127.0.0.1)
  echo "NOTE: memwall serve is not in this build: llama-server runs on both sides (no comparison)" >&2
fi
b_cmd=("$ls_bin" -m "$model" -np "$slots" -c "$ctx" -t "$threads" --port "$port" --host 127.0.0.1)
echo "model $model, threads $threads, slots $slots, ctx $ctx, concurrency $conc, reps $reps, $n requests × ($in in, $out out)" >&2

run_side() { # side rep cmd...
  local side=$1 rep=$2; shift 2
  "$@" >"$work/$side-$rep.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
    kill -0 "$pid" 2>/dev/null || { tail -20 "$work/$side-$rep.log" >&2; exit 1; }
    sleep 0.2
  done
  "$mw" --db "$work/lt.db" loadtest --url "http://127.0.0.1:$port" --endpoint completions \
    --concurrency "$conc" --num-requests "$n" --input-tokens "$in" --output-tokens "$out" \
    --warmup 2 --seed 1 --model-file "$model" --json >"$work/$side-$rep.json"
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
}
lock=/tmp/memwall-engine-tests.lock
exec 9>"$lock"; flock 9
for r in $(seq 1 "$reps"); do
  run_side a "$r" "${a_cmd[@]}"
  run_side b "$r" "${b_cmd[@]}"
done
python3 - "$work" "$reps" "$a_name" <<'PY'
import json, sys, statistics as st
work, reps, a_name = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def burst(sends, window=50.0):
    # Traffic shape: mean number of requests sent within 50 ms of each request (itself
    # included): the concurrency when a closed loop's requests stay in step (each burst
    # prefilled in one pass), 1 when they drift apart. The client is the same for both
    # servers, so a difference here comes from how each server paces its replies.
    return st.mean(sum(abs(t - u) <= window for u in sends) for t in sends)
def load(side):
    cells = {}
    for r in range(1, reps + 1):
        for p in json.load(open(f"{work}/{side}-{r}.json"))["points"]:
            c = p["load"]["concurrency"]
            cells.setdefault(c, []).append({
                "tps": p["output_throughput_tps"], "ttft": p["ttft"]["median_ms"],
                "tpot": p["tpot"]["median_ms"], "done": p["n_completed"], "sent": p["n_sent"],
                "burst": burst([q["start_ms"] for q in p["samples"]]),
                # Requests that ended at end-of-generation, short of OUT (ignore_eos not
                # honoured): fewer tokens, and the clients fall out of step.
                "short": sum(q.get("finish_reason") == "stop" for q in p["samples"])})
    return cells
a, b = load("a"), load("b")
med = lambda xs, k: st.median(x[k] for x in xs)
print(f"A = {a_name}; B = llama-server. Medians over {reps} alternating repetitions.")
print("| concurrency | A out tok/s | B out tok/s | tok/s A÷B | A TTFT p50 ms | B TTFT p50 ms | TTFT A÷B | A TPOT p50 ms | B TPOT p50 ms | A burst | B burst | A done/sent | B done/sent | A/B stopped short |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for c in sorted(a):
    at, bt = med(a[c], "tps"), med(b[c], "tps")
    af, bf = med(a[c], "ttft"), med(b[c], "ttft")
    ad = f"{sum(x['done'] for x in a[c])}/{sum(x['sent'] for x in a[c])}"
    bd = f"{sum(x['done'] for x in b[c])}/{sum(x['sent'] for x in b[c])}"
    print(f"| {c} | {at:.1f} | {bt:.1f} | {at/bt:.3f} | {af:.1f} | {bf:.1f} | {af/bf:.3f} | {med(a[c], 'tpot'):.1f} | {med(b[c], 'tpot'):.1f} | {med(a[c], 'burst'):.2f} | {med(b[c], 'burst'):.2f} | {ad} | {bd} | {sum(x['short'] for x in a[c])}/{sum(x['short'] for x in b[c])} |")
print()
print("burst: requests sent within 50 ms of each request (1 = one at a time; the concurrency = all in step).")
print()
print("Each repetition (out tok/s A ÷ B):")
print("| concurrency | " + " | ".join(f"rep {r}" for r in range(1, reps + 1)) + " |")
print("|---:|" + "---:|" * reps)
for c in sorted(a):
    print(f"| {c} | " + " | ".join(f"{x['tps']:.1f} ÷ {y['tps']:.1f} = {x['tps'] / y['tps']:.3f}" for x, y in zip(a[c], b[c])) + " |")
# The other two ratios with their spread, repetition by repetition (each A ÷ B pair ran
# back to back, A first).
for key, name in (("ttft", "TTFT p50 ms"), ("tpot", "TPOT p50 ms")):
    print()
    print(f"Each repetition ({name} A ÷ B):")
    print("| concurrency | " + " | ".join(f"rep {r}" for r in range(1, reps + 1)) + " | min–max |")
    print("|---:|" + "---:|" * (reps + 1))
    for c in sorted(a):
        rs = [x[key] / y[key] for x, y in zip(a[c], b[c])]
        print(f"| {c} | " + " | ".join(f"{x[key]:.1f} ÷ {y[key]:.1f} = {r:.3f}" for x, y, r in zip(a[c], b[c], rs))
              + f" | {min(rs):.3f}–{max(rs):.3f} |")
PY
# KEEP=DIR keeps each repetition's memwall loadtest JSON (every request's timings) there.
if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$work"/[ab]-*.json "$KEEP"/; fi
