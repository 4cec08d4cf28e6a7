#!/usr/bin/env bash
# memwall's MLX engine on an NVIDIA GPU (MLX's CUDA back end: libmlx.so from PyPI's
# mlx-cuda-13 0.32.2 wheel) and mlx-lm 0.32.2 as its peer, from the three folders
# scripts/gpu-bundle/pack-mlx.sh makes. Each folder travels in its own device call
# (64 MiB a call), and every call starts with `stash`, which copies whatever it carried
# to $work/stash, so the last call finds all three while the machine stays warm:
#   call 1: STEPS=stash                 carry .mlx-wheels-1
#   call 2: STEPS="stash install"       carry .mlx-wheels-2
#   call 3: STEPS="stash hw stream bench peer"   carry .bundle-mlx
# Steps:
#   stash    copy the carried folders to $work/stash;
#   install  join the mlx-cuda-13 wheel's halves, check each wheel's sha256 (PyPI's),
#            install them in $work/site, point the wheel's RPATH to the NVIDIA libraries
#            PyTorch brings, and let MLX say its default device;
#   hw       memwall hw;
#   stream   memwall stream --gpu (the roof of the MLX rows: weights in GPU memory);
#   bench    memwall model synth MLX_MODEL, then memwall bench --engine ENGINES -p P -n N:
#            each row with its ceiling and achieved %;
#   act      tg N of memwall-MLX with f32 activations (MEMWALL_MLX_ACT=f32, the CPU's) and
#            with f16 (a GPU's default), alternating, at 4 and 8 bits: what the
#            activations' dtype costs on this GPU;
#   peer     tg N alternating memwall (bench -p 0 -n N, synchronous steps; mlx generate
#            -n N, greedy generation pipelined as generate_step) and mlx-lm
#            (bench/vs_mlx_lm.py, its own Qwen2 code on the same GGUF's weights: generate_step
#            and a synchronous loop) at 4 and 8 bits, ROUNDS rounds, the order swapped each
#            round; prints memwall-MLX tg ÷ mlx-lm tg, like with like. The peer holds
#            every float tensor in f16 (MLX_LM_DTYPE, default f16: as mlx_lm.convert
#            holds a model, and as memwall's activations are on a GPU).
# Output under $OUT: log.txt, memwall.db, results.tgz (every JSON output).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$(mktemp -d)}
work=${MEMWALL_GPU_WORK:-/tmp/memwall-mlx}
mkdir -p "$work/json" "$work/models" "$work/stash" "$OUT"
log="$OUT/log.txt"
steps=${STEPS:-stash install hw stream bench act peer}
MLX_MODEL=${MLX_MODEL:-qwen2.5-7b:F16}
ENGINES=${ENGINES:-mlx-4bit,mlx-8bit}
P=${P:-512}; N=${N:-128}; reps=${REPS:-3}; rounds=${ROUNDS:-2} # peer rounds ROUND_FROM (1)..ROUNDS
db="$work/memwall.db"
deadline=${DEADLINE:-560}
min_left=${MIN_LEFT:-45}
. "$root/scripts/gpu-bundle/pass.sh"
site="$work/site"
mw="$work/stash/.bundle-mlx/memwall"
mlx_env() {
  # The CUDA libmlx.so first, then Debian's OpenBLAS and llama.cpp's CPU libraries.
  if [ -d "$work/stash/.bundle-mlx/lib" ] && [ ! -f "$work/lib/libopenblas.so.0" ]; then
    mkdir -p "$work/lib"
    cp "$work/stash/.bundle-mlx/lib/"*.so.0 "$work/lib/" 2>/dev/null
    xz -dc "$work/stash/.bundle-mlx/lib/libopenblas.so.0.xz" >"$work/lib/libopenblas.so.0"
  fi
  export LD_LIBRARY_PATH="$site/mlx/lib:$work/lib:/usr/local/nvidia/lib64:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
}

# The synthetic model's file (the bench step makes it); `need_model STEP` stops when absent.
preset=${MLX_MODEL%%:*} quant=${MLX_MODEL##*:}
f="$work/models/$preset-$quant.gguf"
need_model() { [ -f "$f" ] || { say "$1: run the bench step first (it makes $f)"; exit 1; }; }

for step in $steps; do
  if ! time_left; then say "$step: skipped (less than ${min_left} s left of this call's ${deadline} s)"; continue; fi
  case $step in
  stash)
    for d in .mlx-wheels-1 .mlx-wheels-2 .bundle-mlx; do
      if [ -d "$root/$d" ]; then rm -rf "${work:?}/stash/$d"; cp -r "$root/$d" "$work/stash/$d"; say "stash: $d ($(du -sm "$root/$d" | cut -f1) MiB)"; fi
    done
    ;;
  install)
    w1="$work/stash/.mlx-wheels-1" w2="$work/stash/.mlx-wheels-2"
    [ -d "$w1" ] && [ -d "$w2" ] || { say "install: needs .mlx-wheels-1 and .mlx-wheels-2 stashed by earlier calls"; exit 1; }
    mkdir -p "$work/wheels"
    for half in "$w1"/*.00; do
      whl=$(basename "${half%.00}")
      cat "$half" "$w2/$whl.01" >"$work/wheels/$whl"
    done
    cp "$w2"/*.whl "$work/wheels/"
    (cd "$work/wheels" && sha256sum -c "$w2/SHA256SUMS") 2>&1 | tee -a "$log" || { say "install: a wheel's sha256 differs"; exit 1; }
    rm -rf "$site"
    run python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" "$work"/wheels/*.whl || exit 1
    # The wheel's libmlx.so looks for CUDA's libraries at $ORIGIN/../../nvidia/…, where
    # pip puts the nvidia-* packages; PyTorch's are those here.
    nv=$(python3 -c 'import torch, os; print(os.path.join(os.path.dirname(os.path.dirname(torch.__file__)), "nvidia"))' 2>/dev/null)
    if [ -d "$nv" ]; then ln -sfn "$nv" "$site/nvidia"; say "install: NVIDIA libraries from $nv"; else say "install: no PyTorch NVIDIA libraries found"; fi
    mlx_env
    ldd "$site/mlx/lib/libmlx.so" | grep 'not found' | tee -a "$log" >&2 && say "install: libmlx.so misses the libraries above"
    run python3 -c 'import mlx.core as mx; a = mx.ones((1024, 1024)); print("mlx", mx.__version__, mx.default_device(), float((a @ a).sum()))' || exit 1
    ;;
  hw)
    mlx_env
    [ -x "$mw" ] || { say "hw: no .bundle-mlx stashed (carry it with stash)"; exit 1; }
    say "hw"
    run "$mw" hw
    run "$mw" hw --json >"$work/json/hw.json"
    command -v nvidia-smi >/dev/null && run nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.memory,clocks.max.sm --format=csv
    ;;
  stream)
    mlx_env
    say "stream: memwall stream --gpu"
    run "$mw" --db "$db" stream --gpu --json >"$work/json/stream-gpu.json"
    ;;
  bench)
    mlx_env
    if [ ! -f "$f" ]; then
      say "bench: memwall model synth $MLX_MODEL"
      run "$mw" --db "$db" model synth --preset "$preset" -q "$quant" --out "$f" >&2 || { say "bench: synth failed"; exit 1; }
    fi
    say "bench: $MLX_MODEL on $ENGINES, pp$P tg$N, $reps reps"
    run "$mw" --db "$db" bench -m "$f" --engine "$ENGINES" -p "$P" -n "$N" -d 0 -r "$reps" \
      --skip-capacity-check --no-results --reuse-stream -o json >"$work/json/bench-mlx.json" \
      || say "bench: failed"
    ;;
  act)
    mlx_env
    need_model act
    say "act: tg$N memwall-MLX with f32 and f16 activations at 4 and 8 bits"
    for b in 4 8; do
      for a in f32 f16; do
        time_left || { say "act: skipped the rest (time)"; break 2; }
        run env MEMWALL_MLX_ACT=$a "$mw" --db "$db" bench -m "$f" --engine "mlx-${b}bit" -p 0 -n "$N" -d 0 -r "$reps" \
          --skip-capacity-check --no-results --quiet --reuse-stream -o json >"$work/json/act-$a-$b.json"
      done
    done
    run python3 - "$work/json" <<'PY'
import json, os, sys
d = sys.argv[1]
ts = lambda p: json.JSONDecoder().raw_decode(open(p).read().lstrip())[0][0]["avg_ts"]
print("| bits | tg t/s, f32 activations | tg t/s, f16 activations | f16 ÷ f32 |")
print("| ---: | ---: | ---: | ---: |")
for b in (4, 8):
    p32, p16 = f"{d}/act-f32-{b}.json", f"{d}/act-f16-{b}.json"
    if all(os.path.exists(p) and os.path.getsize(p) for p in (p32, p16)):
        a, c = ts(p32), ts(p16)
        print(f"| {b} | {a:.2f} | {c:.2f} | {c / a:.3f} |")
PY
    ;;
  peer)
    mlx_env
    need_model peer
    say "peer: tg$N memwall-MLX vs mlx-lm at 4 and 8 bits, $rounds rounds"
    mem() { run "$mw" --db "$db" bench -m "$f" --engine "mlx-${1}bit" -p 0 -n "$N" -d 0 -r "$reps" \
      --skip-capacity-check --no-results --quiet --reuse-stream -o json >"$work/json/mem-$1-$2.json"; }
    lm() { run env MLX_LM_DTYPE="${MLX_LM_DTYPE:-f16}" python3 "$root/bench/vs_mlx_lm.py" "$f" "$1" "$N" >"$work/json/lm-$1-$2.json"; }
    gen() { run "$mw" mlx generate -m "$f" --engine "mlx-${1}bit" -n "$N" -r "$reps" --json >"$work/json/gen-$1-$2.json"; }
    done_rounds=$((${ROUND_FROM:-1} - 1))
    for r in $(seq "${ROUND_FROM:-1}" "$rounds"); do
      time_left || { say "peer round $r: skipped (time)"; break; }
      for b in 4 8; do
        if [ $((r % 2)) -eq 1 ]; then mem "$b" "$r"; gen "$b" "$r"; lm "$b" "$r"; else lm "$b" "$r"; gen "$b" "$r"; mem "$b" "$r"; fi
      done
      done_rounds=$r
    done
    [ "$done_rounds" -gt 0 ] && run python3 "$root/bench/vs_mlx_lm_table.py" "$work/json" "$done_rounds"
    ;;
  *) say "unknown step $step"; exit 1 ;;
  esac
done
