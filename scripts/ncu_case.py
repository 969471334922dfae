"""One torch_jsvd.svd call on a BxMxN float32 batch, for ncu. Usage: python scripts/ncu_case.py 200x128x128"""
import sys

import torch

import torch_jsvd

b, m, n = (int(v) for v in sys.argv[1].split("x"))
A = torch.randn(b, m, n, device="cuda")
torch_jsvd.svd(A, full_matrices=False)
torch.cuda.synchronize()
