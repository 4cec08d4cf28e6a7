#!/usr/bin/env python3
"""Reads `cargo ... --message-format=json` on stdin and fails when llama.cpp
(llama-cpp-sys-2) or memwall-core's library had to be compiled again.

scripts/test.sh runs the workspace's test build through it right after
scripts/setup.sh built the CLI alone: both must resolve the same features
(crates/workspace-hack), or a cold CI run compiles llama.cpp twice (~6 min each on
2 cores). Human-readable compiler output is passed through to stderr."""
import json
import sys

WATCH = {"llama-cpp-sys-2", "memwall-core"}
rebuilt = []
seen = set()
for line in sys.stdin:
    try:
        msg = json.loads(line)
    except json.JSONDecodeError:
        sys.stderr.write(line)
        continue
    if msg.get("reason") == "compiler-message":
        rendered = msg.get("message", {}).get("rendered")
        if rendered:
            sys.stderr.write(rendered)
    if msg.get("reason") != "compiler-artifact":
        continue
    name = msg["target"]["name"].replace("_", "-")
    pkg = msg["package_id"]
    if msg["profile"].get("test"):
        continue
    if "lib" not in msg["target"]["kind"]:
        continue
    for w in WATCH:
        if name == w or (w in pkg and name == w):
            seen.add(w)
            if not msg.get("fresh", False):
                rebuilt.append(w)
if rebuilt:
    print(
        "check-built-once: the workspace build compiled "
        + ", ".join(sorted(set(rebuilt)))
        + " again after the CLI build: the two resolve different features. "
        "Find the crates with `cargo tree -e features` (CLI alone vs --workspace) and add "
        "their features to crates/workspace-hack/Cargo.toml.",
        file=sys.stderr,
    )
    sys.exit(1)
print(f"check-built-once: {', '.join(sorted(seen)) or 'nothing watched'} reused from the CLI build")
