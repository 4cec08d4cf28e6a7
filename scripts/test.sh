#!/usr/bin/env bash
# memwall's whole test suite. Tests that need a model use the real catalogue files;
# where one is absent they skip with a loud message, unless MEMWALL_REQUIRE_MODELS=1
# (CI), where absence fails. Engine tests serialize themselves through a file lock
# (llama.cpp's OpenMP threads collapse when two engine workloads share the cores).
#
# Every step runs even when an earlier one failed (a failing test binary does not hide
# the GPU dry run or the end-to-end tests); the failures are listed at the end and the
# suite fails if there was any. Only the set-up steps stop it: without a build nothing
# after them means anything.
set -uo pipefail
cd "$(dirname "$0")/.."

failed=()
# MEMWALL_ONLY=REGEX (a drill, scripts/ci-skip-drill.sh): only the steps and skips whose
# names match run; the end then says that this was not the whole suite.
selected() { [ -z "${MEMWALL_ONLY:-}" ] || grep -Eq -- "$MEMWALL_ONLY" <<<"$1"; }
# step NAME CMD...: runs CMD, records NAME as failed when it exits non-zero.
step() {
  local name=$1
  shift
  if ! selected "$name"; then echo "-- $name: not selected (MEMWALL_ONLY)"; return; fi
  echo "== $name"
  local t0=$SECONDS
  if "$@"; then
    echo "-- $name: ok ($((SECONDS - t0)) s)"
  else
    local rc=$?
    echo "!!!!!!!! FAILED: $name (exit $rc, $((SECONDS - t0)) s) !!!!!!!!" >&2
    failed+=("$name (exit $rc)")
  fi
}
# skip NAME REASON [REQUIRE_VAR]: a loud skip, a failure when REQUIRE_VAR=1 (CI).
skip() {
  selected "$1" || return 0
  echo "!!!!!!!! SKIPPED $1: $2 !!!!!!!!" >&2
  if [ -n "${3:-}" ] && [ "${!3:-0}" = "1" ]; then
    failed+=("$1 (skipped, but $3=1)")
  fi
}

# A fresh machine gets everything the suite needs first (both scripts skip what is there).
echo "== set-up: scripts/setup.sh (build + default model), scripts/setup-tests.sh (the rest)"
# The suite's features (the MLX engine on Linux x86_64) for the CLI too: one build of
# llama.cpp and memwall-core for both (a CLI from command 1, built without them, is
# compiled again here; llama.cpp is not).
# shellcheck source=scripts/features.sh
. scripts/features.sh
# Lints while building: clippy-driver compiles the workspace's own crates, as `cargo
# clippy` runs it (RUSTC_WORKSPACE_WRAPPER; dependencies get plain rustc), with -D
# warnings. The CLI's build and the test build below then lint every target they
# compile, and no separate `cargo clippy` pass type-checks the workspace and its ~800
# dependencies again (176 s of a cold CI run on 2 cores). Set for every cargo command
# of the workspace from here on, so none of them rebuilds what another built.
clippy_driver=$(rustup which clippy-driver 2>/dev/null || command -v clippy-driver || true)
if [ -n "$clippy_driver" ]; then
  export RUSTC_WORKSPACE_WRAPPER=$clippy_driver CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
else
  failed+=("clippy: clippy-driver not found (rustup component add clippy)")
fi
MEMWALL_SETUP_MODELS=none ./scripts/setup.sh || { echo "set-up failed: scripts/setup.sh" >&2; exit 1; }
./scripts/setup-tests.sh || { echo "set-up failed: scripts/setup-tests.sh" >&2; exit 1; }

step "cargo fmt --check" cargo fmt --all -- --check

# The desktop app's front end, built before cargo so the app embeds it.
if command -v npm >/dev/null; then
  step "ui: vitest" npm --prefix ui test
  step "ui: build" npm --prefix ui run build
else
  skip "the app's front-end build and tests" "npm not installed (the app shows a placeholder page)" MEMWALL_REQUIRE_E2E
fi

# llama.cpp's compare-llama-bench.py in a venv, for the export test that feeds it
# memwall's exports (it skips loudly without it, unless MEMWALL_REQUIRE_LLAMA_TOOLS=1).
if ! ./scripts/setup-compare-venv.sh; then
  skip "compare-llama-bench.py venv" "its set-up failed: the export comparison test will skip" MEMWALL_REQUIRE_LLAMA_TOOLS
fi

# The CLI (scripts/setup.sh) and the workspace's tests share one build of llama.cpp
# and memwall-core: crates/workspace-hack makes both resolve the same features.
# shellcheck source=scripts/features.sh
. scripts/features.sh
feat=(${MEMWALL_FEATURES:+--features "memwall-cli/$MEMWALL_FEATURES"})
built_once() {
  cargo test --release --locked --workspace "${feat[@]}" --no-run --message-format=json-render-diagnostics \
    | python3 scripts/check-built-once.py
}
step "cargo test --no-run (built once: llama.cpp and memwall-core shared with the CLI; clippy -D warnings on every target it compiles)" built_once
# --no-fail-fast: every test binary runs; cargo lists the failing ones at its end.
step "cargo test (release: the engine is only meaningful optimized, and the build is shared with memwall bench)" \
  cargo test --release --locked --workspace "${feat[@]}" --no-fail-fast -- --test-threads="${MEMWALL_TEST_THREADS:-2}"

# The independent verifier on the most complete store the suite builds (a real bench run
# and fixture runs of every other family, kept by tests/report.rs): its per-family
# counts, then one planted error per family, each of which must fail it.
if [ -f target/e2e/verify-store.db ]; then
  step "verifier: per-family checks from raw samples; one planted error per family" \
    python3 tools/verify/plant.py --db target/e2e/verify-store.db
else
  skip "the verifier's planted errors" "tests/report.rs kept no store (no test model)" MEMWALL_REQUIRE_MODELS
fi

step "GPU bundle: the H200 pass's script, dry-run on this CPU (CPU back end, tiny settings)" \
  ./scripts/gpu-bundle/dry-run.sh

# Its own crate for another target: built by plain rustc, as before.
step "aarch64 compute-peak kernels under qemu-aarch64" env -u RUSTC_WORKSPACE_WRAPPER -u CLIPPY_ARGS ./scripts/check-aarch64-peak.sh

# End-to-end: the built UI with mocked IPC (chromium), then the real app through
# tauri-driver under Xvfb. Each skips loudly when its tools are absent
# (MEMWALL_REQUIRE_E2E=1 turns a skip into a failure).
if command -v node >/dev/null; then
  step "ui: mocked-IPC end-to-end (playwright-core + chromium)" node tests/e2e/ui-mocked.mjs
else
  skip "mocked UI test" "node not installed" MEMWALL_REQUIRE_E2E
fi
# The app binary with the tests' features: `cargo test --no-run` above already built it
# (the app's tests link it), so this compiles nothing; `-p memwall-app` alone would
# resolve memwall-core without the workspace's features and compile it a second time.
app_e2e() {
  cargo build --release --locked --workspace "${feat[@]}" --bin memwall-app && tests/e2e/run.sh
}
step "app: end-to-end in the real app (tauri-driver + WebKitWebDriver under Xvfb)" app_e2e

if [ ${#failed[@]} -gt 0 ]; then
  echo
  echo "== ${#failed[@]} step(s) FAILED:" >&2
  for f in "${failed[@]}"; do echo "   - $f" >&2; done
  exit 1
fi
if [ -n "${MEMWALL_ONLY:-}" ]; then
  echo "== the selected steps passed (MEMWALL_ONLY=$MEMWALL_ONLY): not the whole suite"
  exit 0
fi
echo "== all tests passed"
