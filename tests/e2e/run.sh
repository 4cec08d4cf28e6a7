#!/usr/bin/env bash
# End-to-end test of the desktop app under a virtual display:
#   Xvfb + a session D-Bus (for the tray menu) + tauri-driver/WebKitWebDriver,
#   then tests/e2e/app-webdriver.mjs drives the real, built app.
# Needs: the built app (target/release/memwall-app), Xvfb, dbus-daemon, busctl,
# WebKitWebDriver (Debian webkit2gtk-driver), tauri-driver (`cargo install
# tauri-driver --version ^2 --locked`), node, and the SmolLM2 model. When any is
# missing it SKIPS LOUDLY (exit 0), unless MEMWALL_REQUIRE_E2E=1 (then it fails).
# Artifacts (screenshots, tray menu, log) go to $E2E_ARTIFACTS (default target/e2e).
set -uo pipefail
cd "$(dirname "$0")/../.."
TARGET="${CARGO_TARGET_DIR:-target}"
APP="${MEMWALL_APP_BIN:-$TARGET/release/memwall-app}"
export E2E_ARTIFACTS="${E2E_ARTIFACTS:-$TARGET/e2e}"
mkdir -p "$E2E_ARTIFACTS"

skip() {
  echo "!!!!!!!! SKIPPED app end-to-end test: $* !!!!!!!!" >&2
  if [ "${MEMWALL_REQUIRE_E2E:-0}" = "1" ]; then exit 1; fi
  exit 0
}
[ -x "$APP" ] || skip "no app binary at $APP (cargo build --release --workspace --features memwall-cli/mlx --bin memwall-app)"
for t in Xvfb dbus-daemon busctl WebKitWebDriver node; do
  command -v "$t" >/dev/null || skip "$t not installed (scripts/setup.sh installs the packages)"
done
DRIVER="$(command -v tauri-driver || echo "$HOME/.cargo/bin/tauri-driver")"
[ -x "$DRIVER" ] || skip "tauri-driver not installed (cargo install tauri-driver --version ^2 --locked)"
MODELS="${MEMWALL_MODELS:-$HOME/.cache/memwall/models}"
compgen -G "$MODELS/*[1][3][5][mM]*.gguf" >/dev/null || skip "SmolLM2-135M not fetched in $MODELS (memwall models fetch smollm2-135m-q4_1)"

WORK="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$WORK"; }
trap cleanup EXIT

if [ -z "${DISPLAY:-}" ]; then
  for n in 99 98 97 96; do [ -e /tmp/.X11-unix/X$n ] || break; done
  Xvfb ":$n" -screen 0 1280x900x24 -nolisten tcp >"$WORK/xvfb.log" 2>&1 &
  pids+=($!); export DISPLAY=":$n"; sleep 1
fi
eval "$(dbus-daemon --session --fork --print-address=1 --print-pid=1 | {
  read -r addr; read -r pid; echo "export DBUS_SESSION_BUS_ADDRESS='$addr'; DBUS_PID=$pid"; })"
pids+=("$DBUS_PID")
export MEMWALL_DB="$WORK/e2e.db" MEMWALL_EXPORTS="$WORK/exports" MEMWALL_APP_BIN="$(realpath "$APP")"
"$DRIVER" --port 4444 --native-driver "$(command -v WebKitWebDriver)" >"$WORK/driver.log" 2>&1 &
pids+=($!)
for _ in $(seq 40); do curl -fs http://127.0.0.1:4444/status >/dev/null 2>&1 && break; sleep 0.25; done

flock /tmp/memwall-engine-tests.lock node tests/e2e/app-webdriver.mjs 2>&1 | tee "$E2E_ARTIFACTS/e2e.log"
rc=${PIPESTATUS[0]}
cp "$WORK/driver.log" "$E2E_ARTIFACTS/driver.log" 2>/dev/null
exit "$rc"
