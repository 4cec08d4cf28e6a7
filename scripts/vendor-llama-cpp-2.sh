#!/usr/bin/env bash
# third_party/llama-cpp-2 = crates.io's llama-cpp-2 0.1.160 + patches/llama-cpp-2-no-common.patch:
# its dependency on llama-cpp-sys-2 without default features. The published crate takes
# llama-cpp-sys-2's defaults, whose `common` feature compiles llama.cpp's common library
# (arg, chat, JSON-schema grammars, cpp-httplib with OpenSSL) into every build, though
# memwall (llama-cpp-2 without its own `common` feature) calls none of it.
# The workspace's [patch.crates-io] points at the copy; it is committed for the reason
# scripts/vendor-mlx-sys.sh gives.
#   scripts/vendor-llama-cpp-2.sh           rebuild the copy from the crate + the patch
#   scripts/vendor-llama-cpp-2.sh --check   fail unless the copy equals crate + patch
#   scripts/vendor-llama-cpp-2.sh --diff    rewrite the patch from the edited copy
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=0.1.160
mode=${1:-apply}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/fetch/src"
printf '[package]\nname = "fetch-llama-cpp-2"\nversion = "0.0.0"\nedition = "2021"\n[dependencies]\nllama-cpp-2 = { version = "=%s", default-features = false }\n[workspace]\n' "$VERSION" >"$tmp/fetch/Cargo.toml"
: >"$tmp/fetch/src/lib.rs"
src=$(cd "$tmp/fetch" && cargo fetch -q && cargo metadata --format-version 1 -q \
  | python3 -c 'import json,sys; print(next(p["manifest_path"] for p in json.load(sys.stdin)["packages"] if p["name"]=="llama-cpp-2"))')
src=$(dirname "$src")
mkdir -p "$tmp/a"
cp -r "$src/." "$tmp/a/"
rm -f "$tmp/a/.cargo-ok" "$tmp/a/.cargo_vcs_info.json"

case "$mode" in
  apply)
    rm -rf third_party/llama-cpp-2
    mkdir -p third_party
    cp -r "$tmp/a" third_party/llama-cpp-2
    patch -s -p1 -d third_party/llama-cpp-2 <patches/llama-cpp-2-no-common.patch
    echo "vendor-llama-cpp-2: third_party/llama-cpp-2 = llama-cpp-2 $VERSION + patches/llama-cpp-2-no-common.patch"
    ;;
  --check)
    cp -r "$tmp/a" "$tmp/b"
    patch -s -p1 -d "$tmp/b" <patches/llama-cpp-2-no-common.patch
    diff -r "$tmp/b" third_party/llama-cpp-2 >/dev/null \
      || { echo "vendor-llama-cpp-2: third_party/llama-cpp-2 differs from llama-cpp-2 $VERSION + the patch (run scripts/vendor-llama-cpp-2.sh --diff after editing the copy)" >&2; exit 1; }
    echo "vendor-llama-cpp-2: third_party/llama-cpp-2 matches llama-cpp-2 $VERSION + patches/llama-cpp-2-no-common.patch"
    ;;
  --diff)
    (cd "$tmp" && cp -r "$OLDPWD/third_party/llama-cpp-2" b && diff -ruN a b | sed -E 's/^(---|\+\+\+) ([^\t]*)\t.*/\1 \2/') >patches/llama-cpp-2-no-common.patch || true
    echo "vendor-llama-cpp-2: wrote patches/llama-cpp-2-no-common.patch"
    ;;
  *) echo "usage: $0 [--check|--diff]" >&2; exit 2 ;;
esac
