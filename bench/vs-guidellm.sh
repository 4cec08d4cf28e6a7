#!/usr/bin/env bash
# memwall loadtest vs an independent client from PyPI (GuideLLM 0.8.1, in a venv this
# script makes under ~/.cache/memwall/venv-guidellm), against the same server at the
# same concurrency and token lengths. Prints each client's TTFT / TPOT / ITL medians
# and output tok/s, and the ratios memwall ÷ GuideLLM (goals: medians within 5 %,
# throughput within 3 %).
#
# Metric names differ: GuideLLM's "inter_token_latency" is vLLM's TPOT (per request,
# (E2EL − TTFT) ÷ (n − 1)); GuideLLM's "time_per_output_token" includes TTFT
# (E2EL ÷ n) and is not compared. memwall's ITL (every chunk gap) has no GuideLLM
# counterpart and is printed alone.
#
# usage: bench/vs-guidellm.sh URL   env ROUNDS (3), CONC (4), N (32), IN (128), OUT (128),
#        MODEL_FILE (the server's GGUF: GuideLLM's synthetic prompts need its tokenizer,
#        which this script converts once with transformers + gguf into a local folder;
#        default: the catalogue's qwen2.5-coder-0.5b-q4_k_m), MODEL (the request's
#        `model`, default the server's first listed id). GUIDELLM_ARGS replaces the
#        `guidellm run` arguments built here (the JSON report must land in
#        $WORK/guidellm.json).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
url=${1:?usage: bench/vs-guidellm.sh URL}
url=${url%/}
conc=${CONC:-4}; n=${N:-32}; in=${IN:-128}; out=${OUT:-128}
venv=$HOME/.cache/memwall/venv-guidellm
if [ ! -x "$venv/bin/guidellm" ] || ! "$venv/bin/python" -c 'import gguf' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "guidellm==0.8.1" "gguf==0.19.0"
fi
. scripts/features.sh  # the set-up's features: the same build as `memwall bench`, no second one
cargo build --release --locked -q -p memwall-cli ${MEMWALL_FEATURES:+--features "$MEMWALL_FEATURES"}
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
mw="$target/release/memwall"
if [ -z "${MODEL_FILE:-}" ]; then
  MODEL_FILE=$("$mw" models list --json | python3 -c "
import json,sys
for m in json.load(sys.stdin):
    if m['name']=='qwen2.5-coder-0.5b-q4_k_m': print(m['path'])")
fi
[ -f "$MODEL_FILE" ] || { echo "vs-guidellm: model file '$MODEL_FILE' not found (set MODEL_FILE)" >&2; exit 1; }
model=${MODEL:-$(curl -sf "$url/v1/models" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])')}
# The GGUF's tokenizer as a Hugging Face folder (no Hub access needed), cached by the
# file's size and mtime.
tok=$HOME/.cache/memwall/derived/hf-tokenizer/$(basename "$MODEL_FILE" .gguf)-$(stat -c %s-%Y "$MODEL_FILE")
if [ ! -f "$tok/tokenizer.json" ]; then
  mkdir -p "$tok"
  "$venv/bin/python" - "$MODEL_FILE" "$tok" <<'PY'
import os, sys
from transformers import AutoTokenizer
f, out = sys.argv[1], sys.argv[2]
AutoTokenizer.from_pretrained(os.path.dirname(os.path.abspath(f)), gguf_file=os.path.basename(f)).save_pretrained(out)
PY
fi
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
rounds=${ROUNDS:-3}
# GuideLLM 0.8.1 `run`: the same route (/v1/completions, streamed), concurrency, token
# lengths (it sends max_tokens with ignore_eos, as memwall loadtest does) and request
# count; 2 warm-up requests excluded from its metrics as memwall's --warmup 2.
guidellm_args() { # $1 = round (the seed, so every round sends new prompts to both clients)
  if [ -n "${GUIDELLM_ARGS:-}" ]; then echo "$GUIDELLM_ARGS"; return; fi
  echo "--backend kind=openai_http,target=$url,model=$model,request_format=/v1/completions \
    --profile kind=concurrent,streams=$conc,warmup=2 \
    --constraint kind=max_requests,count=$((n + 2)) \
    --tokenizer kind=huggingface_auto,model=$tok \
    --data kind=synthetic_text,prompt_tokens=$in,output_tokens=$out \
    --seed kind=static,value=$1 \
    --output kind=json,path=\$WORK/guidellm-$1.json --disable-console-interactive"
}
run_mw() {
  "$mw" --db "$work/lt.db" loadtest --url "$url" --model "$model" --endpoint completions --concurrency "$conc" \
    --num-requests "$n" --input-tokens "$in" --output-tokens "$out" --warmup 2 --seed "$1" --model-file "$MODEL_FILE" --json >"$work/mw-$1.json"
}
run_gl() {
  # shellcheck disable=SC2046,SC2086
  WORK=$work eval "\"$venv/bin/guidellm\" run $(guidellm_args "$1")" >"$work/guidellm-$1.log" 2>&1 \
    || { tail -30 "$work/guidellm-$1.log" >&2; exit 1; }
  [ -f "$work/guidellm-$1.json" ] || { tail -30 "$work/guidellm-$1.log" >&2; echo "vs-guidellm: no $work/guidellm-$1.json" >&2; exit 1; }
}
# Alternating, the order swapped every round, so a drift of the machine or the
# server's state falls on both clients alike.
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) = 1 ]; then run_mw "$r"; run_gl "$r"; else run_gl "$r"; run_mw "$r"; fi
  echo "round $r/$rounds done" >&2
done
python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def med(xs):
    return statistics.median(xs)
rows = []
for r in range(1, rounds + 1):
    p = json.load(open(f"{work}/mw-{r}.json"))["points"][0]
    g = json.load(open(f"{work}/guidellm-{r}.json"))["benchmarks"][0]
    ok = g["requests"]["successful"]
    # GuideLLM's per-request records, reduced with memwall's (vLLM's) definitions:
    # output tok/s = Σ output tokens ÷ (last end − first send) over the measured requests.
    span = max(q["request_end_time"] for q in ok) - min(q["request_start_time"] for q in ok)
    g_tps = sum(q["output_tokens"] for q in ok) / span
    def gmed(name):
        m = g["metrics"][name]["successful"]
        return m.get("median", m.get("percentiles", {}).get("p50"))
    rows.append({
        "ttft": (p["ttft"]["median_ms"], gmed("time_to_first_token_ms")),
        "tpot": (p["tpot"]["median_ms"], gmed("inter_token_latency_ms")),
        "tps": (p["output_throughput_tps"], g_tps),
        "tps_own": g["metrics"]["output_tokens_per_second"]["successful"]["mean"],
        "itl": p["itl"]["median_ms"],
        "prompt": ((p["total_input_tokens"] or 0) / max(p["n_completed"], 1), statistics.mean(q["prompt_tokens"] for q in ok if q.get("prompt_tokens") is not None)),
        "n": (p["n_completed"], len(ok)),
    })
names = [("ttft", "TTFT p50 ms"), ("tpot", "TPOT p50 ms (GuideLLM: inter_token_latency)"),
         ("tps", "out tok/s = Σ output tokens ÷ (last end − first send)")]
print(f"{rounds} rounds, alternating (memwall first in odd rounds); A = memwall loadtest, B = GuideLLM 0.8.1")
print()
print("| round | metric | A | B | A ÷ B |")
print("|---:|---|---:|---:|---:|")
for i, row in enumerate(rows, 1):
    for k, name in names:
        a, b = row[k]
        print(f"| {i} | {name} | {a:.2f} | {b:.2f} | {a / b:.3f} |")
print()
print("Pooled over the rounds (median of the rounds' values; goals: medians within 5 %, throughput within 3 %):")
print()
print("| metric | A | B | A ÷ B | goal |")
print("|---|---:|---:|---:|---|")
for k, name in names:
    a = med([row[k][0] for row in rows]); b = med([row[k][1] for row in rows])
    goal = 0.03 if k == "tps" else 0.05
    print(f"| {name} | {a:.2f} | {b:.2f} | {a / b:.3f} | {'met' if abs(a / b - 1) <= goal else 'NOT met'} (±{goal:.0%}) |")
print(f"| GuideLLM's own output_tokens_per_second mean (a rate distribution over its window, another definition) | — | {med([r['tps_own'] for r in rows]):.2f} | — | — |")
print(f"| ITL p50 ms (memwall only: every chunk gap) | {med([r['itl'] for r in rows]):.2f} | — | — | — |")
print()
print("prompt tokens per request (server's usage): A", [round(r["prompt"][0], 1) for r in rows], "B", [round(r["prompt"][1], 1) for r in rows])
print("requests measured: A", [r["n"][0] for r in rows], "B", [r["n"][1] for r in rows])
PY
