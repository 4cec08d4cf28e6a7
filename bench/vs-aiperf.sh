#!/usr/bin/env bash
# memwall loadtest vs NVIDIA AIPerf 0.13.0 against the same server: bench/vs-client.sh
# with PEER=aiperf (its header says what is compared and how).
# usage: bench/vs-aiperf.sh URL|paced   env as bench/vs-client.sh
PEER=aiperf exec "$(dirname "$0")/vs-client.sh" "$@"
