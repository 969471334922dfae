"""One torch_jsvd.svd call on a seeded random CUDA batch, for Nsight Compute (ncu) to pick kernels from.

Usage: python scripts/ncu_case.py 200x256x256[:float64]
Under ncu, select the launch; e.g. one queued block-pair sweep of the blocked level (the 5th svd_smem_kernel
launch of the call) with its occupancy and stall reasons, as one command line:
  ncu --kernel-name regex:svd_smem_kernel --launch-skip 4 --launch-count 1 --section SpeedOfLight
      --section Occupancy --section WarpStateStats --section SchedulerStats python scripts/ncu_case.py 200x256x256
(--section SourceCounters: instructions and stall samples per SASS instruction.)
"""
import sys

import torch

import torch_jsvd

shape, *dt = sys.argv[1].split(":")
b, m, n = (int(v) for v in shape.split("x"))
A = torch.randn(b, m, n, device="cuda", dtype=getattr(torch, dt[0] if dt else "float32"),
                generator=torch.Generator(device="cuda").manual_seed(0))
torch_jsvd.svd(A, full_matrices=False)
torch.cuda.synchronize()
