#!/usr/bin/env bash
# third_party/mlx-sys = crates.io's mlx-sys 0.7.0 + patches/mlx-sys-linux.patch.
# The workspace's [patch.crates-io] points at that copy. It is committed (not made
# at set-up) because cargo reads every [patch] path for every command: a missing
# copy would break `cargo metadata`, builds without the `mlx` feature and --locked.
#   scripts/vendor-mlx-sys.sh           rebuild the copy from the crate + the patch
#   scripts/vendor-mlx-sys.sh --check   fail unless the copy equals crate + patch
#   scripts/vendor-mlx-sys.sh --diff    rewrite the patch from the edited copy
# The crate's source comes through cargo itself (a throw-away project that depends
# on mlx-sys =0.7.0, `cargo fetch`), checked against crates.io's checksum by cargo.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=0.7.0
mode=${1:-apply}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/fetch/src"
printf '[package]\nname = "fetch-mlx-sys"\nversion = "0.0.0"\nedition = "2021"\n[dependencies]\nmlx-sys = { version = "=%s", default-features = false }\n[workspace]\n' "$VERSION" >"$tmp/fetch/Cargo.toml"
: >"$tmp/fetch/src/lib.rs"
src=$(cd "$tmp/fetch" && cargo fetch -q && cargo metadata --format-version 1 -q \
  | python3 -c 'import json,sys; print(next(p["manifest_path"] for p in json.load(sys.stdin)["packages"] if p["name"]=="mlx-sys"))')
src=$(dirname "$src")
mkdir -p "$tmp/a"
cp -r "$src/." "$tmp/a/"
# mlx-c's examples are not built (MLX_C_BUILD_EXAMPLES=OFF) and carry a weight file
# (arrays.safetensors): the vendored copy leaves them out.
rm -rf "$tmp/a/src/mlx-c/examples"
rm -f "$tmp/a/.cargo-ok" "$tmp/a/.cargo_vcs_info.json"

case "$mode" in
  apply)
    rm -rf third_party/mlx-sys
    mkdir -p third_party
    cp -r "$tmp/a" third_party/mlx-sys
    patch -s -p1 -d third_party/mlx-sys <patches/mlx-sys-linux.patch
    echo "vendor-mlx-sys: third_party/mlx-sys = mlx-sys $VERSION + patches/mlx-sys-linux.patch"
    ;;
  --check)
    cp -r "$tmp/a" "$tmp/b"
    patch -s -p1 -d "$tmp/b" <patches/mlx-sys-linux.patch
    diff -r "$tmp/b" third_party/mlx-sys >/dev/null \
      || { echo "vendor-mlx-sys: third_party/mlx-sys differs from mlx-sys $VERSION + the patch (run scripts/vendor-mlx-sys.sh --diff after editing the copy)" >&2; exit 1; }
    echo "vendor-mlx-sys: third_party/mlx-sys matches mlx-sys $VERSION + patches/mlx-sys-linux.patch"
    ;;
  --diff)
    (cd "$tmp" && cp -r "$OLDPWD/third_party/mlx-sys" b && diff -ruN a b | sed -E 's/^(---|\+\+\+) ([^\t]*)\t.*/\1 \2/') >patches/mlx-sys-linux.patch || true
    echo "vendor-mlx-sys: wrote patches/mlx-sys-linux.patch"
    ;;
  *) echo "usage: $0 [--check|--diff]" >&2; exit 2 ;;
esac
