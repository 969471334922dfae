"""Host overhead of one call: wall and CUDA-event time of the op layers vs the
kernel time (torch.profiler), for a few small-matrix batches. Usage:
python scripts/overhead.py [BxMxN ...]"""
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

import torch_jsvd

cases = [tuple(int(v) for v in a.split("x")) for a in sys.argv[1:]] or [(500, 16, 16), (100, 32, 32), (10000, 32, 32)]


def per_call(fn, reps=50):
    fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t = time.perf_counter()
    s.record()
    for _ in range(reps):
        fn()
    e.record()
    e.synchronize()
    return (time.perf_counter() - t) * 1e3 / reps, s.elapsed_time(e) / reps


for b, m, n in cases:
    A = torch.randn(b, m, n, device="cuda")
    fns = {
        "svd_ex op (no sync)": lambda: torch.ops.jsvd.svd_ex.default(A, False, True, None, None),
        "torch_jsvd.svd": lambda: torch_jsvd.svd(A, full_matrices=False),
        "torch.linalg.svd": lambda: torch.linalg.svd(A, full_matrices=False),
    }
    print(f"== {b}x{m}x{n}")
    for name, fn in fns.items():
        wall, ev = per_call(fn)
        print(f"  {name:22s} wall {wall:7.3f} ms/call  events {ev:7.3f} ms/call")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        torch_jsvd.svd(A, full_matrices=False)
        torch.cuda.synchronize()
    kern = sum(e.device_time_total for e in prof.key_averages() if e.device_type.name == "CUDA" and "jsvd" in e.key)
    print(f"  jsvd kernels {kern / 1e3:.3f} ms")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10, max_name_column_width=40))
