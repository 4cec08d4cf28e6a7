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
# shellcheck source=scripts/lib/vendor-crate.sh
. scripts/lib/vendor-crate.sh
# The crate's test vocabulary (src/gguf/*.gguf) is a model file, which git never
# holds (.gitignore): the vendored copy leaves it out.
vendor_crate llama-cpp-2 0.1.160 patches/llama-cpp-2-no-common.patch "${1:-apply}" src/gguf/ggml-vocab-bert-bge.gguf
