#!/usr/bin/env bash
# Builds llama.cpp's own reference tools (llama-bench, llama-batched-bench,
# llama-perplexity, llama-quantize, llama-speculative, llama-speculative-simple,
# llama-server) against the *same* llama.cpp library sources that memwall links
# through the llama-cpp-sys-2 crate, so comparisons measure the harness, not two
# versions of the library.
#
# The crate vendors the library but strips tools/ and examples/; the PyPI sdist of
# llama-cpp-python (pinned below, sha256-checked) vendors them. We copy the crate's
# llama.cpp tree and overlay the sdist's tools/, examples/ and scripts/ui-assets.cmake
# (the server's CMake needs it; the web UI itself is off: no npm, no download).
#
# llama-server: the sources of the exact llama.cpp commit the crate vendors are not
# published anywhere this script can fetch them checked (the crate strips them, and
# no llama-cpp-python sdist vendors that commit: 0.3.36, the newest, has ggml 0.25.3,
# the crate 0.26.0). The sdist's tools/server is the nearest: its option table is the
# crate's own tools/server/README.md's, and it compiles against the crate's common/
# but for one helper, fixed by scripts/llama-server-compat.patch (the patch fails
# loudly if the sdist changes). So the server's library, common/ and sampling are the
# crate's; only its HTTP and slot code comes from the sdist's (close) revision.
# MEMWALL_LLAMA_SERVER=0 skips it (about 4 more minutes of a cold 2-core build).
#
# Output: $MEMWALL_LLAMA_TOOLS (default ~/.cache/memwall/llama-tools)/bin/
# Idempotent: a stamp records the crate version and the sdist hash.
set -euo pipefail

# shellcheck source=scripts/llama-sdist.sh
. "$(dirname "$0")/llama-sdist.sh"
TOOLS="llama-bench llama-batched-bench llama-perplexity llama-quantize llama-speculative llama-speculative-simple"
server=${MEMWALL_LLAMA_SERVER:-1}
[ "$server" = 0 ] || TOOLS="$TOOLS llama-server"

root=$(cd "$(dirname "$0")/.." && pwd)
out=${MEMWALL_LLAMA_TOOLS:-$HOME/.cache/memwall/llama-tools}
mkdir -p "$out"

crate_dir=$(cd "$root" && cargo metadata --format-version 1 --locked 2>/dev/null | python3 -c '
import json, sys, os
m = json.load(sys.stdin)
for p in m["packages"]:
    if p["name"] == "llama-cpp-sys-2":
        print(os.path.dirname(p["manifest_path"]), p["version"]); break')
read -r crate_path crate_version <<<"$crate_dir"
[ -d "$crate_path/llama.cpp" ] || { echo "build-llama-tools: llama-cpp-sys-2 sources not found (run cargo fetch first)" >&2; exit 1; }

patch_file="$root/scripts/llama-server-compat.patch"
stamp="$out/stamp"
want="llama-cpp-sys-2 $crate_version + llama-cpp-python $SDIST_VERSION ($SDIST_SHA256) native no-amx server-patch $(sha256sum "$patch_file" | cut -c1-16)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && for t in $TOOLS; do [ -x "$out/bin/$t" ] || exit 1; done; then
  echo "build-llama-tools: up to date ($want) in $out/bin"
  exit 0
fi

sdist="$out/llama_cpp_python-$SDIST_VERSION.tar.gz"
fetch_llama_sdist "$out" build-llama-tools

src="$out/src"
rm -rf "$src" "$out/sdist"
mkdir -p "$out/sdist"
v="llama_cpp_python-$SDIST_VERSION/vendor/llama.cpp"
tar -xzf "$sdist" -C "$out/sdist" "$v/tools" "$v/examples" "$v/scripts/ui-assets.cmake"
cp -r "$crate_path/llama.cpp" "$src"
chmod -R u+w "$src"
for d in tools examples; do
  rm -rf "${src:?}/$d"
  cp -r "$out/sdist/$v/$d" "$src/$d"
done
mkdir -p "$src/scripts"
cp "$out/sdist/$v/scripts/ui-assets.cmake" "$src/scripts/ui-assets.cmake"
patch -s -p1 -d "$src" --forward <"$patch_file" \
  || { echo "build-llama-tools: $patch_file does not apply to llama-cpp-python $SDIST_VERSION's tools/server (update the patch with the sdist)" >&2; exit 1; }

jobs=$(nproc)
# The same no-AMX launcher memwall's own llama.cpp build uses (.cargo/config.toml).
launcher="$root/scripts/toolchain/no-amx"
rm -rf "$out/build"
cmake -S "$src" -B "$out/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
  -DCMAKE_C_COMPILER_LAUNCHER="$launcher" -DCMAKE_CXX_COMPILER_LAUNCHER="$launcher" \
  -DGGML_NATIVE=ON -DGGML_OPENMP=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_EXAMPLES=ON \
  -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_SERVER="$([ "$server" = 0 ] && echo OFF || echo ON)" \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF ${MEMWALL_LLAMA_CMAKE_ARGS:-} >"$out/configure.log" 2>&1 \
  || { tail -30 "$out/configure.log" >&2; exit 1; }
# shellcheck disable=SC2086
cmake --build "$out/build" -j "$jobs" --target $TOOLS >"$out/build.log" 2>&1 || { tail -40 "$out/build.log" >&2; exit 1; }
mkdir -p "$out/bin"
for t in $TOOLS; do cp "$out/build/bin/$t" "$out/bin/$t"; done
echo "$want" >"$stamp"
echo "build-llama-tools: built $TOOLS in $out/bin"
