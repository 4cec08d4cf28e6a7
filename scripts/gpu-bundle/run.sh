#!/usr/bin/env bash
# One pass on a GPU machine, from the bundle scripts/gpu-bundle/pack.sh made:
#   build  llama.cpp (shared libraries with CUDA, llama-bench) from the bundled tree;
#   hw     memwall hw (CUDA devices, their spec);
#   stream memwall stream --gpu, alternating with PyTorch's copy/triad (torch_stream.py);
#   bench  per model in MODELS (preset:quant): memwall model synth, then memwall bench and
#          llama-bench alternating, pp512 + tg128 (depths DEPTHS for memwall), -ngl 99
#          (BENCH_PEER=0: memwall alone, for a call short of time);
#   batch  parallel sequences on BATCH_MODEL (memwall bench --n-seqs; depths BATCH_DEPTHS,
#          the bench's default when unset);
#   verify the verify-cost curve: pp1…pp17 on VERIFY_MODELS (depths VERIFY_DEPTHS, likewise);
#   calc   memwall calc --device this (--gpu) for CALC_MODELS: the ceiling beside the
#          per-token floor fitted from the rows so far;
#   spec   set-acceptance speculative decoding on SPEC_TARGETS with draft SPEC_DRAFT
#          (SPEC_TREES=k3b2m1,k2b2m2: tree drafts gated and measured beside the chains):
#          the pair's greedy gate (memwall spec gate, the small prompt set
#          spec-prompts.jsonl), memwall spec bench --synth-acceptance SPEC_ALPHAS with
#          the cost model's best k of SPEC_KS per α (target-only tg, verify-cost times
#          and predictions stored before the timed runs), then the peer: llama-server
#          --spec-synth-rates at the same α and k (spec_peer.py) when it was built
#          (SPEC_PEER=0: neither built nor run);
#   multi  several GPUs (docs/gpus.md): each card's STREAM and the pairwise peer copies
#          (memwall stream --gpu --peer), then per model in MULTI_MODELS and split mode in
#          SPLIT_MODES memwall bench and llama-bench alternating over every GPU (tensor
#          split: equal shares, or TENSOR_SPLIT), depths MULTI_DEPTHS;
# everything into one SQLite store and logs under $OUT (the device tool brings back
# at most 8 files): memwall.db, log.txt, results.tgz (every JSON output).
#
# MEMWALL_GPU_DRY_RUN=1 runs the same steps on a CPU machine with the CPU back end and
# tiny settings (the test suite does, so this script cannot rot): no CUDA build, the
# memwall binary from MEMWALL_BIN, llama-bench from the llama-tools build if present.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dry=${MEMWALL_GPU_DRY_RUN:-0}
OUT=${OUT:-$(mktemp -d)}
work=${MEMWALL_GPU_WORK:-/tmp/memwall-gpu}
mkdir -p "$work/json" "$work/models" "$OUT"
log="$OUT/log.txt"
steps=${STEPS:-build hw stream bench batch verify spec calc multi}
reps=${REPS:-5}
rounds=${ROUNDS:-2}
if [ "$dry" = 1 ]; then
  mw=${MEMWALL_BIN:?MEMWALL_BIN: the memwall binary to dry-run}
  lb=${MEMWALL_LLAMA_TOOLS:-$HOME/.cache/memwall/llama-tools}/bin/llama-bench
  MODELS=${MODELS:-qwen2.5-0.5b:Q4_K_M}
  P=${P:-32}; N=${N:-8}; reps=1; rounds=1; ngl=0; fit=
  BATCH_MODEL=${BATCH_MODEL:-qwen2.5-0.5b:Q4_K_M}; BATCH_SEQS=${BATCH_SEQS:-1,2}
  VERIFY_MODELS=${VERIFY_MODELS:-qwen2.5-0.5b:Q4_K_M}; VERIFY_P=${VERIFY_P:-1,2}
  # One depth: the bench's default four (to 2048) cost the dry run two minutes of
  # prefill on 2 cores and test nothing the step does not already run at depth 0.
  BATCH_DEPTHS=${BATCH_DEPTHS:-0}; VERIFY_DEPTHS=${VERIFY_DEPTHS:-0}
  CALC_MODELS=${CALC_MODELS:-qwen2.5-0.5b:Q4_K_M}; gpu=
  srv=${MEMWALL_LLAMA_TOOLS:-$HOME/.cache/memwall/llama-tools}/bin/llama-server
  SPEC_TARGETS=${SPEC_TARGETS:-qwen2.5-0.5b:Q4_K_M}; SPEC_DRAFT=${SPEC_DRAFT:-qwen2.5-0.5b:Q4_K_M}
  SPEC_ALPHAS=${SPEC_ALPHAS:-0.5,0.9}; SPEC_KS=${SPEC_KS:-1,2}; SPEC_N=${SPEC_N:-8}; SPEC_REPS=${SPEC_REPS:-2}
  SPEC_TIE=${SPEC_TIE:-0.1}
  # No GPU here: one split mode that needs none, over the CPU back end.
  MULTI_MODELS=${MULTI_MODELS:-qwen2.5-0.5b:Q4_K_M}; SPLIT_MODES=${SPLIT_MODES:-none}; MULTI_DEPTHS=${MULTI_DEPTHS:-0}
else
  mw="$root/.bundle/memwall"
  lb="$work/build/bin/llama-bench"
  MODELS=${MODELS:-qwen2.5-0.5b:F16 qwen2.5-7b:Q4_K_M qwen2.5-7b:Q8_0 qwen2.5-7b:F16}
  P=${P:-512}; N=${N:-128}; ngl=99
  # The capacity check compares weights + KV with the host's available RAM; with every
  # layer offloaded they live in GPU memory (and this VM's RAM grows on demand).
  fit=--skip-capacity-check
  BATCH_MODEL=${BATCH_MODEL:-qwen2.5-7b:Q4_K_M}; BATCH_SEQS=${BATCH_SEQS:-1,2,4,8,16,32,64}
  VERIFY_MODELS=${VERIFY_MODELS:-qwen2.5-7b:F16}; VERIFY_P=${VERIFY_P:-1,2,3,5,9,17}
  CALC_MODELS=${CALC_MODELS:-qwen2.5-7b:F16 qwen2.5-14b:F16 qwen2.5-7b:Q4_K_M}; gpu=--gpu
  srv="$work/build/bin/llama-server"
  # With layers on CUDA a verify pass holds up to the target's batch (max_rows_for):
  # k = 8 and trees of more than 6 nodes verify in one pass.
  SPEC_TARGETS=${SPEC_TARGETS:-qwen2.5-14b:F16 qwen2.5-7b:F16}; SPEC_DRAFT=${SPEC_DRAFT:-qwen2.5-0.5b:F16}
  SPEC_ALPHAS=${SPEC_ALPHAS:-0.5,0.7,0.9}; SPEC_KS=${SPEC_KS:-1,2,3,4,5,6,8}; SPEC_N=${SPEC_N:-64}; SPEC_REPS=${SPEC_REPS:-3}
  # Random weights leave near-tied top logits; CUDA sums a k + 1-row verify pass in
  # another order than a 1-row decode, which flips some (call 7: first differences at
  # top-1 − top-2 margins of 0.0013 and 0.011 logits). Gate and bench take the
  # target-only token where the verify argmax leads it by ≤ SPEC_TIE logits, and
  # count each such position with its lead; anything further apart still fails.
  # The gate's tolerance is measured (GATE_TIE=measured: each k's batch-shape gap,
  # the target's logits in k + 1-row vs 1-row passes, stored with the gate); SPEC_TIE
  # is the set-acceptance bench's output check.
  SPEC_TIE=${SPEC_TIE:-0.1}
  # A model that fits one card (14B F16) and one that does not (72B Q8_0, ≈ 77 GB): the
  # second is refused under `none` on an 80 GB card, and the log says so.
  MULTI_MODELS=${MULTI_MODELS:-qwen2.5-14b:F16 qwen2.5-72b:Q8_0}; SPLIT_MODES=${SPLIT_MODES:-none layer row}
  MULTI_DEPTHS=${MULTI_DEPTHS:-0,2048}
fi
db="$work/memwall.db"
# A call has a hard limit (the device tool's 10 minutes): steps that would start with
# less than MIN_LEFT seconds before DEADLINE are skipped and said so, and the rows so far
# are still collected.
# (A dry run on a shared CPU machine has no such limit: every step must run.)
deadline=${DEADLINE:-$([ "$dry" = 1 ] && echo 86400 || echo 540)}
min_left=${MIN_LEFT:-60}
. "$root/scripts/gpu-bundle/pass.sh"
model() { # preset:quant[:vNNN] → path (synthesized once); vNNN sets the vocabulary size
  # (e.g. a draft given its target's 152064 entries, so llama-server's --spec-synth-rates
  # never feeds the draft a token past its own vocabulary)
  local preset=${1%%:*} rest=${1#*:}
  local quant=${rest%%:*} voc=()
  case $rest in *:v*) voc=(--vocab "${rest##*:v}");; esac
  local f="$work/models/$preset-$quant${voc[1]:+-v${voc[1]}}.gguf"
  if [ ! -f "$f" ]; then run "$mw" --db "$db" model synth --preset "$preset" -q "$quant" "${voc[@]}" --out "$f" >&2 || return 1; fi
  echo "$f"
}

for step in $steps; do
  if ! time_left; then say "$step: skipped (less than ${min_left} s left of this call's ${deadline} s)"; continue; fi
  case $step in
  build)
    if [ "$dry" = 1 ]; then say "build: dry run, CPU back end of $mw"; continue; fi
    if [ -f "$work/build/bin/libggml-cuda.so" ] && [ -x "$lb" ]; then say "build: reused (warm machine)"; else
      say "build: llama.cpp with CUDA from the bundled tree"
      rm -rf "$work/src" && mkdir -p "$work/src" && tar xzf "$root/.bundle/llama.cpp.tar.gz" -C "$work/src"
      cmake -S "$work/src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
        -DGGML_CUDA=ON -DGGML_CUDA_NCCL=OFF -DGGML_NATIVE=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_OPENMP=ON \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=OFF \
        -DLLAMA_BUILD_APP=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF >"$work/configure.log" 2>&1 \
        || { tail -30 "$work/configure.log" | tee -a "$log"; exit 1; }
      cmake --build "$work/build" -j "$(nproc)" --target llama ggml ggml-cuda llama-bench >"$work/build.log" 2>&1 \
        || { tail -40 "$work/build.log" | tee -a "$log"; exit 1; }
      say "build: done"
    fi
    # The spec step's peer: llama-server, only when the bundled tree has its sources
    # (a failed server build leaves the rest of the pass as it was); SPEC_PEER=0: not
    # built (a call short of time: the spec step then runs memwall alone).
    if [ "${SPEC_PEER:-1}" = 0 ]; then say "build: llama-server not built (SPEC_PEER=0)"
    elif [ -x "$srv" ]; then say "build: llama-server reused"
    elif [ -f "$work/src/tools/server/CMakeLists.txt" ]; then
      # No web UI: nothing to download (the machine has no network) and none needed.
      if cmake -S "$work/src" -B "$work/build" -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF \
           -DLLAMA_USE_PREBUILT_UI=OFF >"$work/configure-server.log" 2>&1 \
         && cmake --build "$work/build" -j "$(nproc)" --target llama-server >"$work/build-server.log" 2>&1; then
        say "build: llama-server built"
      else
        say "build: llama-server did not build (the spec peer will not run); its logs are in results.tgz:"
        for f in configure-server.log build-server.log; do
          [ -f "$work/$f" ] && cp "$work/$f" "$work/json/$f" && tail -20 "$work/$f" | tee -a "$log" >&2
        done
        cmake -S "$work/src" -B "$work/build" -DLLAMA_BUILD_SERVER=OFF >/dev/null 2>&1
      fi
    else say "build: the bundled tree has no tools/server/CMakeLists.txt (llama-server not built; the spec peer will not run)"; fi
    export LD_LIBRARY_PATH="$work/build/bin:/usr/local/cuda/lib64:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}"
    ;;
  hw)
    say "hw"
    run "$mw" hw
    run "$mw" hw --json >"$work/json/hw.json"
    command -v nvidia-smi >/dev/null && run nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.memory,clocks.max.sm --format=csv
    ;;
  stream)
    say "stream: memwall stream --gpu alternating with torch"
    for r in $(seq 1 "$rounds"); do
      run "$mw" --db "$db" stream --gpu --json >"$work/json/stream-gpu-$r.json"
      if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
        run python3 "$root/scripts/gpu-bundle/torch_stream.py" >"$work/json/torch-$r.json"
      else say "stream: no CUDA PyTorch here (peer not run)"; fi
    done
    ;;
  bench)
    for m in $MODELS; do
      time_left || { say "bench $m: skipped (time)"; continue; }
      f=$(model "$m") || { say "bench: synth $m failed"; continue; }
      for r in $(seq 1 "$rounds"); do
        time_left || { say "bench $m round $r: skipped (time)"; continue; }
        say "bench $m round $r"
        reuse=$([ "$r" -gt 1 ] && echo --reuse-stream || true)
        run "$mw" --db "$db" bench -m "$f" -p "$P" -n "$N" -d "${DEPTHS:-0}" -r "$reps" --ngl "$ngl" $fit --no-results --quiet $reuse -o json >"$work/json/mw-$m-$r.json"
        if [ "${BENCH_PEER:-1}" = 0 ]; then say "bench: llama-bench not run (BENCH_PEER=0)"
        elif [ -x "$lb" ]; then run "$lb" -m "$f" -p "$P" -n "$N" -r "$reps" -ngl "$ngl" -o json >"$work/json/lb-$m-$r.json"
        else say "bench: llama-bench not built here (peer not run)"; fi
      done
      [ "${KEEP_MODELS:-0}" = 1 ] || case " $BATCH_MODEL $VERIFY_MODELS " in *" $m "*) ;; *) rm -f "$f";; esac
    done
    ;;
  batch)
    f=$(model "$BATCH_MODEL") || continue
    say "batch: $BATCH_MODEL, parallel sequences $BATCH_SEQS"
    run "$mw" --db "$db" bench -m "$f" -p 0 -n "$N" --n-seqs "$BATCH_SEQS" ${BATCH_DEPTHS:+-d "$BATCH_DEPTHS"} -r "$reps" --ngl "$ngl" $fit --no-results --quiet --reuse-stream -o json >"$work/json/batch.json"
    ;;
  verify)
    for m in $VERIFY_MODELS; do
      time_left || { say "verify $m: skipped (time)"; continue; }
      f=$(model "$m") || continue
      say "verify: $m, n_prompt $VERIFY_P"
      run "$mw" --db "$db" bench -m "$f" -p "$VERIFY_P" -n 0 ${VERIFY_DEPTHS:+-d "$VERIFY_DEPTHS"} -r "$reps" --ngl "$ngl" $fit --no-results --quiet --reuse-stream -o json >"$work/json/verify-mw-$m.json"
      [ -x "$lb" ] && run "$lb" -m "$f" -p "$VERIFY_P" -n 0 -r "$reps" -ngl "$ngl" -o json >"$work/json/verify-lb-$m.json"
    done
    ;;
  calc)
    for m in $CALC_MODELS; do
      say "calc: $m on this machine"
      run "$mw" --db "$db" calc --device this $gpu --preset "${m%%:*}" --quant "${m##*:}" \
        || say "calc $m: failed"
      run "$mw" --db "$db" calc --device this $gpu --preset "${m%%:*}" --quant "${m##*:}" --json >"$work/json/calc-$m.json" 2>/dev/null
    done
    ;;
  spec)
    sp="$root/scripts/gpu-bundle/spec-prompts.jsonl"
    rm -f "$work/json/spec-variant-"*  # an earlier call's (a warm machine keeps $work)
    dfile=$(model "$SPEC_DRAFT") || { say "spec: synth $SPEC_DRAFT failed"; continue; }
    for m in $SPEC_TARGETS; do
      time_left || { say "spec $m: skipped (time)"; continue; }
      f=$(model "$m") || { say "spec: synth $m failed"; continue; }
      say "spec: $m with draft $SPEC_DRAFT: greedy gate at k $SPEC_KS"
      run "$mw" --db "$db" spec gate --target "$f" --draft "$dfile" --prompts "$sp" --drafters draft-model \
        -k "$SPEC_KS" ${SPEC_TREES:+--tree "$SPEC_TREES"} -n "$SPEC_N" --sampling-trials 0 --tie-tolerance "${GATE_TIE:-measured}" --ngl "$ngl" $fit --json >"$work/json/spec-gate-$m.json" \
        || say "spec $m: the gate did not pass at every k (only gated k are stored)"
      # SPEC_ROUNDS > 1: memwall and the peer alternate, round by round, SPEC_REPS
      # repetitions each per round (each memwall round measures and predicts anew
      # before its own timed runs); files then carry -rN.
      rounds_spec=${SPEC_ROUNDS:-1}
      for sr in $(seq 1 "$rounds_spec"); do
        sfx=$([ "$rounds_spec" -gt 1 ] && echo "-r$sr" || true)
        time_left || { say "spec $m round $sr: set acceptance skipped (time)"; continue; }
        say "spec: $m set acceptance $SPEC_ALPHAS, the cost model's best k of $SPEC_KS${sfx:+ (round $sr of $rounds_spec)}"
        if ! run "$mw" --db "$db" spec bench --target "$f" --draft "$dfile" --prompts "$sp" --synth-acceptance "$SPEC_ALPHAS" \
          -k "$SPEC_KS" ${SPEC_TREES:+--tree "$SPEC_TREES"} --synth-prompts 3 -r "$SPEC_REPS" -n "$SPEC_N" --timing-reps 5 --synth-tie-tolerance "$SPEC_TIE" --ngl "$ngl" $fit \
          --out "$work/json/spec-$m$sfx" --json >"$work/json/spec-mw-$m$sfx.json"; then
          say "spec $m: set-acceptance bench failed"; continue
        fi
        # The (α, k) memwall measured, for the peer.
        ks=$(python3 -c '
import json, sys
t = open(sys.argv[1]).read()
rows, _ = json.JSONDecoder().raw_decode(t[0 if t.startswith("[") else t.index("\n[") + 1:])
r = [x for x in rows if x["k"] > 0 and not x["drafter_key"].startswith("tree ")]
print(",".join(str(x["k"]) for x in r)); print(",".join(repr(x["alpha_set"]) for x in r))' "$work/json/spec-mw-$m$sfx.json") || continue
        if [ "${SPEC_PEER:-1}" = 0 ]; then say "spec $m: peer not run (SPEC_PEER=0)"
        elif [ -x "$srv" ]; then
          time_left || { say "spec $m: peer skipped (time)"; continue; }
          say "spec: $m peer llama-server --spec-synth-rates, k $(echo "$ks" | head -1)${sfx:+ (round $sr)}"
          run python3 "$root/scripts/gpu-bundle/spec_peer.py" --server "$srv" --target "$f" --draft "$dfile" \
            --k "$(echo "$ks" | head -1)" --alphas "$(echo "$ks" | tail -1)" --ngl "$ngl" --n-predict "$SPEC_N" \
            --reps "$SPEC_REPS" --prompts "$sp" --log "$work/json/spec-server-$m$sfx.log" >"$work/json/spec-peer-$m$sfx.json" \
            || say "spec $m: peer failed"
        else say "spec: llama-server not built here (peer not run)"; fi
      done
      # SPEC_AB_ENV=VAR=value: one more memwall round with that environment (an A/B of
      # a measurement switch, e.g. MEMWALL_SPEC_CATCHUP=batch against the one-row
      # catch-up memwall uses on CUDA), no peer; the log line names it for report.py.
      if [ -n "${SPEC_AB_ENV:-}" ]; then
        sr=$((rounds_spec + 1)); sfx="-r$sr"
        if time_left; then
          say "spec: $m set acceptance with $SPEC_AB_ENV (round $sr, no peer)"
          printf '{"env": "%s"}\n' "$SPEC_AB_ENV" >"$work/json/spec-variant-$m$sfx.json"
          run env "$SPEC_AB_ENV" "$mw" --db "$db" spec bench --target "$f" --draft "$dfile" --prompts "$sp" --synth-acceptance "$SPEC_ALPHAS" \
            -k "$SPEC_KS" --synth-prompts 3 -r "$SPEC_REPS" -n "$SPEC_N" --timing-reps 5 --synth-tie-tolerance "$SPEC_TIE" --ngl "$ngl" $fit \
            --out "$work/json/spec-$m$sfx" --json >"$work/json/spec-mw-$m$sfx.json" || say "spec $m: the $SPEC_AB_ENV round failed"
        else say "spec $m: the $SPEC_AB_ENV round skipped (time)"; fi
      fi
    done
    ;;
  multi)
    if [ "$dry" = 1 ]; then ngpu=0; else ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU'); fi
    say "multi: $ngpu GPU(s), split modes $SPLIT_MODES, models $MULTI_MODELS"
    for d in $(seq 0 $((ngpu - 1))); do
      run "$mw" --db "$db" stream --gpu --gpu-device "$d" --json >"$work/json/stream-gpu-card$d.json" || say "multi: stream on CUDA$d failed"
    done
    if [ "$ngpu" -ge 2 ]; then run "$mw" stream --gpu --peer --json >"$work/json/peer.json" || say "multi: peer copies failed"
    else say "multi: fewer than two GPUs, no peer copies"; fi
    # Equal shares over every card unless TENSOR_SPLIT says otherwise (memwall: 1,1;
    # llama-bench's -ts: 1/1).
    ts=${TENSOR_SPLIT:-}
    if [ -z "$ts" ] && [ "$ngpu" -ge 2 ]; then ts=$(seq -s, 1 "$ngpu" | sed 's/[0-9]\+/1/g'); fi
    for m in $MULTI_MODELS; do
      time_left || { say "multi $m: skipped (time)"; continue; }
      f=$(model "$m") || { say "multi: synth $m failed"; continue; }
      for sm in $SPLIT_MODES; do
        mwts=(); lbts=()
        if [ "$sm" != none ] && [ -n "$ts" ]; then mwts=(--tensor-split "$ts"); lbts=(-ts "${ts//,//}"); fi
        for r in $(seq 1 "$rounds"); do
          time_left || { say "multi $m $sm round $r: skipped (time)"; continue; }
          say "multi $m split $sm round $r"
          reuse=$([ "$r" -gt 1 ] && echo --reuse-stream || true)
          run "$mw" --db "$db" bench -m "$f" -p "$P" -n "$N" -d "$MULTI_DEPTHS" -r "$reps" --ngl "$ngl" --split-mode "$sm" "${mwts[@]}" \
            $fit --no-results --quiet $reuse -o json >"$work/json/multi-mw-$m-$sm-$r.json" || say "multi $m $sm: memwall bench failed"
          if [ -x "$lb" ]; then
            run "$lb" -m "$f" -p "$P" -n "$N" -d "$MULTI_DEPTHS" -r "$reps" -ngl "$ngl" -sm "$sm" "${lbts[@]}" -o json \
              >"$work/json/multi-lb-$m-$sm-$r.json" || say "multi $m $sm: llama-bench failed"
          else say "multi: llama-bench not built here (peer not run)"; fi
        done
      done
      [ "${KEEP_MODELS:-0}" = 1 ] || case " $BATCH_MODEL $VERIFY_MODELS " in *" $m "*) ;; *) rm -f "$f";; esac
    done
    ;;
  *) say "unknown step $step"; exit 2 ;;
  esac
done
