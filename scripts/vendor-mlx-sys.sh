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
# shellcheck source=scripts/lib/vendor-crate.sh
. scripts/lib/vendor-crate.sh
# mlx-c's examples are not built (MLX_C_BUILD_EXAMPLES=OFF) and carry a weight file
# (arrays.safetensors): the vendored copy leaves them out.
vendor_crate mlx-sys 0.7.0 patches/mlx-sys-linux.patch "${1:-apply}" src/mlx-c/examples
