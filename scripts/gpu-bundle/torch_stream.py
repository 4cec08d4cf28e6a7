"""PyTorch's copy and triad on CUDA device 0, as STREAM counts them (copy 2 arrays,
triad 3 arrays of f64), each array 1 GiB, best of 10 passes after one discarded,
timed with CUDA events: the peer of `memwall stream --gpu`. Prints JSON."""
import json

import torch

n = (1 << 30) // 8
s = 3.0
a = torch.full((n,), 2.0, dtype=torch.float64, device="cuda")
b = torch.full((n,), 2.0, dtype=torch.float64, device="cuda")
c = torch.zeros(n, dtype=torch.float64, device="cuda")
ops = {
    "copy": (2, lambda: c.copy_(a)),
    "triad": (3, lambda: torch.add(b, c, alpha=s, out=a)),
}
out = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "array_bytes": n * 8, "kernels": {}}
for name, (arrays, f) in ops.items():
    times = []
    for _ in range(11):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        f()
        e1.record()
        torch.cuda.synchronize()
        times.append(e0.elapsed_time(e1) / 1e3)
    best = min(times[1:])
    out["kernels"][name] = {"best_gbps": arrays * 8 * n / best / 1e9, "samples_s": times[1:]}
print(json.dumps(out))
