#!/usr/bin/env bash
# Two speculative-decoding edge cases on the real catalogue models (issue 39 §7), each
# printed as memwall prints it:
#   1. acceptance counts stop at end-of-generation: the n-gram drafter at k = 8 on chat
#      prompts whose answer ends in a few tokens ("Say OK"); the stored stats must
#      have n_accepted ≤ n_emitted (nothing after the end token counted);
#   2. the draft/target vocabulary check covers the whole shared id range: a copy of
#      the 0.5B draft whose token `}/{` (id 22472 in Qwen2.5's vocabulary, far past the
#      ids 0–999 the old check compared) reads `~Q~` is refused, naming the id.
# usage: scripts/spec-edge-cases.sh   (needs the two Qwen2.5-Coder catalogue models)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/memwall/target}"
mw="${MEMWALL:-$CARGO_TARGET_DIR/release/memwall}"
models=${MEMWALL_MODELS:-$HOME/.cache/memwall/models}
target=$models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
draft=$models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
db=$work/edge.db

echo "== 1. end-of-generation: n-gram drafter, k = 8, answers of a few tokens"
cat >"$work/short.jsonl" <<'JSONL'
{"id": "ok-1", "category": "prose", "format": "chat", "messages": [{"role": "user", "content": "Say OK."}]}
{"id": "ok-2", "category": "prose", "format": "chat", "messages": [{"role": "user", "content": "Reply with the single word yes."}]}
{"id": "ok-3", "category": "prose", "format": "chat", "messages": [{"role": "user", "content": "What is 2 + 2? Answer with the number only."}]}
JSONL
"$mw" --db "$db" spec gate --target "$target" --prompts "$work/short.jsonl" --drafters ngram -k 8 -n 32 \
  --sampling-trials 0 --skip-capacity-check 2>&1 | grep -v '^\s*$' | tail -n 25
python3 - "$db" <<'PY'
import json, sqlite3, sys
c = sqlite3.connect(sys.argv[1])
bad = 0
for gid, k, stats in c.execute("SELECT id, k, detail_json FROM spec_gates ORDER BY id"):
    s = json.loads(stats or "{}")
    d, a, e = s.get("n_drafted"), s.get("n_accepted"), s.get("n_emitted")
    ok = a is not None and e is not None and a <= e
    bad += not ok
    print(f"stored gate {gid} k={k}: n_drafted {d}, n_accepted {a}, n_emitted {e}: accepted ≤ emitted {'yes' if ok else 'NO'}")
sys.exit(1 if bad else 0)
PY

echo "== 2. vocabulary: the draft with its \`}/{\` token changed"
cp "$draft" "$work/draft-patched.gguf"
python3 - "$work/draft-patched.gguf" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
needle = (3).to_bytes(8, "little") + b"}/{"
i = b.find(needle)
j = b.find(needle, i + 1)
if i < 0 or j >= 0:
    sys.exit(f"expected exactly one length-prefixed `}}/{{` in {p}, found {'none' if i < 0 else 'several'}")
b[i + 8:i + 11] = b"~Q~"
open(p, "wb").write(b)
print(f"patched {p}: `}}/{{` → `~Q~` at byte {i + 8}")
PY
set +e
"$mw" --db "$db" spec gate --target "$target" --draft "$work/draft-patched.gguf" --prompts "$work/short.jsonl" \
  --drafters draft-model -k 2 -n 8 --sampling-trials 0 --skip-capacity-check 2>&1 | grep -v '^\s*$' | tail -n 5
rc=${PIPESTATUS[0]}
set -e
echo "exit status $rc (non-zero: refused)"
[ "$rc" -ne 0 ]
