#!/usr/bin/env bash
# `.ci/run` cold (issue 40 §5: within 45 min): a fresh clone under /tmp with an empty
# CARGO_HOME and an empty CARGO_TARGET_DIR (every crate downloaded from crates.io, everything
# compiled, llama.cpp included). `.ci/run` is README command 2 (scripts/test.sh) with every
# skip turned into a failure. HOME stays: the models and venvs command 1 and an earlier suite
# fetched there are reused. The GPU bundle's own target dir is empty too.
set -u
fresh=${FRESH:-/tmp/fresh3}
export RUSTUP_HOME=/root/.rustup CARGO_HOME=$fresh/cargo-home MEMWALL_BUNDLE_TARGET=$fresh/target-bundle
export CARGO_TARGET_DIR=$fresh/target
export PATH=/root/.cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
cd "$fresh/repo"
start=$(date +%s)
echo ".ci/run (commit $(git rev-parse --short HEAD), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2))"
./.ci/run 2>&1 | while IFS= read -r l; do printf '%5d %s\n' $(( $(date +%s) - start )) "$l"; done
echo "exit ${PIPESTATUS[0]} after $(( $(date +%s) - start )) s"
