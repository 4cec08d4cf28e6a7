#!/usr/bin/env python3
# A stand-in for llama-server in the dry run (scripts/gpu-bundle/dry-run.sh) so that
# spec_peer.py is checked without llama.cpp: /health, and /completion with timings of
# 10 ms per token without speculation, 5 ms with --spec-synth-rates (speedup 2 exactly),
# half the drafted tokens accepted.
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
args = sys.argv[1:]
port = int(args[args.index("--port") + 1])
rates = args[args.index("--spec-synth-rates") + 1].split(",") if "--spec-synth-rates" in args else None
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b'{"status":"ok"}')
    def do_POST(self):
        n = int(self.headers["Content-Length"]); body = json.loads(self.rfile.read(n))
        t = {"predicted_n": body["n_predict"], "predicted_ms": body["n_predict"] * (5.0 if rates else 10.0),
             "predicted_per_second": 0, "prompt_n": 10}
        if rates:
            t["draft_n"] = body["n_predict"]; t["draft_n_accepted"] = body["n_predict"] // 2
        out = json.dumps({"content": "x", "timings": t}).encode()
        self.send_response(200); self.send_header("Content-Type", "application/json"); self.end_headers(); self.wfile.write(out)
HTTPServer(("127.0.0.1", port), H).serve_forever()
