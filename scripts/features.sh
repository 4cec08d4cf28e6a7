# Sourced by scripts/setup.sh, setup-tests.sh and test.sh: the memwall-cli features
# this machine builds with, one list so the CLI build and the workspace's test build
# resolve the same features (llama.cpp compiles once). `mlx` on Linux x86_64 (the
# MLX engine on PyPI's mlx-cpu, see scripts/setup-mlx.sh); MEMWALL_FEATURES set by
# the caller wins (empty: llama.cpp alone).
if [ -z "${MEMWALL_FEATURES+x}" ]; then
  if [ "$(uname -s)" = Linux ] && [ "$(uname -m)" = x86_64 ]; then
    MEMWALL_FEATURES=mlx
  else
    MEMWALL_FEATURES=
  fi
fi
export MEMWALL_FEATURES
