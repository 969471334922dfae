"""How the blocked level converges, sweep by sweep: for max_sweeps = k = 1, 2, ..., the largest
|u_i^T u_j| of U's columns (U = A's rotated columns, normalised: the off-diagonal the next sweep
meets), ||U^T U - I||_F, ||V^T V - I||_F and the singular values' error against float64.
Usage: conv_trajectory.py 4x512x512 [...]"""
import sys

import torch

import torch_jsvd

for case in sys.argv[1:]:
    b, m, n = (int(v) for v in case.split("x"))
    A = torch.randn(b, m, n, device="cuda", generator=torch.Generator(device="cuda").manual_seed(0))
    ref = torch.linalg.svdvals(A.double())
    full = int(torch_jsvd.svd_ex(A, full_matrices=False)[3].max().item())
    print(f"{case}: {full} sweeps", flush=True)
    for k in range(1, full + 1):
        U, S, Vh, info = torch_jsvd.svd_ex(A, full_matrices=False, max_sweeps=k)
        Ud, Vd = U.double(), Vh.double().mT
        eye = torch.eye(U.shape[-1], dtype=torch.float64, device="cuda")
        G = Ud.mT @ Ud
        off = (G - torch.diag_embed(torch.diagonal(G, dim1=-2, dim2=-1))).abs().amax().item()
        orth_u = (G - eye).norm(dim=(-2, -1)).amax().item()
        orth_v = (Vd.mT @ Vd - eye).norm(dim=(-2, -1)).amax().item()
        serr = ((S.double() - ref).abs().amax(-1) / ref.amax(-1)).amax().item()
        print(f"  sweep {k:2d}: max|u_i^T u_j| {off:.2e}  orthU {orth_u:.2e}  orthV {orth_v:.2e}  S err {serr:.1e}  "
              f"converged {int((info >= 0).sum())}/{b}", flush=True)
