"""Cost of each outer sweep of a CUDA call, and how many matrices of the batch took each sweep count.

Usage: python scripts/sweep_profile.py 1x1536x1536 [100x512x512 ...]   (float32, seed 0)
Times svd_ex with max_sweeps = k for k = 1, 2, ...: the increments are the sweeps' costs (the first includes
the prologue and finalisation).
"""
import sys

import torch

import torch_jsvd


def timed(f, reps=2):
    ts = []
    for _ in range(reps + 1):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        f()
        e1.record()
        torch.cuda.synchronize()
        ts.append(e0.elapsed_time(e1))
    return sorted(ts[1:])[len(ts[1:]) // 2]


for case in sys.argv[1:]:
    b, m, n = (int(v) for v in case.split("x"))
    A = torch.randn(b, m, n, device="cuda", generator=torch.Generator(device="cuda").manual_seed(0))
    full = torch_jsvd.svd_ex(A, full_matrices=False)[3].max().item()
    prev, row = 0.0, []
    for k in range(1, full + 1):
        t = timed(lambda: torch_jsvd.svd_ex(A, full_matrices=False, max_sweeps=k))
        row.append(f"{t - prev:.1f}")
        prev = t
    print(f"{case}: {full} sweeps, total {prev:.1f} ms; per sweep ms: {' '.join(row)}", flush=True)
    # How many matrices took each sweep count: the later sweeps cost in proportion to the matrices still sweeping.
    info = torch_jsvd.svd_ex(A, full_matrices=False)[3]
    counts = torch.bincount(info.clamp_min(0).long().flatten()).tolist()
    print(f"  matrices by sweeps taken: {', '.join(f'{k}: {c}' for k, c in enumerate(counts) if c)}", flush=True)
