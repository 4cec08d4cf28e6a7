# Sourced by run.sh and mlx.sh, the device passes: the call's clock, the log and the
# collection of results under $OUT when the pass ends. Needs log, db, OUT, work,
# deadline and min_left set first.
start=$(date +%s)
# Steps that would start with less than min_left seconds before the deadline are skipped.
time_left() { [ $((start + deadline - $(date +%s))) -ge "$min_left" ]; }
say() { echo "== $(date -u +%H:%M:%S) $*" | tee -a "$log" >&2; }
run() { echo "\$ $*" >>"$log"; "$@" 2> >(tee -a "$log" >&2) | tee -a "$log"; return "${PIPESTATUS[0]}"; }
finish() {
  say "collecting"
  # SQLite's backup API, not cp: the store is in WAL mode, and a copy of the main file
  # alone misses (or, mid-checkpoint, tears) the pages still in its -wal file.
  python3 -c 'import sqlite3, sys; s = sqlite3.connect(sys.argv[1]); d = sqlite3.connect(sys.argv[2]); s.backup(d); d.close()' \
    "$db" "$OUT/memwall.db" 2>/dev/null || cp "$db" "$OUT/memwall.db" 2>/dev/null
  tar czf "$OUT/results.tgz" -C "$work" json 2>/dev/null
  say "done"
}
trap finish EXIT
