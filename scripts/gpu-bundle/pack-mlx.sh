#!/usr/bin/env bash
# Packs what scripts/gpu-bundle/mlx.sh needs on a GPU machine: memwall's MLX engine on
# MLX's CUDA back end, and mlx-lm as its peer. Three folders, one per device call (a call
# carries at most 64 MiB with the working tree; the machine must stay warm between them):
#   .bundle-mlx/     memwall built with `dynamic-link,mlx` for a portable x86-64-v3 CPU,
#                    its libmlx.so dependency by name (the CUDA build's libmlx takes the
#                    place of the mlx-cpu wheel's there: same MLX 0.32.2, and every MLX
#                    symbol memwall links is checked to be in it), llama.cpp's CPU
#                    libraries (tokenization and GGUF reading only), Debian's OpenBLAS
#                    (memwall links it by name), xz-compressed;
#   .mlx-wheels-1/   the first half of PyPI's mlx-cuda-13 0.32.2 wheel (87 MB: libmlx.so
#                    built with CUDA 13, its CCCL/CUTLASS headers for NVRTC);
#   .mlx-wheels-2/   its second half, mlx 0.32.2 (Python bindings, cp312) and mlx-lm
#                    0.32.2, and their sha256 (PyPI's).
# mlx.sh joins the halves, checks every wheel's sha256 and installs them.
#
# usage: scripts/gpu-bundle/pack-mlx.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
limit=$((50 * 1024 * 1024)) # each folder, beside the ~12 MiB working tree
MLX_VERSION=0.32.2
wheels=(
  "mlx-cuda-13 mlx_cuda_13-$MLX_VERSION-py3-none-manylinux_2_35_x86_64.whl 335094ccd1c0c6dc3e09c8caba207c8180602bacc0c38ba20c1d81e9456ab394"
  "mlx mlx-$MLX_VERSION-cp312-cp312-manylinux_2_35_x86_64.whl 8d270ade1e48e006383a6b5f33a3a4ec5c265389299a60a60bf55165af1770d9"
  "mlx-lm mlx_lm-$MLX_VERSION-py3-none-any.whl 5c0991248cfff5872503d74f466d2532dd8cb7fb3670cb9be7a06d7305dadc04"
)
cache="$HOME/.cache/memwall/wheels"
mkdir -p "$cache"
for w in "${wheels[@]}"; do
  read -r pkg file sha <<<"$w"
  if ! echo "$sha  $cache/$file" | sha256sum -c --status 2>/dev/null; then
    echo "pack-mlx: downloading $file from PyPI" >&2
    url=$(python3 - "$pkg" "$file" <<'PY'
import json, sys, urllib.request
req = urllib.request.Request(f"https://pypi.org/simple/{sys.argv[1]}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"})
d = json.load(urllib.request.urlopen(req, timeout=60))
print(next(f["url"] for f in d["files"] if f["filename"] == sys.argv[2]))
PY
)
    curl -fsSL -o "$cache/$file.part" "$url"
    mv "$cache/$file.part" "$cache/$file"
    echo "$sha  $cache/$file" | sha256sum -c --status || {
      echo "pack-mlx: $cache/$file: sha256 differs from PyPI's $sha (deleted; run again)" >&2
      rm -f "$cache/$file"
      exit 1
    }
  fi
done

./scripts/setup-mlx.sh >&2
target=${MEMWALL_BUNDLE_TARGET:-$HOME/.cache/memwall/target-bundle}
# llama-cpp-sys-2's build script hard-links its libraries' symlinks into release/,
# examples/ and deps/, where they dangle; a later build of the crate with another hash
# then fails on them (`File exists`, build.rs:1552): remove the dangling ones.
for d in "$target/release" "$target/release/examples" "$target/release/deps"; do
  [ -d "$d" ] && find "$d" -maxdepth 1 -name 'lib*.so*' -xtype l -delete
done
# Not target-cpu=native (.cargo/config.toml's default): the binary must run on another
# machine's CPU. $ORIGIN: the shared libraries may sit beside it.
CARGO_TARGET_DIR="$target" RUSTFLAGS='-C target-cpu=x86-64-v3 -C link-arg=-Wl,-rpath,$ORIGIN' \
  cargo build --release --locked -p memwall-cli --features dynamic-link,mlx

out="$root/.bundle-mlx"
rm -rf "$out" "$root/.mlx-wheels-1" "$root/.mlx-wheels-2"
mkdir -p "$out/lib" "$root/.mlx-wheels-1" "$root/.mlx-wheels-2"
cp "$target/release/memwall" "$out/memwall"
strip "$out/memwall"
# setup-mlx.sh gives the wheel's libmlx.so an absolute name; there it is found by name.
abs=$(readelf -d "$out/memwall" | sed -n 's/.*NEEDED.*\[\(.*libmlx\.so\)\]/\1/p')
[ -n "$abs" ] || { echo "pack-mlx: memwall does not link libmlx.so (built without the mlx feature?)" >&2; exit 1; }
[ "$abs" = libmlx.so ] || patchelf --replace-needed "$abs" libmlx.so "$out/memwall"
# libmlx.so exports MLX's own GGUF reader (gguflib), whose `gguf_get_key` has another
# signature than ggml's: with libmlx.so ahead of libggml-base.so.0 in the lookup order,
# ggml's `gguf_find_key` calls MLX's and llama.cpp's model loader crashes (seen: SIGSEGV
# in gguf_find_key). Linked statically, memwall's own copy comes first; as shared
# libraries, ggml's goes to the front (`--add-needed` inserts there).
patchelf --remove-needed libggml-base.so.0 "$out/memwall"
patchelf --add-needed libggml-base.so.0 "$out/memwall"
first=$(readelf -d "$out/memwall" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' | head -1)
[ "$first" = libggml-base.so.0 ] || { echo "pack-mlx: libggml-base.so.0 is not memwall's first library ($first)" >&2; exit 1; }
# The libraries of the llama-cpp-sys-2 build this binary was linked against (the newest:
# the target folder keeps older builds of other feature sets).
lib=$(ls -td "$target"/release/build/llama-cpp-sys-2-*/out/lib | head -1)
for l in "$lib"/lib*.so.0; do cp -L "$l" "$out/lib/"; done
xz -T1 -6 -c "$(readlink -f /usr/lib/x86_64-linux-gnu/libopenblas.so.0)" >"$out/lib/libopenblas.so.0.xz"

# Every MLX symbol memwall imports must be defined by the CUDA build's libmlx.so.
cuda_whl="$cache/$(echo "${wheels[0]}" | cut -d' ' -f2)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unzip -q -o "$cuda_whl" mlx/lib/libmlx.so -d "$tmp"
nm -D --undefined-only "$out/memwall" | awk '{print $2}' | grep -i mlx | sort -u >"$tmp/need"
nm -D --defined-only "$tmp/mlx/lib/libmlx.so" | awk '{print $3}' | sort -u >"$tmp/have"
missing=$(comm -23 "$tmp/need" "$tmp/have")
if [ -n "$missing" ]; then
  echo "pack-mlx: the CUDA build's libmlx.so lacks symbols memwall links:" >&2
  echo "$missing" >&2
  exit 1
fi
echo "pack-mlx: $(wc -l <"$tmp/need") MLX symbols memwall imports, all in the CUDA build's libmlx.so" >&2

split -n 2 -d "$cuda_whl" "$tmp/part."
mv "$tmp/part.00" "$root/.mlx-wheels-1/$(basename "$cuda_whl").00"
mv "$tmp/part.01" "$root/.mlx-wheels-2/$(basename "$cuda_whl").01"
: >"$root/.mlx-wheels-2/SHA256SUMS"
for w in "${wheels[@]}"; do
  read -r _ file sha <<<"$w"
  echo "$sha  $file" >>"$root/.mlx-wheels-2/SHA256SUMS"
  [ "$cache/$file" = "$cuda_whl" ] || cp "$cache/$file" "$root/.mlx-wheels-2/"
done
for d in "$out" "$root/.mlx-wheels-1" "$root/.mlx-wheels-2"; do
  size=$(du -sb "$d" | cut -f1)
  echo "pack-mlx: $d = $((size / 1024 / 1024)) MiB" >&2
  if [ "$size" -gt "$limit" ]; then
    echo "pack-mlx: $d: $size bytes is over the $limit-byte share of one device call" >&2
    exit 1
  fi
done
