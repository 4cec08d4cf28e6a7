#!/usr/bin/env bash
# memwall's whole test suite. Tests that need a model use the real catalogue files;
# where one is absent they skip with a loud message, unless MEMWALL_REQUIRE_MODELS=1
# (CI), where absence fails. Engine tests serialize themselves through a file lock
# (llama.cpp's OpenMP threads collapse when two engine workloads share the cores).
set -euo pipefail
cd "$(dirname "$0")/.."

# A fresh machine gets everything the suite needs first (both scripts skip what is there).
echo "== set-up: scripts/setup.sh (build + default model), scripts/setup-tests.sh (the rest)"
MEMWALL_SETUP_MODELS=none ./scripts/setup.sh
./scripts/setup-tests.sh

echo "== cargo fmt --check"
cargo fmt --all -- --check

# The desktop app's front end, built before cargo so the app embeds it.
if command -v npm >/dev/null; then
  echo "== ui: npm ci, vitest, build"
  npm --prefix ui test
  npm --prefix ui run build
else
  echo "!!!!!!!! SKIPPED the app's front-end build and tests: npm not installed (the app shows a placeholder page) !!!!!!!!" >&2
  [ "${MEMWALL_REQUIRE_E2E:-0}" = "1" ] && exit 1
fi

# llama.cpp's compare-llama-bench.py in a venv, for the export test that feeds it
# memwall's exports (it skips loudly without it, unless MEMWALL_REQUIRE_LLAMA_TOOLS=1).
echo "== compare-llama-bench.py venv"
if ! ./scripts/setup-compare-venv.sh; then
  echo "!!!!!!!! compare-llama-bench.py set-up failed: the export comparison test will skip !!!!!!!!" >&2
  [ "${MEMWALL_REQUIRE_LLAMA_TOOLS:-0}" = "1" ] && exit 1
fi

echo "== cargo test (release: the engine is only meaningful optimized, and the build is shared with memwall bench)"
# The CLI (scripts/setup.sh) and the workspace's tests share one build of llama.cpp
# and memwall-core: crates/workspace-hack makes both resolve the same features.
# shellcheck source=scripts/features.sh
. scripts/features.sh
feat=(${MEMWALL_FEATURES:+--features "memwall-cli/$MEMWALL_FEATURES"})
cargo test --release --locked --workspace "${feat[@]}" --no-run --message-format=json-render-diagnostics \
  | python3 scripts/check-built-once.py
cargo test --release --locked --workspace "${feat[@]}" -- --test-threads="${MEMWALL_TEST_THREADS:-2}"

echo "== GPU bundle: the H200 pass's script, dry-run on this CPU (CPU back end, tiny settings)"
./scripts/gpu-bundle/dry-run.sh

echo "== aarch64 compute-peak kernels under qemu-aarch64"
./scripts/check-aarch64-peak.sh

# End-to-end: the built UI with mocked IPC (chromium), then the real app through
# tauri-driver under Xvfb. Each skips loudly when its tools are absent
# (MEMWALL_REQUIRE_E2E=1 turns a skip into a failure).
echo "== ui: mocked-IPC end-to-end (playwright-core + chromium)"
if command -v node >/dev/null; then node tests/e2e/ui-mocked.mjs
else
  echo "!!!!!!!! SKIPPED mocked UI test: node not installed !!!!!!!!" >&2
  [ "${MEMWALL_REQUIRE_E2E:-0}" = "1" ] && exit 1
fi
echo "== app: end-to-end in the real app (tauri-driver + WebKitWebDriver under Xvfb)"
cargo build --release --locked -p memwall-app
tests/e2e/run.sh

echo "== all tests passed"
