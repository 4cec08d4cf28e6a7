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
# usage: bench/vs-guidellm.sh URL   env CONC (4), N (32), IN (128), OUT (128),
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
"$mw" --db "$work/lt.db" loadtest --url "$url" --model "$model" --endpoint completions --concurrency "$conc" \
  --num-requests "$n" --input-tokens "$in" --output-tokens "$out" --warmup 2 --seed 1 --model-file "$MODEL_FILE" --json >"$work/mw.json"
# GuideLLM 0.8.1 `run`: the same route (/v1/completions, streamed), concurrency, token
# lengths (it sends max_tokens with ignore_eos, as memwall loadtest does) and request
# count; 2 warm-up requests excluded from its metrics as memwall's --warmup 2.
if [ -z "${GUIDELLM_ARGS:-}" ]; then
  GUIDELLM_ARGS="--backend kind=openai_http,target=$url,model=$model,request_format=/v1/completions \
    --profile kind=concurrent,streams=$conc,warmup=2 \
    --constraint kind=max_requests,count=$((n + 2)) \
    --tokenizer kind=huggingface_auto,model=$tok \
    --data kind=synthetic_text,prompt_tokens=$in,output_tokens=$out \
    --seed kind=static,value=1 \
    --output kind=json,path=\$WORK/guidellm.json --disable-console-interactive"
fi
# shellcheck disable=SC2086
WORK=$work eval "\"$venv/bin/guidellm\" run $GUIDELLM_ARGS" >"$work/guidellm.log" 2>&1 \
  || { tail -30 "$work/guidellm.log" >&2; exit 1; }
[ -f "$work/guidellm.json" ] || { tail -30 "$work/guidellm.log" >&2; echo "vs-guidellm: no $work/guidellm.json" >&2; exit 1; }
python3 - "$work" <<'PY'
import glob, json, sys
work = sys.argv[1]
p = json.load(open(f"{work}/mw.json"))["points"][0]
g = json.load(open(f"{work}/guidellm.json"))
b = g["benchmarks"][0]["metrics"]
def med(name):
    m = b[name]["successful"]
    return m.get("median", m.get("percentiles", {}).get("p50"))
rows = [
    ("TTFT p50 ms", p["ttft"]["median_ms"], med("time_to_first_token_ms")),
    ("TPOT p50 ms (GuideLLM: inter_token_latency)", p["tpot"]["median_ms"], med("inter_token_latency_ms")),
    ("out tok/s (GuideLLM: output_tokens_per_second mean)", p["output_throughput_tps"], b["output_tokens_per_second"]["successful"]["mean"]),
]
print("| metric | memwall loadtest | GuideLLM 0.8.1 | memwall ÷ GuideLLM |")
print("|---|---:|---:|---:|")
for name, a, c in rows:
    print(f"| {name} | {a:.2f} | {c:.2f} | {a / c:.3f} |")
print(f"| ITL p50 ms (memwall only: every chunk gap) | {p['itl']['median_ms']:.2f} | — | — |")
PY
