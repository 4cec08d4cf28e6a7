#!/usr/bin/env bash
# Prefix cache: TTFT with and without a cached shared prefix, measured on memwall
# serve (and on llama.cpp's llama-server with its own prompt cache, when built), by
# memwall loadtest at concurrency 1 on /v1/completions.
#
#   cached:   every prompt = one shared PREFIX-word system part + IN unique words
#             (`--shared-prefix-tokens PREFIX --input-tokens IN`); the warm-up request
#             puts the prefix in the cache, so measured requests reuse it.
#   uncached: every prompt = PREFIX + IN unique words (`--input-tokens PREFIX+IN`),
#             same length, nothing shared.
# Prints per server: prompt tokens and cached tokens per request (the server's usage),
# TTFT p50/p90 of each workload, and the ratio cached ÷ uncached (goal ≤ 0.2).
#
# Then "outputs identical": on a fresh one-slot server, each of K prompts (the shared
# prefix + a user turn) is sent cold (after an unrelated prompt has replaced the
# slot's cache) and then again warm (its prefix cached); greedy outputs must match
# byte for byte. The server's reported cached tokens prove which case each request was.
#
# usage: bench/prefix-cache.sh [MODEL|catalogue-name]
#   env PREFIX (1000), IN (16), OUT (16), N (8), K (4), THREADS, PORT (18090),
#       ONLY_IDENTICAL=1 (the cold-vs-warm check alone),
#       LLAMA_SERVER (default ~/.cache/memwall/llama-tools/bin/llama-server; skipped
#       with a note when absent)
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
prefix=${PREFIX:-1000}; in=${IN:-16}; out=${OUT:-16}; n=${N:-8}; k=${K:-4}; port=${PORT:-18090}
# A word is about 1.3 tokens: give each slot room for the longest prompt + output.
ctx=$(( (prefix + in) * 2 + out + 256 ))
ls_bin=${LLAMA_SERVER:-${MEMWALL_LLAMA_TOOLS:-$HOME/.cache/memwall/llama-tools}/bin/llama-server}
work=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
url="http://127.0.0.1:$port"

up() { # log
  for _ in $(seq 1 600); do
    curl -sf "$url/health" >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || { tail -20 "$1" >&2; exit 1; }
    sleep 0.2
  done
  echo "server did not answer /health in 120 s" >&2; tail -20 "$1" >&2; exit 1
}
down() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""; }
start() { # name slots
  local name=$1 slots=$2
  if [ "$name" = memwall ]; then
    "$mw" --db "$work/lt.db" serve --model "$model" --parallel "$slots" --ctx-size $((ctx * slots)) \
      --threads "$threads" --port "$port" >"$work/$name.log" 2>&1 &
  else
    "$ls_bin" -m "$model" -np "$slots" -c $((ctx * slots)) -t "$threads" --port "$port" \
      --host 127.0.0.1 >"$work/$name.log" 2>&1 &
  fi
  pid=$!
  up "$work/$name.log"
}
lt() { # out.json loadtest-args...
  local o=$1; shift
  "$mw" --db "$work/lt.db" loadtest --url "$url" --endpoint completions --concurrency 1 \
    --num-requests "$n" --output-tokens "$out" --warmup 1 --seed 7 --model-file "$model" \
    --no-sampler --json "$@" >"$o"
}

servers=(memwall)
if [ -x "$ls_bin" ]; then servers+=(llama-server); else
  echo "NOTE: llama-server not found at $ls_bin: memwall serve only (scripts/build-llama-tools.sh builds it)" >&2; fi
lock=/tmp/memwall-engine-tests.lock
exec 9>"$lock"; flock 9
echo "model $model, threads $threads, prefix $prefix words + $in words per turn, $out tokens out, $n requests, concurrency 1" >&2
for s in "${servers[@]}"; do
  [ -n "${ONLY_IDENTICAL:-}" ] && break
  start "$s" 2
  lt "$work/$s-cached.json" --shared-prefix-tokens "$prefix" --input-tokens "$in"
  lt "$work/$s-uncached.json" --shared-prefix-tokens 0 --input-tokens $((prefix + in))
  down
done

# Outputs identical, cold vs warm, on each server with one slot, the same prompts
# (one seed) for both: a difference on llama-server too says the cause lies in
# llama.cpp's kernels (the warm request decodes the prompt's last token alone, the
# cold one inside a prefill chunk), not in memwall's cache.
identical() { # name
  start "$1" 1
  python3 - "$url" "$prefix" "$in" "$out" "$k" "$1" >"$work/identical-$1.txt" <<'PY'
import json, random, sys, urllib.request
url, prefix, n_in, n_out, k, name = sys.argv[1], *map(int, sys.argv[2:6]), sys.argv[6]
rng = random.Random(11)
words = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu".split()
draw = lambda n: " ".join(rng.choice(words) for _ in range(n))
system = "System: " + draw(prefix)
def ask(prompt):
    body = json.dumps({"prompt": prompt, "max_tokens": n_out, "temperature": 0, "stream": False, "cache_prompt": True}).encode()
    r = urllib.request.urlopen(urllib.request.Request(f"{url}/v1/completions", body, {"Content-Type": "application/json"}), timeout=600)
    d = json.load(r)
    cached = ((d.get("usage") or {}).get("prompt_tokens_details") or {}).get("cached_tokens")
    if cached is None:
        cached = (d.get("timings") or {}).get("cache_n")
    return d["choices"][0]["text"], cached, d["usage"]["prompt_tokens"]
same = 0
rows = []
for i in range(k):
    p = f"{system}\nUser: {draw(n_in)}\nAssistant:"
    ask("Unrelated: " + draw(64))  # replaces the only slot's cache
    cold, c_cold, n_prompt = ask(p)
    warm, c_warm, _ = ask(p)
    same += cold == warm
    rows.append(f"| {name} | {i} | {n_prompt} | {c_cold} | {c_warm} | {'yes' if cold == warm else 'NO'} |")
    if cold != warm:
        rows.append(f"|  | cold: {json.dumps(cold)} | | | | |")
        rows.append(f"|  | warm: {json.dumps(warm)} | | | | |")
print(f"Outputs identical, cold vs warm ({name}, 1 slot, greedy, {n_out} tokens): {same}/{k}")
print("\n".join(rows))
PY
  down
}
for s in "${servers[@]}"; do identical "$s"; done
[ -n "${ONLY_IDENTICAL:-}" ] && {
  echo "| server | prompt | prompt tokens | cached (cold) | cached (warm) | identical |"
  echo "|---|---:|---:|---:|---:|---|"
  for s in "${servers[@]}"; do grep '^|' "$work/identical-$s.txt"; done
  for s in "${servers[@]}"; do head -1 "$work/identical-$s.txt"; done
  exit 0
}

python3 - "$work" "${servers[@]}" <<'PY'
import json, sys
work, servers = sys.argv[1], sys.argv[2:]
print("TTFT with and without a cached shared prefix (memwall loadtest, concurrency 1, /v1/completions):")
print("| server | workload | prompt tokens / request | cached tokens / request | TTFT p50 ms | TTFT p90 ms | done/sent |")
print("|---|---|---:|---:|---:|---:|---|")
ratios = []
for s in servers:
    p50 = {}
    for w in ("cached", "uncached"):
        p = json.load(open(f"{work}/{s}-{w}.json"))["points"][0]
        tin = p.get("total_input_tokens")
        per = f"{tin / p['n_completed']:.0f}" if tin else "—"
        cached = p.get("mean_cached_tokens")
        c = "—" if cached is None else f"{cached:.0f}"
        t = p["ttft"]
        p50[w] = t["median_ms"]
        print(f"| {s} | {w} | {per} | {c} | {t['median_ms']:.1f} | {t['p90_ms']:.1f} | {p['n_completed']}/{p['n_sent']} |")
    ratios.append((s, p50["cached"] / p50["uncached"]))
print()
for s, r in ratios:
    print(f"{s}: TTFT p50 cached ÷ uncached = {r:.3f} (goal ≤ 0.2)")
PY
echo
echo "| server | prompt | prompt tokens | cached (cold) | cached (warm) | identical |"
echo "|---|---:|---:|---:|---:|---|"
for s in "${servers[@]}"; do grep '^|' "$work/identical-$s.txt"; done
for s in "${servers[@]}"; do head -1 "$work/identical-$s.txt"; done
