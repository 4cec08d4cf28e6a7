#!/usr/bin/env python3
"""A paced OpenAI-compatible server for checking load-test clients against known timing.

Every streamed request is answered on a fixed schedule, measured from the moment its
body has been read: the first token TTFT_MS later, then one token every GAP_MS, so
the request's tokens are at TTFT + k·GAP (k = 0 … n−1) whatever else is running.
Each request has its own thread and its own clock: unlike a real server, its timing
does not depend on how requests overlap, so two clients that send different traffic
(bursty or staggered) must still read the same TTFT, TPOT and ITL from it, and their
closed-loop throughput follows from the schedule plus the client's own turnaround.

It sleeps between tokens and computes nothing, so it leaves the cores to the clients.

Endpoints: GET /health, GET /v1/models, POST /v1/completions and
/v1/chat/completions (streamed as SSE, or not). `max_tokens` sets n (default 16);
`stream_options.include_usage` adds a usage chunk (prompt_tokens = the prompt's
whitespace-separated words: a stand-in, not a tokenizer count).

usage: bench/paced_server.py PORT [TTFT_MS] [GAP_MS]
"""

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "paced"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # one request per connection; the body ends at close
    ttft_s = 0.5
    gap_s = 0.036

    def log_message(self, *args):
        pass

    def _json(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/health":
            self._json(200, {"status": "ok"})
        elif self.path == "/v1/models":
            self._json(200, {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "paced"}]})
        else:
            self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    def do_POST(self):
        t0 = time.monotonic()
        try:
            req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        except (ValueError, json.JSONDecodeError) as e:
            self._json(400, {"error": {"message": f"bad JSON: {e}", "type": "invalid_request_error"}})
            return
        chat = self.path == "/v1/chat/completions"
        if not chat and self.path != "/v1/completions":
            self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        n = int(req.get("max_tokens") or req.get("max_completion_tokens") or 16)
        prompt = req.get("prompt") if not chat else " ".join(m.get("content", "") for m in req.get("messages", []))
        if isinstance(prompt, list):
            prompt = " ".join(map(str, prompt))
        usage = {"prompt_tokens": len(str(prompt or "").split()), "completion_tokens": n,
                 "total_tokens": len(str(prompt or "").split()) + n}
        rid, created = f"paced-{threading.get_ident()}-{t0}", int(time.time())
        obj = "chat.completion" if chat else "text_completion"

        def choice(text, finish):
            if chat:
                return {"index": 0, "delta": {"content": text}, "finish_reason": finish}
            return {"index": 0, "text": text, "finish_reason": finish}

        if not req.get("stream"):
            time.sleep(max(0.0, t0 + self.ttft_s + (n - 1) * self.gap_s - time.monotonic()))
            text = " tok" * n
            c = ({"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}
                 if chat else {"index": 0, "text": text, "finish_reason": "length"})
            self._json(200, {"id": rid, "object": obj, "created": created, "model": MODEL,
                             "choices": [c], "usage": usage})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        chunk_obj = "chat.completion.chunk" if chat else "text_completion"
        try:
            for k in range(n):
                time.sleep(max(0.0, t0 + self.ttft_s + k * self.gap_s - time.monotonic()))
                ev = {"id": rid, "object": chunk_obj, "created": created, "model": MODEL,
                      "choices": [choice(" tok", "length" if k == n - 1 else None)]}
                self.wfile.write(b"data: " + json.dumps(ev).encode() + b"\n\n")
                self.wfile.flush()
            if (req.get("stream_options") or {}).get("include_usage"):
                ev = {"id": rid, "object": chunk_obj, "created": created, "model": MODEL,
                      "choices": [], "usage": usage}
                self.wfile.write(b"data: " + json.dumps(ev).encode() + b"\n\n")
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    port = int(sys.argv[1])
    if len(sys.argv) > 2:
        Handler.ttft_s = float(sys.argv[2]) / 1e3
    if len(sys.argv) > 3:
        Handler.gap_s = float(sys.argv[3]) / 1e3
    srv = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    srv.daemon_threads = True
    print(f"paced server on http://127.0.0.1:{port}: TTFT {Handler.ttft_s * 1e3:.1f} ms, "
          f"gap {Handler.gap_s * 1e3:.1f} ms", file=sys.stderr, flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
