#!/usr/bin/env bash
# The MLX engine's native side on Linux (memwall-core feature `mlx`):
#   1. OpenBLAS from Debian (libopenblas0-pthread): the wheel's own bundled reference
#      BLAS runs matmuls at a few GFLOP/s; memwall links OpenBLAS ahead of libmlx so
#      libmlx's cblas_* calls resolve to it (no LD_PRELOAD needed);
#   2. PyPI's `mlx-cpu` wheel (libmlx.so, its headers and MLXConfig.cmake), sha256-checked
#      and unpacked whole into $MEMWALL_MLX_DIR (default ~/.cache/memwall/mlx/mlx-cpu-<ver>),
#      where the patched mlx-sys (third_party/mlx-sys) builds mlx-c against it. Its
#      libmlx.so gets its own absolute path as SONAME (patchelf), so every binary
#      linked against it (the CLI, the app, the tests) records that path and loads it
#      without rpath or LD_LIBRARY_PATH (moving the folder means rebuilding);
#   3. the F16 GGUF the agreement check (`memwall mlx agree`, its test) runs on.
# macOS needs none of this (stock mlx-rs builds MLX with Metal).
# Idempotent; scripts/setup-tests.sh runs it.
set -euo pipefail
cd "$(dirname "$0")/.."

# The MLX version mlx-c 0.7.0 (inside mlx-sys 0.7.0) pins: mlx-c does not compile
# against 0.32.4's headers (gather_qmm gained a parameter).
MLX_VERSION=0.32.2
WHEEL="mlx_cpu-$MLX_VERSION-py3-none-manylinux_2_35_x86_64.whl"
WHEEL_SHA256=fc5d31b90fc4f457b2f9614ed45651a567d22a6a11a03d114a90a4e10bdd8878

if [ "$(uname -s)" != Linux ] || [ "$(uname -m)" != x86_64 ]; then
  echo "setup-mlx: only Linux x86_64 needs this (this is $(uname -s) $(uname -m))" >&2
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
missing=()
for p in libopenblas0-pthread patchelf; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup-mlx: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

dir=${MEMWALL_MLX_DIR:-$HOME/.cache/memwall/mlx/mlx-cpu-$MLX_VERSION}
stamp="$dir/stamp"
derive_f16() {
  # The agreement checks' inputs: catalogue models at F16, made by llama.cpp's own
  # llama-quantize (scripts/build-llama-tools.sh) from their quantized files, so
  # llama.cpp and MLX start from the same values: the default model (qwen2) and
  # SmolLM2-135M (llama). Skipped (the tests then say so) without them.
  derive_one qwen2.5-coder-0.5b-instruct-q4_k_m.gguf qwen2.5-coder-0.5b-instruct-f16.gguf
  derive_one SmolLM2-135M-Instruct.Q4_1.gguf smollm2-135m-instruct-f16.gguf
}
derive_one() {
  local q=${MEMWALL_LLAMA_TOOLS:-$HOME/.cache/memwall/llama-tools}/bin/llama-quantize
  local src=${MEMWALL_MODELS:-$HOME/.cache/memwall/models}/$1
  local out_dir=${MEMWALL_DERIVED:-$HOME/.cache/memwall/derived}
  local out=$out_dir/$2
  [ -f "$out" ] && return 0
  if [ ! -x "$q" ] || [ ! -f "$src" ]; then
    echo "setup-mlx: no llama-quantize or $1 yet: $2 (an agreement check's input) is not made" >&2
    return 0
  fi
  mkdir -p "$out_dir"
  "$q" --allow-requantize "$src" "$out.tmp" F16 >/dev/null 2>&1
  mv "$out.tmp" "$out"
  echo "setup-mlx: made $out"
}

want="$WHEEL_SHA256 soname=$dir/mlx/lib/libmlx.so"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -f "$dir/mlx/lib/libmlx.so" ]; then
  echo "setup-mlx: up to date in $dir"
  derive_f16
  exit 0
fi
wheels="$HOME/.cache/memwall/wheels"
mkdir -p "$wheels"
whl="$wheels/$WHEEL"
if ! echo "$WHEEL_SHA256  $whl" | sha256sum -c --status 2>/dev/null; then
  echo "setup-mlx: downloading $WHEEL from PyPI" >&2
  url=$(python3 - "$WHEEL" <<'PY'
import json, sys, urllib.request
req = urllib.request.Request("https://pypi.org/simple/mlx-cpu/", headers={"Accept": "application/vnd.pypi.simple.v1+json"})
d = json.load(urllib.request.urlopen(req, timeout=60))
print(next(f["url"] for f in d["files"] if f["filename"] == sys.argv[1]))
PY
)
  curl -fsSL --retry 3 -o "$whl.tmp" "$url"
  echo "$WHEEL_SHA256  $whl.tmp" | sha256sum -c --status || { echo "setup-mlx: $WHEEL sha256 mismatch (want $WHEEL_SHA256)" >&2; rm -f "$whl.tmp"; exit 1; }
  mv "$whl.tmp" "$whl"
fi
rm -rf "$dir.tmp"
mkdir -p "$dir.tmp"
python3 -m zipfile -e "$whl" "$dir.tmp"
test -f "$dir.tmp/mlx/lib/libmlx.so" -a -f "$dir.tmp/mlx/share/cmake/MLX/MLXConfig.cmake"
patchelf --set-soname "$dir/mlx/lib/libmlx.so" "$dir.tmp/mlx/lib/libmlx.so"
rm -rf "$dir"
mv "$dir.tmp" "$dir"
echo "$want" >"$stamp"
echo "setup-mlx: MLX $MLX_VERSION (CPU) ready in $dir"
derive_f16
