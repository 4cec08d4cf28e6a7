#!/usr/bin/env bash
# memwall's STREAM vs external memory benchmarks from Debian's packages, in one run:
#   - triad (all threads) vs `sysbench memory` sequential read and write at the same threads,
#   - copy (1 thread) vs `mbw` MEMCPY (single-threaded).
# Byte counting is converted to STREAM's convention before dividing: mbw reports
# the array size copied per second (1 read + 1 write per byte), so STREAM-convention
# copy bandwidth = 2 × mbw; sysbench reports bytes read (or written) per second.
# MiB/s from both tools is converted to GB/s (10^9 B/s).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
for t in sysbench mbw; do command -v $t >/dev/null || { echo "$t missing: sudo apt-get install $t (scripts/setup.sh does)" >&2; exit 1; }; done
. scripts/features.sh  # the set-up's features: the same build as `memwall bench`, no second one
cargo build --release --locked -q -p memwall-cli ${MEMWALL_FEATURES:+--features "$MEMWALL_FEATURES"}
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
mw="$target/release/memwall"
threads=${THREADS:-$(nproc)}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
lock=/tmp/memwall-engine-tests.lock
flock "$lock" "$mw" --db "$work/s.db" stream -t "1,$threads" --json >"$work/mw.json"
# sysbench: one 256 MiB block per thread (8× the LLC here), scanned sequentially, 32 GiB in total.
flock "$lock" sysbench memory --threads="$threads" --memory-block-size=256M --memory-total-size=32G \
  --memory-oper=read --memory-access-mode=seq run >"$work/sb-read.txt"
flock "$lock" sysbench memory --threads="$threads" --memory-block-size=256M --memory-total-size=32G \
  --memory-oper=write --memory-access-mode=seq run >"$work/sb-write.txt"
flock "$lock" mbw -n 10 -t0 256 >"$work/mbw.txt"
python3 - "$work" "$threads" <<'PY'
import json, re, sys
work, threads = sys.argv[1], int(sys.argv[2])
mw = json.load(open(f"{work}/mw.json"))
def kernel(name, t):
    for r in mw["results"]:
        if r["config"]["threads"] == t:
            for k in r["kernels"]:
                if k["kernel"] == name:
                    return k["best_gbps"]
MIB = 1048576 / 1e9  # GB per MiB
def sysbench(path):
    m = re.search(r"MiB transferred \(([\d.]+) MiB/sec\)", open(path).read())
    return float(m.group(1)) * MIB
sb_read, sb_write = sysbench(f"{work}/sb-read.txt"), sysbench(f"{work}/sb-write.txt")
mbw = [float(x) for x in re.findall(r"AVG\s+Method: MEMCPY.*?Copy: ([\d.]+) MiB/s", open(f"{work}/mbw.txt").read())]
mbw_stream = 2 * mbw[0] * MIB
triad, copy1 = kernel("triad", threads), kernel("copy", 1)
print("| comparison | memwall GB/s | external GB/s (STREAM bytes) | memwall ÷ external |")
print("| --- | ---: | ---: | ---: |")
print(f"| triad {threads}t vs sysbench seq read {threads}t | {triad:.2f} | {sb_read:.2f} | {triad / sb_read:.3f} |")
print(f"| triad {threads}t vs sysbench seq write {threads}t | {triad:.2f} | {sb_write:.2f} | {triad / sb_write:.3f} |")
print(f"| copy 1t vs mbw MEMCPY ×2 (1t) | {copy1:.2f} | {mbw_stream:.2f} | {copy1 / mbw_stream:.3f} |")
print("triad reads 2 arrays and writes 1; sysbench reads (or writes) only: a ratio near 1 says both see the same bus.")
PY
