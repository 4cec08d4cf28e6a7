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
SDIST_VERSION=0.3.36
SDIST_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
PIP_PINS=(GitPython==3.2.1 tabulate==0.10.0)

venv=${MEMWALL_COMPARE_VENV:-$HOME/.cache/memwall/venv-compare}
tools=${MEMWALL_LLAMA_TOOLS:-$HOME/.cache/memwall/llama-tools}
stamp="$venv/stamp"
want="llama-cpp-python $SDIST_VERSION ($SDIST_SHA256) + ${PIP_PINS[*]}"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$venv/bin/python" ] && [ -f "$venv/compare-llama-bench.py" ]; then
  echo "setup-compare-venv: up to date in $venv"
  exit 0
fi

mkdir -p "$tools"
sdist="$tools/llama_cpp_python-$SDIST_VERSION.tar.gz"
if ! echo "$SDIST_SHA256  $sdist" | sha256sum -c --status 2>/dev/null; then
  echo "setup-compare-venv: downloading llama-cpp-python $SDIST_VERSION sdist from PyPI"
  url=$(python3 - "$SDIST_VERSION" <<'PY'
import json, sys, urllib.request
req = urllib.request.Request("https://pypi.org/simple/llama-cpp-python/", headers={"Accept": "application/vnd.pypi.simple.v1+json"})
d = json.load(urllib.request.urlopen(req, timeout=60))
name = f"llama_cpp_python-{sys.argv[1]}.tar.gz"
print(next(f["url"] for f in d["files"] if f["filename"] == name))
PY
)
  curl -fsSL --retry 3 -o "$sdist.tmp" "$url"
  echo "$SDIST_SHA256  $sdist.tmp" | sha256sum -c --status || { echo "setup-compare-venv: sdist sha256 mismatch" >&2; rm -f "$sdist.tmp"; exit 1; }
  mv "$sdist.tmp" "$sdist"
fi

rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${PIP_PINS[@]}"
member="llama_cpp_python-$SDIST_VERSION/vendor/llama.cpp/scripts/compare-llama-bench.py"
tar -xzOf "$sdist" "$member" >"$venv/compare-llama-bench.py"
"$venv/bin/python" "$venv/compare-llama-bench.py" --check
echo "$want" >"$stamp"
echo "setup-compare-venv: ready in $venv"
