#!/usr/bin/env bash
# The GPU pass's script on this CPU machine, with the CPU back end and tiny settings
# (scripts/test.sh runs it): every step must run and leave its rows and files, so
# the bundle and the script cannot rot between GPU sessions. Also packs the source
# tree and checks the bundle's size limit (without the dynamic-link build, which
# would compile llama.cpp a second time).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
mw=${MEMWALL_BIN:-$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release/memwall}
[ -x "$mw" ] || { echo "dry-run: $mw not built (cargo build --release -p memwall-cli)" >&2; exit 1; }
./scripts/gpu-bundle/pack.sh --check
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
lock=/tmp/memwall-engine-tests.lock
OUT="$tmp/out" MEMWALL_GPU_WORK="$tmp/work" MEMWALL_GPU_DRY_RUN=1 MEMWALL_BIN="$mw" \
  flock "$lock" ./scripts/gpu-bundle/run.sh >"$tmp/stdout" 2>"$tmp/stderr" || { tail -30 "$tmp/stderr" >&2; exit 1; }
# The peer driver against a stand-in server whose rates are known: speedup 2 exactly.
python3 ./scripts/gpu-bundle/spec_peer.py --server ./scripts/gpu-bundle/fake_llama_server.py --target t.gguf \
  --draft d.gguf --k 3,6 --alphas 0.5,0.9 --n-predict 16 --reps 2 --prompts scripts/gpu-bundle/spec-prompts.jsonl \
  --port "${SPEC_PEER_PORT:-18391}" >"$tmp/peer.json"
python3 - "$tmp/peer.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
rows = p["rows"]
ok = (p["baseline"]["tps_mean"] == 100.0 and [r["k"] for r in rows] == [3, 6]
      and all(r["speedup_samples"] == [2.0, 2.0] and r["acceptance_rate"] == 0.5 for r in rows)
      and rows[1]["synth_rates"][1] == 0.9 ** 2)
if not ok:
    sys.exit(f"spec_peer.py against the stand-in server: unexpected {json.dumps(p)[:400]}")
PY
python3 - "$tmp/out" <<'PY'
import json, sqlite3, sys, tarfile
out = sys.argv[1]
fail = []
log = open(f"{out}/log.txt").read()
for step in ("build: dry run", "hw", "stream:", "bench qwen2.5-0.5b:Q4_K_M round 1", "batch:", "verify:",
             "spec: qwen2.5-0.5b:Q4_K_M set acceptance", "calc: qwen2.5-0.5b:Q4_K_M",
             "multi: 0 GPU(s), split modes none", "multi qwen2.5-0.5b:Q4_K_M split none round 1", "done"):
    if step not in log:
        fail.append(f"log.txt lacks step {step!r}")
if "no NVIDIA driver" not in log and "CUDA" not in log:
    fail.append("stream --gpu on a CPU machine did not say why it could not run")
db = sqlite3.connect(f"{out}/memwall.db")
n = dict(db.execute("SELECT r.kind, COUNT(*) FROM bench_results b JOIN runs r ON r.id = b.run_id GROUP BY r.kind"))
rows = db.execute("SELECT n_prompt, n_gen, n_seqs, avg_ts FROM bench_results").fetchall()
if not any(p == 32 and g == 0 for p, g, _, _ in rows): fail.append("no pp32 row")
if not any(p == 0 and g == 8 and s == 1 for p, g, s, _ in rows): fail.append("no tg8 row")
if not any(s == 2 for _, _, s, _ in rows): fail.append("no 2-sequence batch row")
if not any(p == 2 and g == 0 for p, g, _, _ in rows): fail.append("no verify pp2 row")
if any(not (t > 0) for *_, t in rows): fail.append("a row without a positive rate")
synth = db.execute("SELECT alpha_set, k, speedup_mean, predicted_speedup, prediction_id, gate_id, alpha_hat FROM spec_synth").fetchall()
if not any(a is None and k == 0 for a, k, *_ in synth): fail.append("no set-acceptance target-only row")
spec_rows = [r for r in synth if r[1] > 0]
if sorted({r[0] for r in spec_rows}) != [0.5, 0.9]: fail.append(f"set-acceptance rows for α {sorted({r[0] for r in spec_rows})}, want [0.5, 0.9]")
for a, k, sp, pred, pid, gid, ah in spec_rows:
    if not (sp and sp > 0 and pred and pred > 0 and pid and gid): fail.append(f"set-acceptance row α={a} k={k} lacks a speedup, prediction or gate")
n_pred = db.execute("SELECT COUNT(*) FROM spec_synth_predictions").fetchone()[0]
if n_pred != 4: fail.append(f"{n_pred} stored predictions, want 2 α × 2 k")
# The multi step's rows carry the split as llama-bench writes it, and llama-bench's own
# JSON for the same flags spells it the same way.
splits = db.execute("SELECT DISTINCT split_mode, tensor_split FROM bench_results").fetchall()
if ("none", "0.00") not in splits: fail.append(f"no row with split_mode none (have {splits})")
tar = tarfile.open(f"{out}/results.tgz")
names = tar.getnames()
lbm = "json/multi-lb-qwen2.5-0.5b:Q4_K_M-none-1.json"
if lbm in names:
    lb_rows = json.load(tar.extractfile(lbm))
    lb_splits = {(r["split_mode"], r["tensor_split"]) for r in lb_rows}
    if lb_splits != {("none", "0.00")}: fail.append(f"llama-bench -sm none wrote {lb_splits}")
for want in ("json/hw.json", "json/mw-qwen2.5-0.5b:Q4_K_M-1.json", "json/batch.json", "json/verify-mw-qwen2.5-0.5b:Q4_K_M.json",
             "json/spec-mw-qwen2.5-0.5b:Q4_K_M.json", "json/calc-qwen2.5-0.5b:Q4_K_M.json",
             "json/multi-mw-qwen2.5-0.5b:Q4_K_M-none-1.json"):
    if want not in names: fail.append(f"results.tgz lacks {want}")
if "calc qwen2.5-0.5b:Q4_K_M: failed" in log: fail.append("calc failed")
if fail:
    sys.stderr.write("".join(l for l in log.splitlines(True) if l.startswith("==") or "error" in l))
    sys.exit("gpu bundle dry run: " + "; ".join(fail))
print(f"gpu bundle dry run: {len(rows)} bench rows, {len(synth)} set-acceptance rows, {len(names)} files in results.tgz, every step ran")
PY
