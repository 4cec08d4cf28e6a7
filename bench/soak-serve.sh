#!/usr/bin/env bash
# Soak: MINUTES of closed-loop load (memwall loadtest, rounds of --duration ROUND s)
# against one memwall serve process. After every round: the server's resident memory
# (VmRSS), the round's requests done/sent, 429s and failures, and /metrics' busy slots
# and queue once the round's clients are gone. Verdict PASS when
#   - RSS at the end is within RSS_PCT % (5) of RSS after the first round (warm: the
#     model, KV cache and allocator pools are in place by then),
#   - no request failed (429s are counted, not failures: the queue is bounded),
#   - no slot or queue entry is left busy after a round (leaked slots), and
#   - the server is still alive and answers /health.
#
# usage: bench/soak-serve.sh [MODEL|catalogue-name]
#   env MINUTES (10), ROUND (30 s), CONC (8), SLOTS (4), QUEUE (32), IN (128), OUT (64),
#       THREADS, PORT (18095), RSS_PCT (5)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
. scripts/features.sh  # the set-up's features: the same build as `memwall bench`, no second one
cargo build --release --locked -q -p memwall-cli ${MEMWALL_FEATURES:+--features "$MEMWALL_FEATURES"}
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
mw="$target/release/memwall"
model_arg=${1:-qwen2.5-coder-0.5b-q4_k_m}
if [ -f "$model_arg" ]; then model=$model_arg; else model=$("$mw" models list --json | python3 -c "
import json,sys
for m in json.load(sys.stdin):
    if m['name']=='$model_arg': print(m['path'])"); fi
[ -f "$model" ] || { echo "model $model_arg not found (memwall models fetch $model_arg)" >&2; exit 1; }
threads=${THREADS:-$(lscpu -p=Core,Socket | grep -v '^#' | sort -u | wc -l)}
minutes=${MINUTES:-10}; round=${ROUND:-30}; conc=${CONC:-8}; slots=${SLOTS:-4}; queue=${QUEUE:-32}
in=${IN:-128}; out=${OUT:-64}; port=${PORT:-18095}; rss_pct=${RSS_PCT:-5}
work=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
url="http://127.0.0.1:$port"
lock=/tmp/memwall-engine-tests.lock
exec 9>"$lock"; flock 9
"$mw" --db "$work/soak.db" serve --model "$model" --parallel "$slots" --queue "$queue" \
  --ctx-size $(( (in * 2 + out + 64) * slots )) --threads "$threads" --port "$port" >"$work/serve.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  curl -sf "$url/health" >/dev/null 2>&1 && break
  kill -0 "$pid" 2>/dev/null || { tail -20 "$work/serve.log" >&2; exit 1; }
  sleep 0.2
done
echo "soak: memwall serve pid $pid, $model, $slots slots, queue $queue, concurrency $conc, $minutes min in rounds of $round s" >&2
rss() { awk '/^VmRSS/ {print $2}' "/proc/$pid/status"; }   # KiB
metric() { curl -sf "$url/metrics" | awk -v m="llamacpp:$1" '$1 == m {print $2}'; }
end=$(( $(date +%s) + minutes * 60 ))
r=0
echo "| round | t s | RSS MiB | done/sent | 429 | failed | busy slots after | queued after |" >"$work/rounds.md"
echo "|---:|---:|---:|---|---:|---:|---:|---:|" >>"$work/rounds.md"
: >"$work/rounds.tsv"
t0=$(date +%s)
while [ "$(date +%s)" -lt "$end" ] || [ "$r" -eq 0 ]; do
  r=$((r + 1))
  left=$(( end - $(date +%s) )); d=$round; [ "$left" -gt 0 ] && [ "$left" -lt "$d" ] && d=$left
  [ "$d" -lt 5 ] && d=5
  "$mw" --db "$work/soak.db" loadtest --url "$url" --endpoint chat --concurrency "$conc" \
    --num-requests 5000 --duration "$d" --input-tokens "$in" --output-tokens "$out" \
    --warmup 0 --seed "$r" --no-sampler --timeout 120 --json >"$work/round-$r.json" 2>"$work/round-$r.err" \
    || { echo "round $r: loadtest failed: $(tail -3 "$work/round-$r.err")" >&2; }
  sleep 0.5   # one step is far less; the clients of the round have all ended
  kill -0 "$pid" 2>/dev/null || { echo "soak: the server died in round $r" >&2; tail -20 "$work/serve.log" >&2; echo "VERDICT: FAIL (server died)"; exit 1; }
  kib=$(rss); busy=$(metric requests_processing); queued=$(metric requests_deferred)
  python3 - "$work/round-$r.json" "$r" "$(( $(date +%s) - t0 ))" "$kib" "${busy:-?}" "${queued:-?}" >>"$work/rounds.tsv" <<'PY'
import json, sys
f, r, t, kib, busy, queued = sys.argv[1:]
try:
    p = json.load(open(f))["points"][0]
    done, sent, rej, fail = p["n_completed"], p["n_sent"], p["n_rejected"], p["n_failed"]
except Exception:
    done = sent = rej = 0; fail = 1  # a round whose report is missing counts as failed
print(f"{r}\t{t}\t{int(kib) / 1024:.1f}\t{done}\t{sent}\t{rej}\t{fail}\t{busy}\t{queued}")
PY
  tail -1 "$work/rounds.tsv" | awk -F'\t' '{printf "| %s | %s | %s | %s/%s | %s | %s | %s | %s |\n", $1,$2,$3,$4,$5,$6,$7,$8,$9}' >>"$work/rounds.md"
  tail -1 "$work/rounds.md" >&2
done
alive=no; curl -sf "$url/health" >/dev/null 2>&1 && alive=yes
cat "$work/rounds.md"
python3 - "$work/rounds.tsv" "$rss_pct" "$alive" <<'PY'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
pct, alive = float(sys.argv[2]), sys.argv[3]
rss = [float(x[2]) for x in rows]
growth = (rss[-1] - rss[0]) / rss[0] * 100 if rss[0] > 0 else float("nan")
done = sum(int(x[3]) for x in rows); sent = sum(int(x[4]) for x in rows)
rej = sum(int(x[5]) for x in rows); fail = sum(int(x[6]) for x in rows)
leaked = [x[0] for x in rows if x[7] != "0" or x[8] != "0"]
print()
print(f"rounds {len(rows)}; requests done {done}/{sent}, 429 {rej}, failed {fail}")
print(f"RSS after round 1 {rss[0]:.1f} MiB, at the end {rss[-1]:.1f} MiB: {growth:+.2f} % (limit ±{pct} %)")
print(f"rounds that left a busy slot or a queued request: {', '.join(leaked) if leaked else 'none'}; server alive: {alive}")
bad = []
if not abs(growth) <= pct: bad.append(f"RSS grew {growth:+.2f} %")
if fail: bad.append(f"{fail} failed requests")
if leaked: bad.append("leaked slots")
if alive != "yes": bad.append("server not answering /health")
if len(rows) < 2: bad.append("fewer than 2 rounds: RSS growth not measured (raise MINUTES or lower ROUND)")
print("VERDICT: " + ("PASS" if not bad else "FAIL (" + "; ".join(bad) + ")"))
sys.exit(0 if not bad else 1)
PY
