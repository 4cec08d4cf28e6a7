#!/usr/bin/env bash
# A newcomer's command 1 with nothing cached: empty HOME (model/wheel caches), empty CARGO_HOME and target.
export HOME=/tmp/fresh/home RUSTUP_HOME=/root/.rustup CARGO_HOME=/tmp/fresh/home/.cargo PATH=/root/.cargo/bin:/usr/local/bin:/usr/bin:/bin
unset CARGO_TARGET_DIR
cd /tmp/fresh/repo
start=$(date +%s)
cmd1=$(sed -n '/^```sh/{n;p;q}' README.md)
echo "command 1: $cmd1"
bash -c "$cmd1" 2>&1 | while IFS= read -r l; do printf '%5d %s\n' $(( $(date +%s) - start )) "$l"; done
echo "exit ${PIPESTATUS[0]} after $(( $(date +%s) - start )) s"
