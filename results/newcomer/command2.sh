#!/usr/bin/env bash
# A newcomer's command 2 (the whole test suite) on a fresh clone under /tmp with an empty
# CARGO_HOME and an empty target dir (every crate downloaded from crates.io, everything
# compiled). HOME stays: command 1 (command1.sh) fetched the default model there; what the
# suite's set-up fetches on top (test models, venvs, llama.cpp tools) is reused where present.
# The GPU bundle's own target dir is empty too.
set -u
fresh=${FRESH:-/tmp/fresh2}
export RUSTUP_HOME=/root/.rustup CARGO_HOME=$fresh/cargo-home MEMWALL_BUNDLE_TARGET=$fresh/target-bundle
export PATH=/root/.cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
unset CARGO_TARGET_DIR
cd "$fresh/repo"
start=$(date +%s)
cmd2=$(sed -n '/^```sh/{n;n;p;q}' README.md)
echo "command 2: $cmd2 (commit $(git rev-parse --short HEAD), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2))"
bash -c "$cmd2" 2>&1 | while IFS= read -r l; do printf '%5d %s\n' $(( $(date +%s) - start )) "$l"; done
echo "exit ${PIPESTATUS[0]} after $(( $(date +%s) - start )) s"
