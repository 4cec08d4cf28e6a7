#!/usr/bin/env bash
# Real model vs its shape-exact synthetic twin (`memwall model synth`), decode speed.
# Decode of a dense model does not depend on weight values, so tg(synthetic) ÷ tg(real)
# ≈ 1 is the evidence that synthetic models stand in for real ones. Runs alternate
# real / synthetic for ROUNDS rounds (tg128, REPS reps each) so drifting background
# load hits both alike; prints every run and the ratio of the medians per pair.
# Pairs: Qwen2.5-Coder-0.5B Q4_K_M (twin: --preset qwen2.5-0.5b --untied --lexicographic,
# the layout of Qwen's own GGUF) and SmolLM2-135M Q4_1 (twin: --preset smollm2-135m).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
. scripts/features.sh  # the set-up's features: the same build as `memwall bench`, no second one
cargo build --release --locked -q -p memwall-cli ${MEMWALL_FEATURES:+--features "$MEMWALL_FEATURES"}
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
mw="$target/release/memwall"
rounds=${ROUNDS:-4}; reps=${REPS:-3}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
lock=/tmp/memwall-engine-tests.lock
db="$work/s.db"
"$mw" --db "$db" model synth --preset qwen2.5-0.5b --untied --lexicographic -q Q4_K_M --out "$work/qwen-twin.gguf" >/dev/null
"$mw" --db "$db" model synth --preset smollm2-135m -q Q4_1 --out "$work/smol-twin.gguf" >/dev/null
flock "$lock" "$mw" --db "$db" stream --quick >/dev/null
for r in $(seq "$rounds"); do
  for pair in "qwen2.5-coder-0.5b-q4_k_m $work/qwen-twin.gguf" "smollm2-135m-q4_1 $work/smol-twin.gguf"; do
    set -- $pair
    for m in "$1" "$2"; do
      flock "$lock" "$mw" --db "$db" bench -m "$m" -p 0 -n 128 -d 0 -r "$reps" --reuse-stream --no-results --quiet -o jsonl 2>/dev/null \
        | python3 -c "import sys,json
for l in sys.stdin:
    x=json.loads(l); print('$1', x['synthetic'], x['avg_ts'], x['stddev_ts'])"
    done
  done
done | tee "$work/rows.txt"
python3 - "$work/rows.txt" <<'PY'
import sys, statistics as st
rows=[l.split() for l in open(sys.argv[1])]
for pair in sorted({r[0] for r in rows}):
    real=[float(r[2]) for r in rows if r[0]==pair and r[1]=='False']
    syn=[float(r[2]) for r in rows if r[0]==pair and r[1]=='True']
    print(f"{pair}: tg128 real median {st.median(real):.2f} t/s, synthetic median {st.median(syn):.2f} t/s, ratio synthetic/real {st.median(syn)/st.median(real):.3f} (n={len(real)} runs each)")
PY
