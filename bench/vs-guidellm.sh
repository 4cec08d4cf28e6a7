#!/usr/bin/env bash
# memwall loadtest vs GuideLLM 0.8.1 against the same server: bench/vs-client.sh with
# PEER=guidellm (its header says what is compared and how).
# usage: bench/vs-guidellm.sh URL|paced   env as bench/vs-client.sh
PEER=guidellm exec "$(dirname "$0")/vs-client.sh" "$@"
