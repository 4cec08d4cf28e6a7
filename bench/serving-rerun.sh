#!/usr/bin/env bash
# The serving tables of results/serving/ rerun on one build (issue 41 §5), one after
# another (nothing else may run meanwhile: they share the cores):
#   1. memwall serve vs llama-server at concurrency CONC_SERVER (8,16), REPS (3)
#      alternating repetitions (bench/vs-llama-server.sh);
#   2. memwall loadtest vs GuideLLM, then vs AIPerf, ROUNDS (3) alternating rounds at
#      concurrency 4, against one real `memwall serve --parallel 4` pinned to core 0 with
#      one thread while the clients run on the other cores (taskset): a client's own CPU
#      time (AIPerf uses about a core) then cannot slow the server it measures, so the
#      two clients see the same server;
#   3. the soak (bench/soak-serve.sh, MINUTES (10));
#   4. the load-test report (results/serving/loadtest/): `memwall stream` into a store of
#      its own ($RESULTS/loadtest.db), then memwall loadtest at concurrency 1 and 4, 8
#      requests × (128 words in, 64 tokens out), against `memwall serve --parallel 4` on
#      that store (so the report's "% roof" is the server's own roof); its markdown and
#      charts under $RESULTS/loadtest.
# Each output goes to $RESULTS (results/serving/rerun-DATE) as printed, with its stderr log.
#
# usage: bench/serving-rerun.sh [STEP...]   (steps: server clients soak loadtest; default all)
set -uo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/memwall/target}"
out=${RESULTS:-results/serving/rerun-$(date -u +%F)}
mkdir -p "$out"
mw="${MEMWALL:-$CARGO_TARGET_DIR/release/memwall}"
model=${MODEL_FILE:-$HOME/.cache/memwall/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf}
steps=${*:-server clients soak loadtest}
{
  echo "build: $("$mw" --version 2>/dev/null) ($(git rev-parse --short HEAD)$(git diff --quiet || echo -dirty))"
  echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores"
} >>"$out/BUILD"
stamp() { echo "== $(date -u +%T) $*" | tee -a "$out/BUILD"; }
for s in $steps; do
  case $s in
  server)
    stamp "vs-llama-server CONC=${CONC_SERVER:-8,16} REPS=${REPS:-3}"
    CONC=${CONC_SERVER:-8,16} REPS=${REPS:-3} KEEP="$out/vs-llama-server-json" bench/vs-llama-server.sh \
      >"$out/vs-llama-server.md" 2>"$out/vs-llama-server.log"
    ;;
  clients)
    port=18311
    stamp "memwall serve --parallel 4 --threads 1 on core 0 (port $port)"
    taskset -c 0 "$mw" serve -m "$model" --parallel 4 --ctx-size 4096 --threads 1 --port "$port" >"$out/serve.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 300); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.2; done
    others=1-$(($(nproc) - 1))
    for peer in guidellm aiperf; do
      stamp "vs-$peer ROUNDS=${ROUNDS:-3} CONC=4 N=32, clients on cores $others"
      ROUNDS=${ROUNDS:-3} CONC=4 N=32 MODEL_FILE="$model" taskset -c "$others" bench/vs-$peer.sh "http://127.0.0.1:$port" \
        >"$out/vs-$peer-c4.md" 2>"$out/vs-$peer-c4.log"
    done
    kill -INT "$pid"; wait "$pid"
    ;;
  soak)
    stamp "soak MINUTES=${MINUTES:-10}"
    MINUTES=${MINUTES:-10} bench/soak-serve.sh >"$out/soak.md" 2>"$out/soak.log"
    ;;
  loadtest)
    port=18312
    stamp "memwall serve --parallel 4 (port $port), memwall loadtest --concurrency 1,4"
    # The server publishes the roof it runs under (its host's STREAM triad in its store),
    # so the report's "% roof" is the server's own: STREAM first, in the store it serves from.
    "$mw" --db "$out/loadtest.db" stream >"$out/loadtest-stream.log" 2>&1
    "$mw" --db "$out/loadtest.db" serve -m "$model" --parallel 4 --ctx-size 4096 --port "$port" >"$out/loadtest-serve.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 300); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.2; done
    "$mw" loadtest --url "http://127.0.0.1:$port" --concurrency 1,4 --num-requests 8 --input-tokens 128 \
      --output-tokens 64 --model-file "$model" --out "$out/loadtest" >"$out/loadtest.md" 2>"$out/loadtest.log"
    kill -INT "$pid"; wait "$pid"
    ;;
  *) echo "unknown step $s" >&2; exit 2 ;;
  esac
done
stamp done
