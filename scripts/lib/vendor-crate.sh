# Sourced by scripts/vendor-*.sh: a crates.io crate copied under third_party/ with one
# patch applied, and the two kept in step. The crate's source comes through cargo
# itself (a throw-away project that depends on NAME =VERSION, `cargo fetch`), checked
# against crates.io's checksum by cargo.
#   vendor_crate NAME VERSION PATCH MODE [PATH...]
#     MODE apply: rebuild third_party/NAME from the crate + PATCH
#          --check: fail unless third_party/NAME equals the crate + PATCH
#          --diff: rewrite PATCH from the edited copy
#     PATH...: paths inside the crate the copy leaves out (removed before patching)
vendor_crate() {
  local name=$1 version=$2 patch=$3 mode=$4
  shift 4
  local me="vendor-$name" tmp src p
  tmp=$(mktemp -d)
  # shellcheck disable=SC2064
  trap "rm -rf '$tmp'" EXIT
  mkdir -p "$tmp/fetch/src"
  printf '[package]\nname = "fetch-%s"\nversion = "0.0.0"\nedition = "2021"\n[dependencies]\n%s = { version = "=%s", default-features = false }\n[workspace]\n' \
    "$name" "$name" "$version" >"$tmp/fetch/Cargo.toml"
  : >"$tmp/fetch/src/lib.rs"
  src=$(cd "$tmp/fetch" && cargo fetch -q && cargo metadata --format-version 1 -q \
    | NAME=$name python3 -c 'import json,os,sys; print(next(p["manifest_path"] for p in json.load(sys.stdin)["packages"] if p["name"]==os.environ["NAME"]))')
  src=$(dirname "$src")
  mkdir -p "$tmp/a"
  cp -r "$src/." "$tmp/a/"
  for p in "$@"; do rm -rf "${tmp:?}/a/$p"; done
  rm -f "$tmp/a/.cargo-ok" "$tmp/a/.cargo_vcs_info.json"

  case "$mode" in
    apply)
      rm -rf "third_party/$name"
      mkdir -p third_party
      cp -r "$tmp/a" "third_party/$name"
      patch -s -p1 -d "third_party/$name" <"$patch"
      echo "$me: third_party/$name = $name $version + $patch"
      ;;
    --check)
      cp -r "$tmp/a" "$tmp/b"
      patch -s -p1 -d "$tmp/b" <"$patch"
      diff -r "$tmp/b" "third_party/$name" >/dev/null \
        || { echo "$me: third_party/$name differs from $name $version + the patch (run scripts/$me.sh --diff after editing the copy)" >&2; exit 1; }
      echo "$me: third_party/$name matches $name $version + $patch"
      ;;
    --diff)
      (cd "$tmp" && cp -r "$OLDPWD/third_party/$name" b && diff -ruN a b | sed -E 's/^(---|\+\+\+) ([^\t]*)\t.*/\1 \2/') >"$patch" || true
      echo "$me: wrote $patch"
      ;;
    *) echo "usage: scripts/$me.sh [--check|--diff]" >&2; exit 2 ;;
  esac
}
