#!/usr/bin/env bash
# Idle footprint of the app with the window closed (tray only): CPU % over a window
# (default 60 s, after a 10 s settle) and RSS, summed over the app and its child
# processes (WebKit's, if any). Goal: ≤ 0.5 % CPU and ≤ 120 MB RSS.
# Usage: tests/e2e/footprint.sh [seconds]   (needs Xvfb and dbus-daemon; the built app)
set -euo pipefail
cd "$(dirname "$0")/../.."
SECS="${1:-60}"
APP="${MEMWALL_APP_BIN:-${CARGO_TARGET_DIR:-target}/release/memwall-app}"
[ -x "$APP" ] || { echo "no app binary at $APP" >&2; exit 1; }
WORK="$(mktemp -d)"; pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT
if [ -z "${DISPLAY:-}" ]; then
  for n in 89 88 87; do [ -e /tmp/.X11-unix/X$n ] || break; done
  Xvfb ":$n" -screen 0 1280x900x24 -nolisten tcp >/dev/null 2>&1 & pids+=($!); export DISPLAY=":$n"; sleep 1
fi
eval "$(dbus-daemon --session --fork --print-address=1 --print-pid=1 | { read -r a; read -r p; echo "export DBUS_SESSION_BUS_ADDRESS='$a'; DBUS_PID=$p"; })"
pids+=("$DBUS_PID")
MEMWALL_TRAY_ONLY=1 MEMWALL_DB="$WORK/f.db" "$APP" >"$WORK/app.log" 2>&1 & APP_PID=$!; pids+=("$APP_PID")
sleep 10
tree() { echo "$APP_PID $(pgrep -P "$APP_PID" | tr '\n' ' ')"; }
ticks() { local t=0; for p in $(tree); do [ -r /proc/$p/stat ] && t=$((t + $(awk '{print $14 + $15}' /proc/$p/stat))); done; echo $t; }
rss_kb() { local r=0; for p in $(tree); do [ -r /proc/$p/status ] && r=$((r + $(awk '/VmRSS/ {print $2}' /proc/$p/status))); done; echo $r; }
HZ=$(getconf CLK_TCK)
t0=$(ticks); s0=$(date +%s.%N); peak=0
for _ in $(seq "$SECS"); do sleep 1; r=$(rss_kb); [ "$r" -gt "$peak" ] && peak=$r; done
t1=$(ticks); s1=$(date +%s.%N)
echo "processes: $(tree | wc -w) ($(tree))"
awk -v a="$t0" -v b="$t1" -v hz="$HZ" -v s0="$s0" -v s1="$s1" -v rss="$(rss_kb)" -v peak="$peak" 'BEGIN {
  cpu = (b - a) / hz / (s1 - s0) * 100;
  printf "idle CPU over %.1f s: %.3f %% of one core (%d ticks at %d Hz)\n", s1 - s0, cpu, b - a, hz;
  printf "RSS now: %.1f MB, peak during window: %.1f MB (decimal MB)\n", rss * 1024 / 1e6, peak * 1024 / 1e6 }'
