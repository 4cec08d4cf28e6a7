#!/usr/bin/env bash
# memwall loadtest vs an independent client from PyPI, against the same server at the
# same concurrency and token lengths: PEER=guidellm (GuideLLM 0.8.1, venv
# ~/.cache/memwall/venv-guidellm; bench/vs-guidellm.sh) or PEER=aiperf (NVIDIA AIPerf
# 0.13.0, venv ~/.cache/memwall/venv-aiperf; bench/vs-aiperf.sh), each venv made by this
# script. Prints each client's TTFT / TPOT / ITL medians and output tok/s, and the
# ratios memwall ÷ peer (goals: medians within 5 %, throughput within 3 %).
#
# Metric names differ: GuideLLM's "inter_token_latency" and AIPerf's
# "inter_token_latency" are vLLM's TPOT (per request, (E2EL − TTFT) ÷ (n − 1));
# GuideLLM's "time_per_output_token" includes TTFT (E2EL ÷ n) and is not compared.
# vLLM's ITL (every chunk gap) is AIPerf's "inter_chunk_latency" (compared); GuideLLM
# has no counterpart.
#
# `paced` in place of URL starts bench/paced_server.py (env PACED_TTFT_MS 500,
# PACED_GAP_MS 36, PACED_PORT 18556): a server whose every request follows a fixed
# schedule whatever the traffic, so the clients are checked against known values
# without the server's speed depending on how each client spaces its requests.
#
# usage: bench/vs-client.sh URL|paced   env PEER (guidellm), ROUNDS (3), CONC (4), N (32),
#        IN (128), OUT (128), MODEL_FILE (the server's GGUF: the peers' synthetic prompts
#        need its tokenizer, which this script converts once with transformers + gguf
#        into a local folder; default: the catalogue's qwen2.5-coder-0.5b-q4_k_m), MODEL
#        (the request's `model`, default the server's first listed id). GUIDELLM_ARGS
#        replaces the `guidellm run` arguments built here (the JSON report must land in
#        $WORK/guidellm.json).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
url=${1:?usage: bench/vs-client.sh URL|paced (env PEER=guidellm|aiperf)}
peer=${PEER:-guidellm}
case $peer in guidellm|aiperf) ;; *) echo "vs-client: PEER must be guidellm or aiperf, not '$peer'" >&2; exit 2;; esac
url=${url%/}
paced_pid=""
if [ "$url" = paced ]; then
  # bench/paced_server.py: every request on a fixed schedule (TTFT, then one token per
  # gap), independent of the traffic; both clients must read that schedule back.
  paced_ttft=${PACED_TTFT_MS:-500}; paced_gap=${PACED_GAP_MS:-36}; paced_port=${PACED_PORT:-18556}
  python3 bench/paced_server.py "$paced_port" "$paced_ttft" "$paced_gap" &
  paced_pid=$!
  url=http://127.0.0.1:$paced_port
  for _ in $(seq 1 50); do curl -sf "$url/health" >/dev/null && break; sleep 0.1; done
fi
conc=${CONC:-4}; n=${N:-32}; in=${IN:-128}; out=${OUT:-128}
venv=$HOME/.cache/memwall/venv-$peer
if [ "$peer" = guidellm ]; then pkg="guidellm==0.8.1"; else pkg="aiperf==0.13.0"; fi
if [ ! -x "$venv/bin/$peer" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "$pkg"
fi
# The GGUF → Hugging Face tokenizer conversion has a venv of its own (transformers
# 4.57, not the 5.x AIPerf 0.13.0 pulls in, whose GGUF reader imports PyTorch).
hfvenv=$HOME/.cache/memwall/venv-hf-tokenizer
if ! "$hfvenv/bin/python" -c 'import gguf, transformers' 2>/dev/null; then
  python3 -m venv "$hfvenv"
  "$hfvenv/bin/pip" install -q "transformers==4.57.1" "gguf==0.19.0"
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
[ -f "$MODEL_FILE" ] || { echo "vs-client: model file '$MODEL_FILE' not found (set MODEL_FILE)" >&2; exit 1; }
model=${MODEL:-$(curl -sf "$url/v1/models" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])')}
# The GGUF's tokenizer as a Hugging Face folder (no Hub access needed), cached by the
# file's size and mtime.
tok=$HOME/.cache/memwall/derived/hf-tokenizer/$(basename "$MODEL_FILE" .gguf)-$(stat -c %s-%Y "$MODEL_FILE")
if [ ! -f "$tok/tokenizer.json" ]; then
  mkdir -p "$tok"
  "$hfvenv/bin/python" - "$MODEL_FILE" "$tok" <<'PY'
import os, sys
import transformers.modeling_gguf_pytorch_utils as g
from transformers import AutoTokenizer
# Reading a GGUF's tokenizer needs only its metadata (return_tensors=False), but the
# reader refuses without PyTorch installed; nothing of PyTorch is used on this path.
g.is_torch_available = lambda: True
f, out = sys.argv[1], sys.argv[2]
AutoTokenizer.from_pretrained(os.path.dirname(os.path.abspath(f)), gguf_file=os.path.basename(f)).save_pretrained(out)
PY
fi
work=$(mktemp -d); trap 'rm -rf "$work"; [ -z "$paced_pid" ] || kill "$paced_pid" 2>/dev/null' EXIT
rounds=${ROUNDS:-3}
# GuideLLM 0.8.1 `run`: the same route (/v1/completions, streamed), concurrency, token
# lengths (it sends max_tokens with ignore_eos, as memwall loadtest does) and request
# count. Warm-up: one request per client, a first cycle that neither client counts.
# memwall loadtest runs its warm-up (--warmup CONC) before the measured requests;
# GuideLLM 0.8.1 keeps warm-up requests in its per-request records (its warmup setting
# only moves its own rate window), so it sends N + CONC and the first CONC by send
# time are dropped below. Both then count N requests: at concurrency 4 and N = 32,
# eight full cycles (34 requests would end on a half-full one: 8.5 cycles).
guidellm_args() { # $1 = round (the seed, so every round sends new prompts to both clients)
  if [ -n "${GUIDELLM_ARGS:-}" ]; then echo "$GUIDELLM_ARGS"; return; fi
  echo "--backend kind=openai_http,target=$url,model=$model,request_format=/v1/completions \
    --profile kind=concurrent,streams=$conc,warmup=$conc \
    --constraint kind=max_requests,count=$((n + conc)) \
    --tokenizer kind=huggingface_auto,model=$tok \
    --data kind=synthetic_text,prompt_tokens=$in,output_tokens=$out \
    --seed kind=static,value=$1 \
    --output kind=json,path=\$WORK/guidellm-$1.json --disable-console-interactive"
}
# Each client's own CPU time (user + sys of it and its child processes): on a 2-core
# machine a client that spends CPU takes it from the server it measures.
cpu_run() { # FILE CMD…: runs CMD, writes its CPU seconds to FILE
  python3 -c 'import resource, subprocess, sys
rc = subprocess.call(sys.argv[2:])
r = resource.getrusage(resource.RUSAGE_CHILDREN)
open(sys.argv[1], "w").write(f"{r.ru_utime + r.ru_stime}\n")
sys.exit(rc)' "$@"
}
run_mw() {
  cpu_run "$work/mw-cpu-$1" "$mw" --db "$work/lt.db" loadtest --url "$url" --model "$model" --endpoint completions --concurrency "$conc" \
    --num-requests "$n" --input-tokens "$in" --output-tokens "$out" --warmup "$conc" --seed "$1" --model-file "$MODEL_FILE" --json >"$work/mw-$1.json"
}
run_gl() {
  # shellcheck disable=SC2046,SC2086
  WORK=$work eval "cpu_run \"$work/peer-cpu-$1\" \"$venv/bin/guidellm\" run $(guidellm_args "$1")" >"$work/guidellm-$1.log" 2>&1 \
    || { tail -30 "$work/guidellm-$1.log" >&2; exit 1; }
  [ -f "$work/guidellm-$1.json" ] || { tail -30 "$work/guidellm-$1.log" >&2; echo "vs-client: no $work/guidellm-$1.json" >&2; exit 1; }
}
# AIPerf 0.13.0 `profile`: the same route (/v1/completions, streamed, max_tokens with
# ignore_eos), concurrency, token lengths (no spread: stddev 0) and request count; its
# warm-up is a phase of CONC requests before the measured ones (its per-request
# records carry the phase, only `profiling` is counted). Token counts from the
# server's usage, as memwall loadtest counts them. It starts several processes (ZMQ
# services, workers, record processors): one worker and one record processor here,
# so it takes as few cores as it can from the server on a small machine.
run_ap() {
  local dir="$work/aiperf-$1"
  cpu_run "$work/peer-cpu-$1" "$venv/bin/aiperf" profile --model "$model" --url "$url" --endpoint-type completions --streaming \
    --concurrency "$conc" --request-count "$n" --warmup-request-count "$conc" \
    --isl "$in" --isl-stddev 0 --osl "$out" --osl-stddev 0 --tokenizer "$tok" --use-server-token-count \
    --extra-inputs ignore_eos:true --use-legacy-max-tokens --random-seed "$1" \
    --workers-max 1 --record-processors 1 --no-server-metrics --no-gpu-telemetry --ui-type none \
    --artifact-dir "$dir" >"$work/aiperf-$1.log" 2>&1 \
    || { tail -30 "$work/aiperf-$1.log" >&2; exit 1; }
  [ -f "$dir/profile_export.jsonl" ] || { tail -30 "$work/aiperf-$1.log" >&2; echo "vs-client: no $dir/profile_export.jsonl" >&2; exit 1; }
}
run_peer() { if [ "$peer" = guidellm ]; then run_gl "$1"; else run_ap "$1"; fi; }
# Alternating, the order swapped every round, so a drift of the machine or the
# server's state falls on both clients alike.
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) = 1 ]; then run_mw "$r"; run_peer "$r"; else run_peer "$r"; run_mw "$r"; fi
  echo "round $r/$rounds done" >&2
done
python3 - "$work" "$rounds" "${paced_ttft:-}" "${paced_gap:-}" "$conc" "$out" "$peer" <<'PY'
import glob, json, statistics, sys
work, rounds, conc, n_out, peer = sys.argv[1], int(sys.argv[2]), int(sys.argv[5]), int(sys.argv[6]), sys.argv[7]
paced = (float(sys.argv[3]), float(sys.argv[4])) if sys.argv[3] else None
B = {"guidellm": "GuideLLM 0.8.1", "aiperf": "AIPerf 0.13.0"}[peer]
def med(xs):
    return statistics.median(xs)
def burst(sends, window=0.05):
    # Traffic shape: mean number of requests sent within 50 ms of each request (itself
    # included). A closed loop whose requests stay in step sends them in bursts of the
    # concurrency; one whose requests drift apart sends them one at a time (→ 1). The
    # server's speed depends on it (a burst is prefilled in one pass, its first tokens
    # wait for the whole pass).
    return statistics.mean(sum(abs(t - u) <= window for u in sends) for t in sends)
def to_ms(v):  # an AIPerf metric value {value, unit} in milliseconds
    f = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3, "sec": 1e3}[v["unit"]]
    x = v["value"]
    return [y * f for y in x] if isinstance(x, list) else x * f
def peer_requests(r):
    """The peer's measured requests, each {start, end (s), ttft, tpot (ms), out, prompt,
    gaps (ms list or None)}, and its own summary figures for the notes."""
    if peer == "guidellm":
        g = json.load(open(f"{work}/guidellm-{r}.json"))["benchmarks"][0]
        every = sorted(g["requests"]["successful"], key=lambda q: q["request_start_time"])
        reqs = [{"start": q["request_start_time"], "end": q["request_end_time"],
                 "ttft": q["time_to_first_token_ms"], "tpot": q["inter_token_latency_ms"],
                 "out": q["output_tokens"], "prompt": q.get("prompt_tokens"), "gaps": None}
                for q in every[conc:]]  # the first cycle is the warm-up
        def gown(name):  # GuideLLM's own summary, over all its records (warm-up included)
            m = g["metrics"][name]["successful"]
            return m.get("median", m.get("percentiles", {}).get("p50"))
        own = (gown("time_to_first_token_ms"), gown("inter_token_latency_ms"),
               g["metrics"]["output_tokens_per_second"]["successful"]["mean"])
        return reqs, own, 0
    reqs, failed = [], 0
    for line in open(f"{work}/aiperf-{r}/profile_export.jsonl"):
        rec = json.loads(line)
        md, m = rec["metadata"], rec["metrics"]
        if md["benchmark_phase"] != "profiling":
            continue
        if rec.get("error") or "time_to_first_token" not in m:
            failed += 1
            continue
        reqs.append({"start": md["request_start_ns"] / 1e9, "end": md["request_end_ns"] / 1e9,
                     "ttft": to_ms(m["time_to_first_token"]), "tpot": to_ms(m["inter_token_latency"]),
                     "out": m["output_sequence_length"]["value"],
                     "prompt": m.get("input_sequence_length", {}).get("value"),
                     "gaps": to_ms(m["inter_chunk_latency"]) if "inter_chunk_latency" in m else None})
    return reqs, None, failed
rows = []
for r in range(1, rounds + 1):
    p = json.load(open(f"{work}/mw-{r}.json"))["points"][0]
    ok, own, failed = peer_requests(r)
    # The peer's per-request records (its own TTFT and TPOT of each request), over the
    # measured requests, reduced with memwall's (vLLM's) rules: medians over requests,
    # ITL the median of every chunk gap pooled; output tok/s = Σ output tokens ÷
    # (last end − first send).
    span = max(q["end"] for q in ok) - min(q["start"] for q in ok)
    gaps = [x for q in ok for x in (q["gaps"] or [])]
    prompts = [q["prompt"] for q in ok if q["prompt"] is not None]
    rows.append({
        "ttft": (p["ttft"]["median_ms"], med([q["ttft"] for q in ok])),
        "tpot": (p["tpot"]["median_ms"], med([q["tpot"] for q in ok])),
        "itl": (p["itl"]["median_ms"], med(gaps) if gaps else None),
        "tps": (p["output_throughput_tps"], sum(q["out"] for q in ok) / span),
        "own": own,
        "prompt": ((p["total_input_tokens"] or 0) / max(p["n_completed"], 1), statistics.mean(prompts) if prompts else float("nan")),
        "n": (p["n_completed"], len(ok)),
        "failed": failed,
        "burst": (burst([q["start_ms"] / 1e3 for q in p["samples"]]), burst([q["start"] for q in ok])),
        "cpu": tuple(float(open(f"{work}/{c}-cpu-{r}").read()) for c in ("mw", "peer")),
    })
names = [("ttft", "TTFT p50 ms"), ("tpot", "TPOT p50 ms (peer: inter_token_latency)"),
         ("itl", "ITL p50 ms (every chunk gap; AIPerf: inter_chunk_latency)"),
         ("tps", "out tok/s = Σ output tokens ÷ (last end − first send)")]
if peer == "guidellm":
    names = [x for x in names if x[0] != "itl"]  # GuideLLM has no per-gap figure
print(f"{rounds} rounds, alternating (memwall first in odd rounds); A = memwall loadtest, B = {B}")
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
if peer == "guidellm":
    print(f"| GuideLLM's own TTFT / inter_token_latency medians (its summary: all {conc} + N records, warm-up included) | — | {med([r['own'][0] for r in rows]):.2f} / {med([r['own'][1] for r in rows]):.2f} | — | — |")
    print(f"| GuideLLM's own output_tokens_per_second mean (a rate distribution over its window, another definition) | — | {med([r['own'][2] for r in rows]):.2f} | — | — |")
    print(f"| ITL p50 ms (memwall only: every chunk gap) | {med([r['itl'][0] for r in rows]):.2f} | — | — | — |")
print(f"| requests sent within 50 ms of each request (traffic shape; 1 = one at a time) | {med([r['burst'][0] for r in rows]):.2f} | {med([r['burst'][1] for r in rows]):.2f} | — | — |")
print(f"| client CPU s (user + sys, warm-up and start-up included) | {med([r['cpu'][0] for r in rows]):.2f} | {med([r['cpu'][1] for r in rows]):.2f} | {med([r['cpu'][0] for r in rows]) / med([r['cpu'][1] for r in rows]):.3f} | — |")
if paced:
    # The paced server's schedule, from its settings: what an exact client would read
    # (TTFT from the body's arrival, so a client's send overhead adds to it).
    print()
    print(f"Paced server: TTFT {paced[0]:.1f} ms, one token every {paced[1]:.1f} ms (so TPOT = ITL = {paced[1]:.1f} ms); each client's median ÷ the schedule:")
    print()
    print("| metric | schedule | A ÷ schedule | B ÷ schedule |")
    print("|---|---:|---:|---:|")
    for k, name, want in [("ttft", "TTFT p50 ms", paced[0]), ("tpot", "TPOT p50 ms", paced[1]), ("itl", "ITL p50 ms", paced[1])]:
        a = med([row[k][0] for row in rows])
        bs = [row[k][1] for row in rows if row[k][1] is not None]
        print(f"| {name} | {want:.2f} | {a / want:.3f} | {f'{med(bs) / want:.3f}' if bs else '—'} |")
    # Requests in step, each TTFT + (n − 1) gaps long: CONC × n tokens per cycle (an
    # upper bound: the clients' turnaround between cycles adds to the span).
    want = conc * n_out / ((paced[0] + (n_out - 1) * paced[1]) / 1e3)
    a = med([row["tps"][0] for row in rows]); b = med([row["tps"][1] for row in rows])
    print(f"| out tok/s (CONC × OUT ÷ (TTFT + (OUT − 1) × gap), no turnaround) | {want:.2f} | {a / want:.3f} | {b / want:.3f} |")
print()
print("prompt tokens per request (server's usage): A", [round(r["prompt"][0], 1) for r in rows], "B", [round(r["prompt"][1], 1) for r in rows])
print("requests measured: A", [r["n"][0] for r in rows], "B", [r["n"][1] for r in rows], "; B's failed records:", [r["failed"] for r in rows])
PY
