"""Host time of one op call on a tiny CUDA input (the GPU work is negligible),
and the CUDA runtime calls it makes (torch.profiler). Usage: python scripts/host_overhead.py"""
import time

import torch
from torch.profiler import ProfilerActivity, profile

import torch_jsvd

A = torch.randn(1, 4, 4, device="cuda")


def per_call_us(f, n=2000):
    f()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        f()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / n * 1e6


calls = {
    "svd_ex op": lambda: torch.ops.jsvd.svd_ex.default(A, False, True, None, None),
    "svd_ex op, no vectors": lambda: torch.ops.jsvd.svd_ex.default(A, False, False, None, None),
    "torch_jsvd.svd (syncs)": lambda: torch_jsvd.svd(A, full_matrices=False),
    "torch.linalg.svd": lambda: torch.linalg.svd(A, full_matrices=False),
    "empty + copy_": lambda: torch.empty(1, 4, 4, device="cuda").copy_(A.mT),
    "info.min().item()": lambda: A.min().item(),
}
with torch._C._AutoDispatchBelowAutograd():
    print(f"{'svd_ex op below autograd':28s} {per_call_us(calls['svd_ex op']):7.1f} us/call")
for name, f in calls.items():
    print(f"{name:28s} {per_call_us(f):7.1f} us/call")
with profile(activities=[ProfilerActivity.CPU]) as prof:
    for _ in range(100):
        torch.ops.jsvd.svd_ex.default(A, False, True, None, None)
    torch.cuda.synchronize()
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25, max_name_column_width=45))
