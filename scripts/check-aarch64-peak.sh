#!/usr/bin/env bash
# Runs memwall's compute-peak kernels for aarch64 (NEON fmla, sdot) under
# qemu-aarch64 on an x86-64 machine: measure/peak.rs and units.rs built alone as a
# throw-away crate, cross-linked with Debian's aarch64 gcc, tests run with
# `-cpu max` (which has the dotprod extension). Only the correctness tests mean
# anything under emulation (every path does every step, bounds, refusals); rates
# and clocks timed under qemu are not the hardware's, so the speed test and the
# add chain's stability test are skipped (qemu's translated chain ran at
# 1.34–1.57 "GHz" from one reading to the next: the emulator's pace, not a core's).
# Needs: rustup target aarch64-unknown-linux-gnu, Debian's qemu-user,
# gcc-aarch64-linux-gnu and libc6-dev-arm64-cross. Skips loudly without them.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
missing=()
command -v qemu-aarch64 >/dev/null || missing+=(qemu-user)
command -v aarch64-linux-gnu-gcc >/dev/null || missing+=(gcc-aarch64-linux-gnu)
rustc --print sysroot | xargs -I{} test -d {}/lib/rustlib/aarch64-unknown-linux-gnu || missing+=("rustup target aarch64-unknown-linux-gnu")
if [ ${#missing[@]} -gt 0 ]; then
  echo "SKIP check-aarch64-peak: missing ${missing[*]}" >&2
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
  --skip every_path_is_within_its_bound_and_above_scalar \
  --skip the_add_chain_reads_one_clock_alone_and_beside_busy_threads --nocapture >"$work/test.log" 2>&1; then
  tail -40 "$work/test.log" >&2
  echo "check-aarch64-peak: FAILED (full log: $work/test.log)" >&2
  exit 1
fi
grep -E "^test |paths checked|test result" "$work/test.log"
