"""How far the eigh start's X = M V0 is from float32's converged test (csrc/core.h, converged_start_x32), per matrix.

Usage: python scripts/start_margin.py 1x4096x4096 [12x768x768 1x300x300:cond=1e5 ...] [--seeds 0 1 2] [--device cuda]
                                     [--route]
For each case and seed: M float32 (Gaussian, or ":cond=C": random orthogonal factors and singular values from
1 to 1/C), V0 the eigenvectors of the float64 Gram matrix by torch.linalg.eigh on --device (cuSOLVER's syevd
on cuda, LAPACK on cpu), X = M V0 and C = X^T X in float64, then per matrix: X's largest cosine over the
test's bound (tol - 1.01 eps32, tol = sqrt(rows) eps32), the least C_jj over col_min (since stop 74,
((rows + cols) eps64 / tol)^2 ||M||_F^2) and over float64's col_min (16 (rows + cols) eps64 ||M||_F^2, the
bound before it), and the number of pairs above the bound. A matrix passes where the first ratio is <= 1 and
the second >= 1. A single matrix's V0 is the syevd route's; a batch's comes from torch's own eigh, not
the route's syevBatched. --route (CUDA) also runs torch_jsvd.svd on the same input under torch.profiler and
names what ran: the converged outputs from X (`converged_outputs_kernel`), the Jacobi (its levels' kernels),
or neither (no start).
"""
import argparse

import torch

EPS32, EPS64 = torch.finfo(torch.float32).eps, torch.finfo(torch.float64).eps


def make_input(case, seed, device):
    shape, *mode = case.split(":")
    b, m, n = (int(v) for v in shape.split("x"))
    g = torch.Generator().manual_seed(seed)
    cond = [float(x[5:]) for x in mode if x.startswith("cond=")]
    if not cond:
        return torch.randn(b, m, n, generator=g).to(device)
    k = min(m, n)
    Q1 = torch.linalg.qr(torch.randn(b, m, k, generator=g, dtype=torch.float64))[0]
    Q2 = torch.linalg.qr(torch.randn(b, n, k, generator=g, dtype=torch.float64))[0]
    s = torch.logspace(0, -torch.log10(torch.tensor(cond[0])).item(), k, dtype=torch.float64)
    return ((Q1 * s) @ Q2.mT).float().to(device)


def margins(M):
    """Per matrix: (largest cosine / bound, least C_jj / col_min, least C_jj / float64's col_min, pairs above)."""
    Mt = M.mT if M.shape[-2] < M.shape[-1] else M  # (the engines work on the tall orientation)
    p, q = Mt.shape[-2:]
    Md = Mt.double()
    G = Md.mT @ Md
    V0 = torch.linalg.eigh(G)[1].flip(-1)
    X = Md @ V0
    C = X.mT @ X
    d = C.diagonal(dim1=-2, dim2=-1)
    fro = G.diagonal(dim1=-2, dim2=-1).sum(-1)
    tol = p ** 0.5 * EPS32
    cos = (C.abs() / (d.unsqueeze(-1) * d.unsqueeze(-2)).sqrt()).triu(1)
    bound = tol - 1.01 * EPS32
    col_min = fro * ((p + q) * EPS64 / tol) ** 2
    col_min64 = 16 * (p + q) * EPS64 * fro
    dmin = d.amin(-1)
    return (cos.amax((-2, -1)) / bound, dmin / col_min, dmin / col_min64, (cos > bound).sum((-2, -1)))


JACOBI_KERNELS = ("svd_smem_kernel", "svd_warp_kernel", "gemm_level_kernel", "gram_evd_kernel", "pair_evd_kernel")


def route(M):
    """What torch_jsvd.svd(M) ran after the start: 'from X', 'jacobi' or both."""
    import torch_jsvd
    from torch.profiler import ProfilerActivity, profile

    torch_jsvd.svd(M, full_matrices=False)  # (warm-up: the tuner, syevBatched's graph)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        torch_jsvd.svd(M, full_matrices=False)
        torch.cuda.synchronize()
    names = [e.name for e in prof.events()]
    ran = [what for what, keys in (("from X", ("converged_outputs_kernel",)), ("jacobi", JACOBI_KERNELS))
           if any(k in n for n in names for k in keys)]
    return " + ".join(ran) or "neither"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="+")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--route", action="store_true", help="also run torch_jsvd.svd and name its route (CUDA)")
    args = ap.parse_args()
    for case in args.cases:
        for seed in args.seeds:
            M = make_input(case, seed, args.device)
            c, col, col64, above = margins(M)
            worst = c.argmax().item()
            passing = ((c <= 1) & (col >= 1)).sum().item()
            print(f"{case:24s} seed {seed}: worst cosine/bound {c.max().item():.2e} (matrix {worst}), "
                  f"least C_jj/col_min {col.min().item():.2e} (float64's {col64.min().item():.2e}), "
                  f"pairs above {above.sum().item()}, matrices passing {passing}/{c.numel()}"
                  + (f"; torch_jsvd.svd: {route(M)}" if args.route and M.is_cuda else ""))


if __name__ == "__main__":
    main()
