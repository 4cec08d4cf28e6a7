#!/usr/bin/env bash
# memwall's speculative decoding vs llama.cpp's own llama-speculative, on the same
# pair, prompts, k, greedy decoding, threads and tokens per prompt.
#
# llama.cpp side: speedup = llama-speculative "decoded … speed" t/s ÷ llama-bench tg
# t/s of the target alone (-p 0 -n N at a depth equal to the prompt's token count),
# per prompt, averaged over prompts.
# memwall side: `memwall spec bench` (its target-only and speculative runs, same
# prompts), at the same fixed k, at the other fixed k in KS, and its --k auto choice.
# Prints memwall's speedup ÷ llama.cpp's for measured speculative runs only: at k = K,
# at memwall's best fixed k, and --k auto's row where auto speculated. Where auto turned
# speculation off, that is a decision without a measurement: named, no ratio.
# (The table itself: bench/vs_llama_speculative_table.py.)
#
# usage: bench/vs-llama-speculative.sh [K] [MAX_NEW] [PER_CATEGORY]
#   env THREADS (default: physical cores), REPS (default 5), MEMWALL (binary; default: build it),
#       KS (memwall's fixed draft lengths, comma-separated, must include K; default: K),
#       MEMWALL_DB (a store holding passed gates over the whole prompt set at >= MAX_NEW tokens for
#       every k in KS; default: a temp db, gated here), SKIP_GATE=1 (do not gate again),
#       MEMWALL_SPEC_JSON (the spec.json of an earlier `memwall spec bench --out DIR` run on the same
#       prompts, max_new and k: reuse its rows instead of benchmarking memwall again; checked)
# The llama.cpp tools are built from the llama.cpp sources memwall links (scripts/build-llama-tools.sh).
# Note: memwall's target is loaded without weight repacking (for output identity, see
# crates/memwall-core/src/spec/run.rs); llama-speculative runs with llama.cpp's defaults.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
k=${1:-8}
max_new=${2:-32}
ks=${KS:-$k}
case ",$ks," in *",$k,"*) ;; *) echo "KS=$ks must include K=$k" >&2; exit 2 ;; esac
per_cat=${3:-1}
reps=${REPS:-5}
threads=${THREADS:-$(lscpu -p=Core,Socket | grep -v '^#' | sort -u | wc -l)}
tools=${MEMWALL_LLAMA_TOOLS:-$HOME/.cache/memwall/llama-tools}/bin
[ -x "$tools/llama-speculative" ] && [ -x "$tools/llama-bench" ] || "$root/scripts/build-llama-tools.sh" >&2
if [ -z "${MEMWALL:-}" ]; then
  . scripts/features.sh  # the set-up's features: the same build as `memwall bench`, no second one
  cargo build --release --locked -q -p memwall-cli ${MEMWALL_FEATURES:+--features "$MEMWALL_FEATURES"}
  target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
  MEMWALL="$target/release/memwall"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
db=${MEMWALL_DB:-$work/spec.db}
lock=/tmp/memwall-engine-tests.lock
tgt=$("$MEMWALL" models list --json | python3 -c "import json,sys; print(next(m['path'] for m in json.load(sys.stdin) if m['name']=='qwen2.5-coder-1.5b-q4_k_m'))")
dft=$("$MEMWALL" models list --json | python3 -c "import json,sys; print(next(m['path'] for m in json.load(sys.stdin) if m['name']=='qwen2.5-coder-0.5b-q4_k_m'))")
echo "pair $dft -> $tgt, k $k (memwall also $ks), $max_new tokens, $per_cat prompt(s) per category, threads $threads, reps $reps" >&2

# The same prompts as `memwall spec bench --per-category $per_cat`: the first ones of each category, rendered.
flock "$lock" "$MEMWALL" spec prompts --json >"$work/prompts.json"
python3 - "$work" "$per_cat" <<'PY'
import json, sys, os
work, per = sys.argv[1], int(sys.argv[2])
ps = json.load(open(os.path.join(work, "prompts.json")))
chosen = []
for cat in ("json", "code", "prose"):
    chosen += [p for p in ps if p["category"] == cat][:per]
for p in chosen:
    open(os.path.join(work, p["id"] + ".txt"), "w").write(p["rendered"])
json.dump(chosen, open(os.path.join(work, "chosen.json"), "w"))
PY

# llama.cpp: llama-speculative per prompt (reps times), llama-bench tg at the prompt's depth.
python3 - "$work" "$tools" "$tgt" "$dft" "$k" "$max_new" "$threads" "$reps" "$lock" <<'PY' >"$work/llama.json"
import json, os, re, subprocess, sys, statistics as st
work, tools, tgt, dft, k, n, th, reps, lock = sys.argv[1:]
out = []
for p in json.load(open(os.path.join(work, "chosen.json"))):
    spec, acc = [], []
    for _ in range(int(reps)):
        r = subprocess.run(["flock", lock, f"{tools}/llama-speculative", "-m", tgt, "-md", dft,
                            "-f", os.path.join(work, p["id"] + ".txt"), "-n", n, "--spec-draft-n-max", k, "--spec-draft-n-min", "0",
                            "--temp", "0", "-t", th, "-td", th, "-c", "4096", "-np", "1"],
                           capture_output=True, text=True)
        log = r.stdout + r.stderr
        m = re.search(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds, speed:\s+([\d.]+) t/s", log)
        a = re.search(r"accept\s+=\s+([\d.]+)%", log)
        if not m:
            sys.exit(f"llama-speculative failed on {p['id']}:\n{log[-2000:]}")
        spec.append(float(m.group(3)))
        acc.append(float(a.group(1)) if a else float("nan"))
    r = subprocess.run(["flock", lock, f"{tools}/llama-bench", "-m", tgt, "-p", "0", "-n", n, "-d", str(p["n_prompt_tokens"]),
                        "-t", th, "-r", reps, "-o", "json"], capture_output=True, text=True)
    tg = json.loads(r.stdout)[0]["avg_ts"]
    out.append({"id": p["id"], "category": p["category"], "spec_tps": st.mean(spec), "spec_std": st.stdev(spec) if len(spec) > 1 else 0.0,
                "accept_pct": st.mean(acc), "tg_tps": tg, "speedup": st.mean(spec) / tg})
print(json.dumps(out))
PY

# memwall: gate every k in KS over the whole prompt set at MAX_NEW tokens (a gate
# unlocks a bench only then), then bench with KS and auto.
# (SKIP_GATE=1 when MEMWALL_DB already holds such gates; the bench refuses otherwise,
# naming the gate runs and what they lacked.)
if [ -n "${MEMWALL_SPEC_JSON:-}" ]; then
  # Reuse an earlier bench: same prompts, tokens per prompt, threads and a fixed-k row for k.
  python3 - "$MEMWALL_SPEC_JSON" "$work" "$k" "$max_new" "$threads" <<'PY' >"$work/mw.json"
import json, os, sys
path, work, k, n, th = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
rows = json.load(open(path))["rows"]
chosen = json.load(open(os.path.join(work, "chosen.json")))
for cat in ("json", "code", "prose"):
    ids = [p["id"] for p in chosen if p["category"] == cat]
    rs = [r for r in rows if r["category"] == cat and r["drafter_kind"] == "draft-model"]
    if not any(r["k"] == k and not r["k_auto"] for r in rs):
        sys.exit(f"{path}: no draft-model row with k = {k} for {cat}: run `memwall spec bench -k ...,{k}` or unset MEMWALL_SPEC_JSON")
    for r in rs:
        if r["prompt_ids"] != ids or r["max_new"] != n or r["n_threads"] != th:
            sys.exit(f"{path}: {cat} row measured prompts {r['prompt_ids']}, {r['max_new']} tokens, {r['n_threads']} threads; "
                     f"this comparison needs {ids}, {n} tokens, {th} threads: pass the same MAX_NEW / PER_CATEGORY / THREADS")
print(json.dumps(rows))
PY
  echo "memwall rows reused from $MEMWALL_SPEC_JSON" >&2
else
  [ "${SKIP_GATE:-0}" = 1 ] || flock "$lock" "$MEMWALL" --db "$db" spec gate -k "$ks" --drafters draft-model -n "$max_new" \
    --sampling-trials 0 -t "$threads" >&2
  flock "$lock" "$MEMWALL" --db "$db" spec bench -k "$ks" --drafters draft-model --per-category "$per_cat" -r "$reps" -n "$max_new" \
    -t "$threads" --out "$work/mw" --json >"$work/mw.json"
fi

python3 "$root/bench/vs_llama_speculative_table.py" "$work/llama.json" "$work/mw.json" "$k"
