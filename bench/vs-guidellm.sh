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
#        PROCESSOR (a Hugging Face tokenizer id or local folder GuideLLM's synthetic
#        data needs, default Qwen/Qwen2.5-Coder-0.5B-Instruct), MODEL_FILE (GGUF, optional)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
url=${1:?usage: bench/vs-guidellm.sh URL}
conc=${CONC:-4}; n=${N:-32}; in=${IN:-128}; out=${OUT:-128}
processor=${PROCESSOR:-Qwen/Qwen2.5-Coder-0.5B-Instruct}
venv=$HOME/.cache/memwall/venv-guidellm
if [ ! -x "$venv/bin/guidellm" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "guidellm==0.8.1"
fi
cargo build --release --locked -q -p memwall-cli
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
mw="$target/release/memwall"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mf=(); [ -n "${MODEL_FILE:-}" ] && mf=(--model-file "$MODEL_FILE")
"$mw" --db "$work/lt.db" loadtest --url "$url" --endpoint completions --concurrency "$conc" \
  --num-requests "$n" --input-tokens "$in" --output-tokens "$out" --warmup 2 --seed 1 "${mf[@]}" --json >"$work/mw.json"
# GuideLLM 0.8.1's CLI is `guidellm run --backend --profile --constraint --tokenizer
# --data --output …` (no `benchmark` group any more). The exact argument forms for a
# concurrent profile with a request-count constraint are not checked yet: pass them in
# GUIDELLM_ARGS (the JSON report must land in $work/guidellm.json); without it the
# script stops here, after memwall's side, rather than compare against a guess.
if [ -z "${GUIDELLM_ARGS:-}" ]; then
  echo "vs-guidellm: set GUIDELLM_ARGS to GuideLLM 0.8.1 'run' arguments (see 'guidellm run --help'); memwall's side is in $work/mw.json" >&2
  cat "$work/mw.json" >&2
  exit 2
fi
# shellcheck disable=SC2086
WORK=$work eval "\"$venv/bin/guidellm\" run $GUIDELLM_ARGS" >"$work/guidellm.log" 2>&1 \
  || { tail -30 "$work/guidellm.log" >&2; exit 1; }
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
