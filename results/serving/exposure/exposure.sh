#!/usr/bin/env bash
# Issue 41's "closing note must show" items, run against a real `memwall serve` on
# SmolLM2-135M (the e2e model) and printed as they come: each browser-style request and
# its refusal, the same with --cors-origin; the stock openai client's results for the
# fields memwall does not implement; a cancelled request's tokens in the counters (and
# its -v log line); a SIGTERM'd server's printed summary and its stored run.
# (Token counts of the same messages through every command: crates/memwall-core/tests/
# prompt.rs prints them with --nocapture.)
#
# usage: results/serving/exposure/exposure.sh > results/serving/exposure/exposure.txt
set -uo pipefail
cd "$(dirname "$0")/../../.."
mw=${MEMWALL:-${CARGO_TARGET_DIR:-$HOME/.cache/memwall/target}/release/memwall}
model=${MODEL_FILE:-$HOME/.cache/memwall/models/SmolLM2-135M-Instruct.Q4_1.gguf}
py=${PYTHON_OPENAI:-$HOME/.cache/memwall/venv-openai/bin/python}
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
echo "memwall: $("$mw" --version) (binary sha256 $(sha256sum "$mw" | cut -c1-12)), model $(basename "$model")"
echo "openai client: $("$py" -c 'import openai; print(openai.__version__)')"

start() { # port, extra args...: starts memwall serve, waits for /health
  local port=$1; shift
  "$mw" --db "$tmp/store.db" serve -m "$model" --port "$port" --threads 1 "$@" >"$tmp/serve-$port.out" 2>"$tmp/serve-$port.err" &
  echo $! >"$tmp/pid-$port"
  for _ in $(seq 1 300); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && return 0; sleep 0.2; done
  echo "server on $port did not come up:"; cat "$tmp/serve-$port.err"; exit 1
}
stop() { # port, signal
  local pid; pid=$(cat "$tmp/pid-$1"); kill "-${2:-INT}" "$pid"; wait "$pid"; echo "exit status $?"
}
show() { # title, curl args...: status, the headers that matter, the body
  local title=$1; shift
  echo "--- $title"
  echo "\$ curl $*" | sed "s#$tmp#\$TMP#g"
  curl -s -o "$tmp/body" -D "$tmp/head" -w '%{http_code}\n' "$@" | sed 's/^/status /'
  grep -i '^\(access-control-[a-z-]*\|content-type\|vary\):' "$tmp/head" | tr -d '\r' | sed 's/^/  /'
  head -c 400 "$tmp/body" | tr -d '\r'; echo
}
name=$(basename "$model" .gguf)  # the model id memwall serve reports (GET /v1/models)
body='{"model":"'"$name"'","messages":[{"role":"user","content":"Say OK"}],"max_tokens":4}'

echo; echo "=== 1. Browser-style requests, default settings (127.0.0.1, no key, no --cors-origin)"
start 18421
u=http://127.0.0.1:18421
show "text/plain body with a foreign Origin (a web page's simple request)" -X POST "$u/v1/chat/completions" \
  -H 'Content-Type: text/plain' -H 'Origin: http://evil.example' --data "$body"
show "form-encoded body" -X POST "$u/v1/chat/completions" -H 'Content-Type: application/x-www-form-urlencoded' --data "$body"
show "application/json with a foreign Origin" -X POST "$u/v1/chat/completions" \
  -H 'Content-Type: application/json' -H 'Origin: http://evil.example' --data "$body"
show "a foreign Host on /metrics (DNS rebinding)" "$u/metrics" -H 'Host: evil.example'
show "a foreign Host on /v1/models" "$u/v1/models" -H 'Host: evil.example:18421'
show "a foreign Host on a completion" -X POST "$u/v1/chat/completions" -H 'Host: evil.example' \
  -H 'Content-Type: application/json' --data "$body"
show "preflight from a foreign origin" -X OPTIONS "$u/v1/chat/completions" -H 'Origin: http://evil.example' \
  -H 'Access-Control-Request-Method: POST' -H 'Access-Control-Request-Headers: content-type'
show "Host: localhost:18421 (allowed), no Origin: the request a local client sends" -X POST "$u/v1/chat/completions" \
  -H 'Host: localhost:18421' -H 'Content-Type: application/json' --data "$body"
echo; echo "=== 2. Errors are OpenAI-shaped JSON"
head -c 3000000 /dev/zero | tr '\0' 'a' >"$tmp/big"
show "a 3 MB body" -X POST "$u/v1/chat/completions" -H 'Content-Type: application/json' --data-binary @"$tmp/big"
show "GET on /v1/chat/completions" "$u/v1/chat/completions"
show "an unknown path" "$u/v1/nothing"

echo; echo "=== 3. The stock openai client: fields memwall does not implement, and fields that change nothing"
"$py" - "$u" "$name" <<'PY'
import sys, openai
c = openai.OpenAI(base_url=sys.argv[1] + "/v1", api_key="unused", max_retries=0)
m = [{"role": "user", "content": "Say OK"}]
cases = [
    ("response_format json_object", dict(response_format={"type": "json_object"})),
    ("logprobs", dict(logprobs=True)),
    ("tools", dict(tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])),
    ("top_p 0.5", dict(top_p=0.5)),
    ("presence_penalty 0.5", dict(presence_penalty=0.5)),
    ("an unknown role 'wizard'", dict(messages=[{"role": "wizard", "content": "hi"}] + m)),
    ("user and metadata (change nothing)", dict(user="u1", metadata={"k": "v"})),
]
for name, kw in cases:
    args = dict(model=sys.argv[2], messages=m, max_tokens=4)
    args.update(kw)
    try:
        r = c.chat.completions.create(**args)
        print(f"{name}: 200, {r.usage.completion_tokens} tokens: {r.choices[0].message.content!r}")
    except openai.APIStatusError as e:
        print(f"{name}: {e.status_code} {e.body}")
PY

echo; echo "=== 4. A cancelled request's tokens are counted (and logged with -v)"
stop 18421
start 18422 -v
u=http://127.0.0.1:18422
before=$(curl -s "$u/metrics" | grep -E '^[a-z:]*tokens_predicted_total ' | awk '{print $2}')
"$py" - "$u" "$name" <<'PY'
import sys, openai
c = openai.OpenAI(base_url=sys.argv[1] + "/v1", api_key="unused", max_retries=0)
s = c.chat.completions.create(model=sys.argv[2], messages=[{"role": "user", "content": "Write a long story about a dragon."}],
                              max_tokens=400, stream=True, extra_body={"ignore_eos": True})
n = 0
for ch in s:
    if ch.choices and ch.choices[0].delta.content:
        n += 1
        if n == 5:
            break
s.close()
print(f"streamed {n} content chunks, then closed the connection")
PY
sleep 2
after=$(curl -s "$u/metrics" | grep -E '^[a-z:]*tokens_predicted_total ' | awk '{print $2}')
echo "tokens_predicted_total before $before, after $after: +$((after - before)) for the cancelled request"
grep -i "cancelled" "$tmp/serve-18422.err" | tail -2 | sed "s/\x1b\[[0-9;]*m//g"

echo; echo "=== 5. SIGTERM (what kill, systemd and docker send): the summary is printed and the run stored"
curl -s -X POST "$u/v1/chat/completions" -H 'Content-Type: application/json' --data "$body" >/dev/null
stop 18422 TERM
tail -4 "$tmp/serve-18422.err" | sed "s/\x1b\[[0-9;]*m//g"
tail -4 "$tmp/serve-18422.out"
echo "stored serve runs:"
python3 - "$tmp/store.db" <<'PY' 2>&1
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
for r in db.execute("SELECT id, kind, started_at, finished_at, notes FROM runs ORDER BY id"):
    print(" ", r)
PY

echo; echo "=== 6. With --cors-origin http://localhost:3000 (and an API key)"
start 18423 --cors-origin http://localhost:3000 --api-key k3y
u=http://127.0.0.1:18423
show "preflight from the listed origin" -X OPTIONS "$u/v1/chat/completions" -H 'Origin: http://localhost:3000' \
  -H 'Access-Control-Request-Method: POST' -H 'Access-Control-Request-Headers: content-type, authorization'
show "POST from the listed origin, with the key" -X POST "$u/v1/chat/completions" -H 'Origin: http://localhost:3000' \
  -H 'Authorization: Bearer k3y' -H 'Content-Type: application/json' --data "$body"
show "POST from another origin, with the key" -X POST "$u/v1/chat/completions" -H 'Origin: http://evil.example' \
  -H 'Authorization: Bearer k3y' -H 'Content-Type: application/json' --data "$body"
show "preflight from another origin" -X OPTIONS "$u/v1/chat/completions" -H 'Origin: http://evil.example' \
  -H 'Access-Control-Request-Method: POST'
show "text/plain body with the key (not parsed as JSON)" -X POST "$u/v1/chat/completions" \
  -H 'Authorization: Bearer k3y' -H 'Content-Type: text/plain' --data "$body"
show "a wrong key" -X POST "$u/v1/chat/completions" -H 'Authorization: Bearer nope' \
  -H 'Content-Type: application/json' --data "$body"
stop 18423
