#!/usr/bin/env bash
# Packs what a GPU machine needs into .bundle/ (≤ 64 MiB, the device tool's limit for
# one call): memwall built with llama.cpp as shared libraries (`dynamic-link`) for a
# portable x86-64-v3 CPU, and the llama.cpp tree those libraries were built from
# (the crate's vendored sources plus llama.cpp's tools/, as scripts/build-llama-tools.sh
# assembles them). On the GPU machine scripts/gpu-bundle/run.sh builds that same tree
# with CUDA; the binary finds those libraries through LD_LIBRARY_PATH, so the CUDA
# back end and llama-bench come from the sources memwall itself compiled against.
#
# usage: scripts/gpu-bundle/pack.sh            (build + pack)
#        scripts/gpu-bundle/pack.sh --check    (pack the source tree only, check sizes;
#                                               the test suite runs this)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
out="$root/.bundle"
limit=$((60 * 1024 * 1024))
check_only=0
if [ "${1:-}" = "--check" ]; then
  check_only=1
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
src=${MEMWALL_LLAMA_TOOLS:-$HOME/.cache/memwall/llama-tools}/src
if [ ! -f "$src/CMakeLists.txt" ] || [ ! -d "$src/tools/llama-bench" ]; then
  ./scripts/build-llama-tools.sh >&2
fi
rm -rf "$out"
mkdir -p "$out"
tar czf "$out/llama.cpp.tar.gz" --exclude=./models --exclude=./docs --exclude=./gguf-py \
  --exclude=./.git --exclude=./media --exclude=./tools/server/public --exclude=./tools/server/webui \
  -C "$src" .
if [ "$check_only" = 0 ]; then
  target=${MEMWALL_BUNDLE_TARGET:-$HOME/.cache/memwall/target-bundle}
  # Not target-cpu=native (.cargo/config.toml's default): the binary must run on
  # another machine's CPU. $ORIGIN: the shared libraries may sit beside it.
  CARGO_TARGET_DIR="$target" RUSTFLAGS='-C target-cpu=x86-64-v3 -C link-arg=-Wl,-rpath,$ORIGIN' \
    cargo build --release --locked -p memwall-cli --features dynamic-link
  cp "$target/release/memwall" "$out/memwall"
  strip "$out/memwall"
  # What the binary needs from llama.cpp (rebuilt with CUDA there; used as they are
  # for a CPU-only try of the bundle).
  mkdir -p "$out/cpu-lib"
  for l in "$target"/release/build/llama-cpp-sys-2-*/out/lib/lib*.so.0; do cp -L "$l" "$out/cpu-lib/"; done
  readelf -d "$out/memwall" | grep -E 'NEEDED.*(llama|ggml)' >&2
fi
size=$(du -sb "$out" | cut -f1)
echo "gpu bundle: $out = $((size / 1024 / 1024)) MiB ($(ls "$out" | tr '\n' ' '))" >&2
if [ "$size" -gt "$limit" ]; then
  echo "gpu bundle: $size bytes is over the $limit-byte limit of one device call" >&2
  exit 1
fi
