"""Shapes whose shared-memory plans sit near the per-block limit, through every entry point, for launch failures.

Usage: python scripts/smem_limit_cases.py [--margin BYTES] [--every N]
(scripts/gpu_check.sh robust-smem runs it.) For float32 and float64, with and without V, every p x q
(16 <= q < 200, q <= p < 1400) whose whole-matrix bytes (p + q or p rows of q columns) lie within --margin
of the device's opt-in limit (every N-th of them), goes through svd_ex (a uniform batch), svdvals and
svd_varlen (a list, with a 3 x 3 partner); then tall rank-deficient matrices past the completion kernel's
limit. A plan that leaves the kernels' own static shared memory no room fails to launch ("CUDA error:
invalid argument": a 158 x 105 float64 list member did, docs/experiments.md stop 42). Prints the
failures; exit status 1 if any.
"""
import argparse
import sys
import time

import torch

import torch_jsvd

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("--margin", type=int, default=2500)
p.add_argument("--every", type=int, default=3)
args = p.parse_args()
limit = torch.cuda.get_device_properties(0).shared_memory_per_block_optin
fails, n, t0 = [], 0, time.time()
for dt, es in ((torch.float64, 8), (torch.float32, 4)):
    for uv in (True, False):
        for q in range(16, 200):
            for rows in range(q, 1400):
                if abs((rows + (q if uv else 0)) * q * es - limit) > args.margin or (rows * q) % args.every:
                    continue
                n += 1
                A = torch.randn(rows, q, device="cuda", dtype=dt)
                calls = (("list", lambda: torch_jsvd.svd_varlen([A, A[:3, :3]], compute_uv=uv)),
                         ("uniform", lambda: torch_jsvd.svd_ex(A) if uv else torch_jsvd.svdvals(A)))
                for what, fn in calls:
                    try:
                        fn()
                        torch.cuda.synchronize()
                    except Exception as e:  # noqa: BLE001 (every failure is reported)
                        fails.append(f"{dt} {rows}x{q} uv={uv} {what}: {str(e)[:80]}")
# U's completion of tall rank-deficient matrices (svd reads the ranks, svd_ex does not), thin and full
for rows, q in ((30000, 8), (20000, 40)):
    Z = torch.zeros(1, rows, q, device="cuda")
    Z[0, :, 0] = 1
    n += 1
    for what, fn in (("svd_ex", lambda: torch_jsvd.svd_ex(Z)), ("svd", lambda: torch_jsvd.svd(Z)),
                     ("svd_ex full", lambda: torch_jsvd.svd_ex(Z[:, :2000], full_matrices=True)),
                     ("list", lambda: torch_jsvd.svd_varlen([Z[0], Z[0, :5, :3]]))):
        try:
            fn()
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001
            fails.append(f"rank-one {rows}x{q} {what}: {str(e)[:80]}")
print(f"{n} shapes near the shared-memory limit ({limit} bytes) in {time.time() - t0:.0f} s; failures: {len(fails)}")
for f in fails[:20]:
    print("  ", f)
sys.exit(1 if fails else 0)
