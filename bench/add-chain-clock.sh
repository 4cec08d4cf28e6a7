#!/usr/bin/env bash
# The add chain's clock readings (the clock a compute peak's bound uses where sysfs
# has none) alone and beside busy threads, alternating, ROUNDS rounds; prints every
# reading and the spread max ÷ min − 1 against MEASURED_CLOCK_MARGIN (10 %). Goal:
# the spread stays within the margin, or a kernel at its ports' true limit fails its
# bound. The test suite asserts only that every reading is a plausible clock
# (measure/peak.rs); the spread is timing on a shared machine, measured here.
#
# usage: bench/add-chain-clock.sh [ROUNDS] [BUSY_THREADS]
#   ROUNDS default 10; BUSY_THREADS default twice the logical CPUs
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
. scripts/features.sh  # the test suite's features: the example links the memwall-core it already built
cargo build --release --locked -q --workspace ${MEMWALL_FEATURES:+--features "memwall-cli/$MEMWALL_FEATURES"} \
  --example add_chain_clock
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
"$target/release/examples/add_chain_clock" "$@"
