# Sourced by scripts/build-llama-tools.sh and scripts/setup-compare-venv.sh: the pinned
# llama-cpp-python sdist (it vendors llama.cpp with tools/, examples/ and scripts/) and
# the one function that fetches and sha256-checks it.
SDIST_VERSION=0.3.36
SDIST_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e

# fetch_llama_sdist DIR WHO: the verified sdist at DIR/llama_cpp_python-$SDIST_VERSION.tar.gz,
# downloaded from PyPI when absent or wrong; WHO names the caller in messages.
fetch_llama_sdist() {
  local dir=$1 who=$2 sdist url
  sdist="$dir/llama_cpp_python-$SDIST_VERSION.tar.gz"
  mkdir -p "$dir"
  if ! echo "$SDIST_SHA256  $sdist" | sha256sum -c --status 2>/dev/null; then
    echo "$who: downloading llama-cpp-python $SDIST_VERSION sdist from PyPI" >&2
    url=$(python3 - "$SDIST_VERSION" <<'PY'
import json, sys, urllib.request
req = urllib.request.Request("https://pypi.org/simple/llama-cpp-python/", headers={"Accept": "application/vnd.pypi.simple.v1+json"})
d = json.load(urllib.request.urlopen(req, timeout=60))
name = f"llama_cpp_python-{sys.argv[1]}.tar.gz"
print(next(f["url"] for f in d["files"] if f["filename"] == name))
PY
)
    curl -fsSL --retry 3 -o "$sdist.tmp" "$url"
    echo "$SDIST_SHA256  $sdist.tmp" | sha256sum -c --status || { echo "$who: sdist sha256 mismatch" >&2; rm -f "$sdist.tmp"; return 1; }
    mv "$sdist.tmp" "$sdist"
  fi
}
