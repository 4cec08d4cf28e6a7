#!/usr/bin/env bash
# Real counters on a device machine, with the bundle's CPU libraries only (no CUDA
# build of llama.cpp, so it fits a short call):
#  1. NVML's other-process GPU share: `memwall sample` while a torch matmul loop runs
#     in another process, beside `nvidia-smi pmon`'s own per-process SM % (issue 39 §6);
#  2. where RAPL is readable, a CPU bench (synthetic Qwen2.5-0.5B Q4_K_M, depths 0 and
#     1024) whose J/token is integrated over the timed intervals; the store keeps the
#     series, phases and intervals, so scripts/gpu-bundle/jpt-before-after.py recomputes
#     the old whole-phase figure beside it (issue 39 §1).
# usage (device machine, repository root, .bundle carried): OUT=dir scripts/gpu-bundle/counters.sh
set -uo pipefail
b=${BUNDLE:-.bundle}
export LD_LIBRARY_PATH="$b/cpu-lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mw="$b/memwall"
db="$OUT/counters.db"
log="$OUT/log.txt"
say() { echo "== $(date -u +%H:%M:%S) $*" | tee -a "$log"; }
say "hw"
{ nvidia-smi -L; "$mw" --db "$db" hw; } >>"$log" 2>&1
rapl=""
for f in /sys/class/powercap/intel-rapl:0/energy_uj /sys/class/powercap/intel-rapl/intel-rapl:0/energy_uj; do
  if cat "$f" >/dev/null 2>&1; then rapl=$f; fi
done
say "RAPL: ${rapl:-not readable}"
if python3 -c 'import torch; assert torch.cuda.is_available()' 2>>"$log"; then
  say "sample beside another process's matmul loop"
  python3 - <<'PY' &
import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
t = time.time()
while time.time() - t < 14:
    a @ a
torch.cuda.synchronize()
PY
  load=$!
  sleep 4
  "$mw" --db "$db" sample --seconds 6 --hz 10 --json >"$OUT/sample.json" 2>>"$log" &
  s=$!
  nvidia-smi pmon -c 5 -s u >"$OUT/pmon.txt" 2>&1
  wait "$s"
  wait "$load"
  say "sample alone (no other process)"
  "$mw" --db "$db" sample --seconds 3 --hz 10 --json >"$OUT/sample-idle.json" 2>>"$log"
else
  say "no torch with CUDA here: the other-process check did not run"
fi
if [ -n "$rapl" ]; then
  say "bench on the CPU with RAPL"
  "$mw" --db "$db" model synth --preset qwen2.5-0.5b -q Q4_K_M --out /tmp/counters-m.gguf >>"$log" 2>&1 &&
    "$mw" --db "$db" bench -m /tmp/counters-m.gguf -p 64 -n 32 -d 0,1024 -r 3 --ngl 0 --no-results --quiet \
      >"$OUT/bench.md" 2>>"$log"
fi
say "done"
