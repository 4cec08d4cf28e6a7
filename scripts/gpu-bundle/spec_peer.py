#!/usr/bin/env python3
"""The peer of `memwall spec bench --synth-acceptance`: llama.cpp's own set-acceptance
mode, llama-server with --spec-synth-rates (benchmarking only: llama.cpp warns that the
output is not valid), same target, draft and k.

For i.i.d. acceptance α per position, llama.cpp's unconditional per-position rates are
P_i = α^(i+1), i = 0…k−1 (`--spec-synth-rates α,α²,…,α^k`; it turns them back into the
conditional α). For each α, and once without speculation (the baseline), the script
starts llama-server, waits for /health, sends every prompt to /completion (greedy,
n_predict tokens, no prompt cache) `reps` times, reads the response's `timings`
(predicted_per_second = decode tok/s; draft_n, draft_n_accepted) and stops the server.
Speedup of a repetition = its mean decode tok/s ÷ the baseline's mean of the same
repetition index. Prints one JSON object (stdout); nothing is estimated: a field the
server did not return is null.

Usage: spec_peer.py --server BIN --target T.gguf --draft D.gguf --k 6 (or one k per α: 4,5,6)
                    --alphas 0.5,0.7,0.9 [--ngl 99] [--n-predict 64] [--reps 3]
                    [--prompts FILE.jsonl] [--threads N] [--port 8089]
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

DEFAULT_PROMPTS = [
    "def fibonacci(n: int) -> int:\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "{\"users\": [{\"id\": 1, \"name\": \"Alice\"}, {\"id\": 2, \"name\": ",
    "The history of the printing press begins in",
]


def rates(alpha, k):
    return [alpha ** (i + 1) for i in range(k)]


def post(url, body, timeout):
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.load(r)


def wait_health(base, proc, timeout):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if proc.poll() is not None:
            return f"llama-server exited with status {proc.returncode} before it was ready"
        try:
            with urllib.request.urlopen(base + "/health", timeout=2) as r:
                if r.status == 200:
                    return None
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)
    return f"llama-server not ready after {timeout} s"


def run_server(a, extra, prompts, log):
    port = a.port
    cmd = [a.server, "-m", a.target, "-ngl", str(a.ngl), "-c", str(a.ctx), "-np", "1",
           "--host", "127.0.0.1", "--port", str(port)]
    if a.threads:
        cmd += ["-t", str(a.threads)]
    cmd += extra
    log.write("$ " + " ".join(cmd) + "\n")
    log.flush()
    proc = subprocess.Popen(cmd, stdout=log, stderr=log, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    out = {"command": cmd, "reps": [], "error": None}
    try:
        err = wait_health(base, proc, a.start_timeout)
        if err:
            out["error"] = err
            return out
        # One untimed warm-up request (first-use allocations, CUDA graphs).
        post(base + "/completion", {"prompt": prompts[0], "n_predict": 8, "temperature": 0,
                                    "cache_prompt": False}, a.timeout)
        for _ in range(a.reps):
            rep = []
            for p in prompts:
                r = post(base + "/completion", {"prompt": p, "n_predict": a.n_predict,
                                                "temperature": 0, "top_k": 1,
                                                "cache_prompt": False, "ignore_eos": True},
                         a.timeout)
                t = r.get("timings", {})
                rep.append({k: t.get(k) for k in ("predicted_n", "predicted_ms",
                                                  "predicted_per_second", "prompt_n",
                                                  "draft_n", "draft_n_accepted")})
            out["reps"].append(rep)
    except (urllib.error.URLError, OSError, ValueError) as e:
        out["error"] = f"request failed: {e}"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return out


def rep_tps(rep):
    """Decode tok/s of a repetition: total predicted tokens ÷ total decode time."""
    n = sum(x["predicted_n"] or 0 for x in rep)
    ms = sum(x["predicted_ms"] or 0 for x in rep)
    return n / (ms / 1000.0) if n and ms else None


def summarize(run, base_tps):
    tps = [rep_tps(r) for r in run["reps"]]
    drafted = sum(x["draft_n"] or 0 for r in run["reps"] for x in r)
    accepted = sum(x["draft_n_accepted"] or 0 for r in run["reps"] for x in r)
    have_draft = any(x.get("draft_n") is not None for r in run["reps"] for x in r)
    speedup = None
    if base_tps and tps and all(t is not None for t in tps) and len(base_tps) == len(tps):
        speedup = [t / b for t, b in zip(tps, base_tps)]
    return {
        "tps_samples": tps,
        "tps_mean": sum(tps) / len(tps) if tps and all(t is not None for t in tps) else None,
        "speedup_samples": speedup,
        "speedup_mean": sum(speedup) / len(speedup) if speedup else None,
        "draft_n": drafted if have_draft else None,
        "draft_n_accepted": accepted if have_draft else None,
        "acceptance_rate": accepted / drafted if have_draft and drafted else None,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--k", required=True, help="draft length, or one per α (comma-separated)")
    ap.add_argument("--alphas", required=True)
    ap.add_argument("--ngl", type=int, default=99)
    ap.add_argument("--n-predict", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--port", type=int, default=8089)
    ap.add_argument("--prompts", help="JSON Lines with a 'text' or 'prompt' field per line")
    ap.add_argument("--log", default=os.devnull)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--start-timeout", type=float, default=300)
    a = ap.parse_args()
    alphas = [float(x) for x in a.alphas.split(",") if x.strip()]
    if any(not 0.0 <= x <= 1.0 for x in alphas):
        sys.exit(f"--alphas {a.alphas}: each rate must be in [0, 1]")
    ks = [int(x) for x in a.k.split(",") if x.strip()]
    if len(ks) == 1:
        ks = ks * len(alphas)
    if len(ks) != len(alphas) or any(k < 1 for k in ks):
        sys.exit(f"--k {a.k}: one draft length ≥ 1, or one per α of --alphas {a.alphas}")
    prompts = DEFAULT_PROMPTS
    if a.prompts:
        prompts = []
        with open(a.prompts) as f:
            for i, line in enumerate(f, 1):
                if not line.strip():
                    continue
                o = json.loads(line)
                text = o.get("text") or o.get("prompt")
                if text is None and isinstance(o.get("messages"), list):
                    text = "\n".join(m.get("content", "") for m in o["messages"])
                if not text:
                    sys.exit(f"{a.prompts}:{i}: no 'text', 'prompt' or 'messages' field")
                prompts.append(text)
    with open(a.log, "a") as log:
        base = run_server(a, [], prompts, log)
        base_tps = [rep_tps(r) for r in base["reps"]]
        out = {
            "peer": "llama-server --spec-synth-rates",
            "server": a.server, "target": os.path.basename(a.target),
            "draft": os.path.basename(a.draft), "ngl": a.ngl,
            "n_predict": a.n_predict, "reps": a.reps, "n_prompts": len(prompts),
            "baseline": {"error": base["error"], **summarize(base, None)},
            "rows": [],
        }
        for alpha, k in zip(alphas, ks):
            r = rates(alpha, k)
            # llama.cpp speculates only with a type named (its default is none);
            # draft-simple is the draft-model speculation the synthetic rates apply to.
            extra = ["--spec-type", "draft-simple", "-md", a.draft, "-ngld", str(a.ngl),
                     "--spec-draft-n-max", str(k), "--spec-draft-n-min", "0",
                     "--spec-draft-p-min", "0",
                     "--spec-synth-rates", ",".join(f"{x:.9g}" for x in r)]
            run = run_server(a, extra, prompts, log)
            out["rows"].append({"alpha_set": alpha, "k": k, "synth_rates": r,
                                "error": run["error"], **summarize(run, base_tps)})
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
