#!/usr/bin/env bash
# memwall's whole test suite. Tests that need a model use the real catalogue files;
# where one is absent they skip with a loud message, unless MEMWALL_REQUIRE_MODELS=1
# (CI), where absence fails. Engine tests serialize themselves through a file lock
# (llama.cpp's OpenMP threads collapse when two engine workloads share the cores).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo test (release: the engine is only meaningful optimized, and the build is shared with memwall bench)"
cargo test --release --locked --workspace -- --test-threads="${MEMWALL_TEST_THREADS:-2}"

echo "== all tests passed"
