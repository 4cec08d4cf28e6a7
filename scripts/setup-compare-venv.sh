#!/usr/bin/env bash
# Sets up llama.cpp's scripts/compare-llama-bench.py for memwall's export tests:
# a Python venv with the two libraries it imports (GitPython, tabulate; pinned, from
# PyPI) and the script itself, taken from the same sha256-checked llama-cpp-python
# sdist that build-llama-tools.sh uses (its vendor/llama.cpp/scripts/).
#
# Output: $MEMWALL_COMPARE_VENV (default ~/.cache/memwall/venv-compare) with
#   bin/python and compare-llama-bench.py.
# Idempotent: a stamp records the pins and the sdist hash.
# Called by scripts/test.sh; the test that uses it skips loudly when it is absent
# (MEMWALL_REQUIRE_LLAMA_TOOLS=1 turns the skip into a failure).
set -euo pipefail

# Keep in step with build-llama-tools.sh.
# shellcheck source=scripts/llama-sdist.sh
. "$(dirname "$0")/llama-sdist.sh"
PIP_PINS=(GitPython==3.2.1 tabulate==0.10.0)

venv=${MEMWALL_COMPARE_VENV:-$HOME/.cache/memwall/venv-compare}
tools=${MEMWALL_LLAMA_TOOLS:-$HOME/.cache/memwall/llama-tools}
stamp="$venv/stamp"
want="llama-cpp-python $SDIST_VERSION ($SDIST_SHA256) + ${PIP_PINS[*]}"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$venv/bin/python" ] && [ -f "$venv/compare-llama-bench.py" ]; then
  echo "setup-compare-venv: up to date in $venv"
  exit 0
fi

sdist="$tools/llama_cpp_python-$SDIST_VERSION.tar.gz"
fetch_llama_sdist "$tools" setup-compare-venv

rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${PIP_PINS[@]}"
member="llama_cpp_python-$SDIST_VERSION/vendor/llama.cpp/scripts/compare-llama-bench.py"
tar -xzOf "$sdist" "$member" >"$venv/compare-llama-bench.py"
"$venv/bin/python" "$venv/compare-llama-bench.py" --check
echo "$want" >"$stamp"
echo "setup-compare-venv: ready in $venv"
