#!/usr/bin/env bash
# Makes (once) a venv with the stock `openai` Python client from PyPI, for the test
# that streams a chat completion from `memwall serve` through it. Prints the venv's
# python on stdout; fails (non-zero) when the venv or pip install cannot be made.
set -euo pipefail
VENV="${MEMWALL_OPENAI_VENV:-$HOME/.cache/memwall/venv-openai}"
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import openai" 2>/dev/null; then
  echo "$VENV/bin/python"
  exit 0
fi
mkdir -p "$(dirname "$VENV")"
python3 -m venv "$VENV" >&2
"$VENV/bin/pip" install --quiet --disable-pip-version-check openai >&2
"$VENV/bin/python" -c "import openai" >&2
echo "$VENV/bin/python"
