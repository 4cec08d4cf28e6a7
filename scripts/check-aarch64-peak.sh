#!/usr/bin/env bash
# Runs memwall's compute-peak kernels for aarch64 (NEON fmla, sdot) under
# qemu-aarch64 on an x86-64 machine: measure/peak.rs and units.rs built alone as a
# throw-away crate, cross-linked with Debian's aarch64 gcc, tests run with
# `-cpu max` (which has the dotprod extension). Only the correctness tests mean
# anything under emulation (every path does every step, bounds, refusals); rates
# and clocks timed under qemu are not the hardware's, so the speed test is skipped
# (the add chain's stability is not a test at all: qemu's translated chain ran at
# 1.34–1.57 "GHz" from one reading to the next, the emulator's pace, not a core's;
# bench/add-chain-clock.sh measures it on real hardware).
# Needs: rustup target aarch64-unknown-linux-gnu, Debian's qemu-user,
# gcc-aarch64-linux-gnu and libc6-dev-arm64-cross (scripts/setup-tests.sh installs
# them). Skips loudly without them, unless MEMWALL_REQUIRE_CROSS=1 (CI), where
# that fails.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
missing=()
command -v qemu-aarch64 >/dev/null || missing+=(qemu-user)
command -v aarch64-linux-gnu-gcc >/dev/null || missing+=(gcc-aarch64-linux-gnu)
rustc --print sysroot | xargs -I{} test -d {}/lib/rustlib/aarch64-unknown-linux-gnu || missing+=("rustup target aarch64-unknown-linux-gnu")
if [ ${#missing[@]} -gt 0 ]; then
  if [ "${MEMWALL_REQUIRE_CROSS:-0}" = 1 ]; then
    echo "check-aarch64-peak: FAILED: ${missing[*]} required (MEMWALL_REQUIRE_CROSS=1) but missing: run scripts/setup-tests.sh" >&2
    exit 1
  fi
  echo "!!!!!!!! SKIPPED check-aarch64-peak: missing ${missing[*]} (CI sets MEMWALL_REQUIRE_CROSS=1 so nothing is skipped there) !!!!!!!!" >&2
  exit 0
fi
work=${CARGO_TARGET_DIR:-$HOME/.cache/memwall/target}/aarch64-peak
mkdir -p "$work/src"
cat > "$work/Cargo.toml" <<TOML
[package]
name = "aarch64-peak"
version = "0.0.0"
edition = "2024"
publish = false
[dependencies]
serde = { version = "1", features = ["derive"] }
thiserror = "2"
ts-rs = { version = "12", features = ["no-serde-warnings"] }
[workspace]
TOML
cat > "$work/src/lib.rs" <<RS
//! memwall's compute-peak module and its units, built alone for aarch64.
#![allow(missing_docs)]
#[path = "$repo/crates/memwall-core/src/units.rs"]
pub mod units;
pub mod measure {
    #[path = "$repo/crates/memwall-core/src/measure/peak.rs"]
    pub mod peak;
}
RS
cp "$repo/Cargo.lock" "$work/Cargo.lock"
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu -cpu max"
cd "$work"
if ! CARGO_TARGET_DIR="$work/target" cargo test --offline --release --target aarch64-unknown-linux-gnu -- \
  --skip every_path_is_within_its_bound_and_above_scalar --nocapture >"$work/test.log" 2>&1; then
  tail -40 "$work/test.log" >&2
  echo "check-aarch64-peak: FAILED (full log: $work/test.log)" >&2
  exit 1
fi
grep -E "^test |paths checked|test result" "$work/test.log"
# A run that tested nothing (every test renamed or filtered away) is not a pass.
grep -qE "^test result: ok\. [1-9][0-9]* passed" "$work/test.log" \
  || { echo "check-aarch64-peak: FAILED: no test ran (full log: $work/test.log)" >&2; exit 1; }
