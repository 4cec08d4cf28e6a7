#!/usr/bin/env bash
# memwall's MLX engine against mlx-lm (its own Qwen2 code) on the same weights and
# the same machine: tg N at 4 and 8 bits (both quantize the same f16 values with
# MLX's affine quantizer, group 64), alternating memwall / mlx-lm, several rounds;
# prints memwall-MLX tg ÷ mlx-lm tg per bit width. Goal ≥ 0.95. memwall runs twice a
# round: as it ships (each quantized matrix split across one MLX CPU stream per
# physical core) and with MEMWALL_MLX_LANES=1 (one stream, as mlx-lm runs: the
# like-for-like figure). The peer keeps the GGUF's f32 norms and biases (MLX_LM_DTYPE
# unset), so its activations are f32, as memwall's are on the CPU. Run it on a quiet
# machine. Both sides use Debian's OpenBLAS (mlx-lm through LD_PRELOAD). Needs a build with the MLX engine (scripts/setup-mlx.sh, which also
# makes the default F16 GGUF).
#
# usage: bench/vs-mlx-lm.sh [MODEL-F16.gguf] [ROUNDS]
#   env N (tg length, default 128), REPS (memwall reps, default 3)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
./scripts/setup-mlx.sh >&2
. scripts/features.sh
cargo build --release --locked -q -p memwall-cli ${MEMWALL_FEATURES:+--features "$MEMWALL_FEATURES"}
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
mw="$target/release/memwall"
model=${1:-${MEMWALL_DERIVED:-$HOME/.cache/memwall/derived}/qwen2.5-coder-0.5b-instruct-f16.gguf}
rounds=${2:-3}
n=${N:-128}
reps=${REPS:-3}
[ -f "$model" ] || { echo "model $model not found (scripts/setup-mlx.sh makes the default one)" >&2; exit 1; }

# mlx-lm from PyPI, pinned to the MLX memwall links.
venv=${MEMWALL_MLX_LM_VENV:-$HOME/.cache/memwall/venv-mlx-lm}
pins=(mlx==0.32.2 mlx-cpu==0.32.2 mlx-lm==0.32.2)
if [ ! -f "$venv/stamp" ] || [ "$(cat "$venv/stamp")" != "${pins[*]}" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "${pins[@]}"
  echo "${pins[*]}" >"$venv/stamp"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
lock=/tmp/memwall-engine-tests.lock
echo "model $model, tg$n, memwall reps $reps, rounds $rounds (alternating memwall / mlx-lm, order swapped each round)" >&2
mem() { # $1 = bits, $2 = round
  local reuse=--reuse-stream; [ -f "$work/have-stream" ] || reuse=""
  flock "$lock" "$mw" --db "$work/o.db" bench -m "$model" --engine "mlx-${1}bit" -p 0 -n "$n" -d 0 -r "$reps" \
    --no-results --quiet $reuse -o json >"$work/mem-$1-$2.json"
  touch "$work/have-stream"
  flock "$lock" env MEMWALL_MLX_LANES=1 "$mw" --db "$work/o.db" bench -m "$model" --engine "mlx-${1}bit" -p 0 -n "$n" -d 0 -r "$reps" \
    --no-results --quiet --reuse-stream -o json >"$work/one-$1-$2.json"
}
lm() { flock "$lock" env LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libopenblas.so.0 "$venv/bin/python" bench/vs_mlx_lm.py "$model" "$1" "$n" >"$work/lm-$1-$2.json"; }
for r in $(seq 1 "$rounds"); do
  for b in 4 8; do
    if [ $((r % 2)) -eq 1 ]; then mem "$b" "$r"; lm "$b" "$r"; else lm "$b" "$r"; mem "$b" "$r"; fi
  done
done
python3 bench/vs_mlx_lm_table.py "$work" "$rounds"
