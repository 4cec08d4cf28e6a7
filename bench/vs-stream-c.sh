#!/usr/bin/env bash
# memwall's STREAM vs the reference stream.c (McCalpin, revision 5.10) in one run:
# both at the same array size, alternated round by round, at 1 thread and at all
# threads; prints memwall ÷ stream.c per kernel (copy, scale, add, triad), best of
# rounds on each side. memwall's read kernel has no counterpart in stream.c: its rate
# is printed beside them without a ratio.
#
# stream.c is built as its README says (gcc -O3 -march=native -fopenmp), with
# STREAM_ARRAY_SIZE = memwall's array size (≥ 4× the last-level cache, STREAM's rule)
# and NTIMES = memwall's passes + 1 (both discard the first pass and report the best
# of the rest). Both count bytes the same way (2, 2, 3, 3 arrays × 8 bytes), and both
# report 10^6 B/s (stream.c's MB/s) or 10^9 B/s (memwall's GB/s), converted here.
#
# Environment:
#   ROUNDS=5         alternating rounds (each: memwall at 1 and all threads, then stream.c at both)
#   THREADS=$(nproc) the "all threads" count
#   ARRAY_SIZE=N     elements per array for both (default: memwall's sizing rule). Below the
#                    rule memwall prints but does not store; use it only to check the script.
#   MEMWALL=path     a built memwall binary (default: cargo build --release -p memwall-cli)
#   CC=gcc           the C compiler for stream.c
#   STREAM_C=path    the reference source (default: ../shared/reference/stream/stream.c)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
ref=${STREAM_C:-$root/../shared/reference/stream/stream.c}
[ -f "$ref" ] || { echo "stream.c not found at $ref: set STREAM_C=/path/to/stream.c (McCalpin's reference, revision 5.10)" >&2; exit 1; }
cc=${CC:-gcc}
command -v "$cc" >/dev/null || { echo "$cc missing: sudo apt-get install gcc" >&2; exit 1; }
if [ -n "${MEMWALL:-}" ]; then
  mw=$MEMWALL
else
  . scripts/features.sh  # the set-up's features: the same build as `memwall bench`, no second one
  cargo build --release --locked -q -p memwall-cli ${MEMWALL_FEATURES:+--features "$MEMWALL_FEATURES"}
  target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
  mw="$target/release/memwall"
fi
threads=${THREADS:-$(nproc)}
rounds=${ROUNDS:-5}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
lock=/tmp/memwall-engine-tests.lock
touch "$lock"
tcounts="1,$threads"; [ "$threads" = 1 ] && tcounts=1

size_args=()
[ -n "${ARRAY_SIZE:-}" ] && size_args=(--array-size "$ARRAY_SIZE")
run_memwall() { # $1 = round
  flock "$lock" "$mw" --db "$work/s.db" stream -t "$tcounts" "${size_args[@]}" --json >"$work/mw-$1.json" 2>"$work/mw-$1.err" \
    || { cat "$work/mw-$1.err" >&2; exit 1; }
}
# Round 1's memwall run fixes the array size (memwall's rule on this machine) for stream.c.
run_memwall 1
read -r n passes < <(python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["results"][0]["config"]; print(c["n_elements"], c["passes"])' "$work/mw-1.json")
size_args=(--array-size "$n")
ntimes=$((passes + 1))
cflags=(-O3 -march=native -fopenmp -DSTREAM_ARRAY_SIZE="$n" -DNTIMES="$ntimes")
[ "$(uname -m)" = x86_64 ] && cflags+=(-mcmodel=medium) # static arrays above 2 GiB
"$cc" "${cflags[@]}" "$ref" -o "$work/stream"

run_ref() { # $1 = round, $2 = threads
  OMP_NUM_THREADS=$2 flock "$lock" "$work/stream" >"$work/ref-$1-$2.txt"
  grep -q "Solution Validates" "$work/ref-$1-$2.txt" || { echo "stream.c did not validate:" >&2; cat "$work/ref-$1-$2.txt" >&2; exit 1; }
}
for ((r = 1; r <= rounds; r++)); do
  [ "$r" -gt 1 ] && run_memwall "$r"
  for t in ${tcounts//,/ }; do run_ref "$r" "$t"; done
done

# glibc's memcpy switches to non-temporal stores above this many bytes per call; the
# reference's copy is a memcpy of each thread's chunk (see crates/memwall-core/src/stream.rs).
nt=$( (/lib64/ld-linux-x86-64.so.2 --list-tunables 2>/dev/null || true) | sed -n 's/^glibc.cpu.x86_non_temporal_threshold: \(0x[0-9a-f]*\).*/\1/p')
python3 - "$work" "$rounds" "$tcounts" "$n" "$ntimes" "$("$cc" --version | head -1)" "${nt:-}" <<'PY'
import glob, json, re, sys
work, rounds, tcounts, n, ntimes, ccv, nt = sys.argv[1:]
rounds, n, ntimes = int(rounds), int(n), int(ntimes)
tcounts = [int(t) for t in tcounts.split(",")]
kernels = ["copy", "scale", "add", "triad"]
mw = {}   # (kernel, threads) -> [best GB/s per round]
isa = None
for f in sorted(glob.glob(f"{work}/mw-*.json")):
    d = json.load(open(f))
    for res in d["results"]:
        isa = res.get("isa", isa)
        assert res["config"]["n_elements"] == n, f"{f}: memwall ran {res['config']['n_elements']} elements, not {n}"
        for k in res["kernels"]:
            mw.setdefault((k["kernel"], res["config"]["threads"]), []).append(k["best_gbps"])
ref = {}
for f in sorted(glob.glob(f"{work}/ref-*.txt")):
    t = int(re.search(r"ref-\d+-(\d+)\.txt$", f).group(1))
    txt = open(f).read()
    m = re.search(r"Number of Threads counted = (\d+)", txt)
    if m and int(m.group(1)) != t:
        sys.exit(f"{f}: stream.c ran {m.group(1)} threads, not {t}")
    for k in kernels:
        rate = re.search(rf"^{k.capitalize()}:\s+([\d.]+)", txt, re.M)
        ref.setdefault((k, t), []).append(float(rate.group(1)) / 1000.0)  # MB/s (10^6) → GB/s (10^9)
print(f"memwall ÷ stream.c: {n} elements per array ({n * 8 / 1e9:.3f} GB, {n * 8 / 2**30:.3f} GiB), "
      f"NTIMES={ntimes} (best of {ntimes - 1}), {rounds} alternating rounds, best of rounds; stream.c: {ccv}, "
      f"-O3 -march=native -fopenmp; memwall copy/read path: {isa}")
print()
print("| kernel | threads | memwall GB/s | stream.c GB/s | memwall ÷ stream.c | rounds (memwall / stream.c) |")
print("| --- | ---: | ---: | ---: | ---: | ---: |")
for t in tcounts:
    for k in kernels:
        a, b = max(mw[(k, t)]), max(ref[(k, t)])
        print(f"| {k} | {t} | {a:.2f} | {b:.2f} | {a / b:.3f} | {len(mw[(k, t)])} / {len(ref[(k, t)])} |")
    if (("read", t)) in mw:
        print(f"| read | {t} | {max(mw[('read', t)]):.2f} | — (no read kernel) | — | {len(mw[('read', t)])} / — |")
if nt:
    thr = int(nt, 16)
    for t in tcounts:
        chunk = n * 8 // t
        side = "above" if chunk > thr else "below"
        print(f"\n{t} thread(s): stream.c copies {chunk / 1e6:.1f} MB per thread with memcpy, {side} glibc's "
              f"non-temporal threshold ({thr / 1e6:.1f} MB): its copy uses "
              + ("non-temporal stores, like memwall's." if side == "above" else
                 "ordinary stores (write-allocate), memwall non-temporal ones: a copy ratio above 1 is expected."), end="")
    print()
print("\nThreads are not pinned on either side (OMP_PROC_BIND unset). Ratios move run to run on a shared machine: use a quiet one.")
PY
