"""High relative accuracy: column-graded float64 matrices A = B diag(d) with kappa(A) up to 1e12.

One-sided Jacobi determines every singular value of such a matrix to a relative
error of about eps * kappa(B) (Demmel & Veselic), however small it is; a
bidiagonalising SVD only guarantees eps * S_max absolutely. The reference is
computed by mpmath at 40 digits from the exact float64 entries, on both devices; on CUDA also larger
matrices, against the CPU engine.
"""

import math

import mpmath
import pytest
import torch

import torch_jsvd


def _mp_svdvals(A):
    with mpmath.workdps(40):
        M = mpmath.matrix([[mpmath.mpf(float(x)) for x in row] for row in A.tolist()])
        s = mpmath.svd_r(M, compute_uv=False)
        return torch.tensor(sorted((float(v) for v in s), reverse=True), dtype=torch.float64)


def _graded(m, n, kappa, wide=False):
    B = torch.randn(m, n, dtype=torch.float64)
    B = B / torch.linalg.vector_norm(B, dim=0)  # unit columns: kappa(B) stays small
    d = torch.logspace(0, -torch.log10(torch.tensor(kappa)).item(), n, dtype=torch.float64)
    d = d[torch.randperm(n)]  # the grading need not be ordered
    A = B * d
    return (A.mT.contiguous(), B.mT) if wide else (A, B)


@pytest.mark.parametrize("kappa", [1e4, 1e8, 1e12])
@pytest.mark.parametrize("m,n,wide", [(12, 8, False), (20, 10, False), (16, 16, False), (14, 9, True)])
def test_relative_accuracy(device, kappa, m, n, wide):
    A, B = _graded(m, n, kappa, wide)
    ref = _mp_svdvals(A)
    assert ref[0] / ref[-1] > kappa / 100  # really that ill-conditioned
    S = torch_jsvd.svdvals(A.to(device)).cpu()
    U, S2, Vh = torch_jsvd.svd(A.to(device), False)
    kB = torch.linalg.cond(B).item()
    eps = torch.finfo(torch.float64).eps
    tol = 10 * max(m, n) * eps * kB
    # The engines' contract (README, "Convergence"): relative accuracy above the negligible column norm,
    # sqrt(rows) eps max|a_ij|; a singular value below it (an unlucky B: kappa(B) 2.6e4 put one at 3.6e-16,
    # JSVD_SEED=420328232, CPU) is kept to absolute accuracy only (docs/robustness.md).
    keep = ref > 2 * math.sqrt(max(m, n)) * eps * A.abs().max().item()
    for got in (S, S2.cpu()):
        err = (got - ref).abs()
        rel = (err[keep] / ref[keep]).max().item()
        assert rel <= tol, f"relative error {rel:.3g} > {tol:.3g}"
        assert err.max().item() <= 10 * max(m, n) * eps * ref[0].item()


def test_batch_of_graded(device):
    mats = [_graded(10, 6, 1e10)[0] for _ in range(4)]
    A = torch.stack(mats)
    S = torch_jsvd.svdvals(A.to(device)).cpu()
    for i, Ai in enumerate(mats):
        ref = _mp_svdvals(Ai)
        assert ((S[i] - ref).abs() / ref).max().item() <= 1e-12


@pytest.mark.parametrize("m,n", [(60, 40), (40, 60)])
def test_graded_rows_relative_accuracy(device, m, n):
    """Graded rows of a tall matrix, or graded columns of a wide one: both reach the engine (which works on
    the tall orientation) as graded rows. A Householder QR of such a matrix is backward stable only
    column by column, so the CUDA engine's QR preconditioning (float64 from 32 columns) sorts the rows
    first; without that the smallest singular values of a 60 x 40 matrix were off by 4e-10."""
    g = torch.Generator().manual_seed(m * n)
    B = torch.randn(m, n, dtype=torch.float64, generator=g)
    if m > n:
        B = B / torch.linalg.vector_norm(B, dim=1, keepdim=True)
        A = torch.logspace(0, -12, m, dtype=torch.float64)[torch.randperm(m, generator=g)][:, None] * B
    else:
        B = B / torch.linalg.vector_norm(B, dim=0)
        A = B * torch.logspace(0, -12, n, dtype=torch.float64)[torch.randperm(n, generator=g)]
    ref = _mp_svdvals(A)
    assert ref[0] / ref[-1] > 1e8  # (graded over 1e12, of which the n largest rows or columns count)
    tol = 10 * max(m, n) * torch.finfo(torch.float64).eps * torch.linalg.cond(B).item()
    for S in (torch_jsvd.svdvals(A.to(device)), torch_jsvd.svd(A.to(device))[1]):
        rel = ((S.cpu() - ref).abs() / ref).max().item()
        assert rel <= tol, f"relative error {rel:.3g} > {tol:.3g}"


@pytest.mark.cuda
@pytest.mark.parametrize("m,n,rows", [(16, 16, False), (64, 48, False), (300, 200, False), (2048, 16, False),
                                      (64, 48, True), (140, 130, True), (300, 200, True), (200, 300, False)])
def test_relative_accuracy_beyond_mpmath_sizes(m, n, rows):
    """Column-graded (or, rows=True, row-graded) float64, kappa up to 1e12, at sizes mpmath is too slow
    for (and on every level of the CUDA engine, with and without its QR): every singular value to high
    relative accuracy. The reference is the CPU engine, checked against mpmath above, so this runs on
    CUDA alone (skipped without a device)."""

    g = torch.Generator().manual_seed(torch.randint(0, 2**31, ()).item())
    B = torch.randn(2, m, n, dtype=torch.float64, generator=g)
    d = [torch.logspace(0, -k, m if rows else n, dtype=torch.float64) for k in (12, 8)]
    A = torch.stack([d[i][:, None] * B[i] if rows else B[i] * d[i] for i in range(2)])
    ref = torch_jsvd.svdvals(A)
    S = torch_jsvd.svdvals(A.cuda()).cpu()
    rel = ((S - ref).abs() / ref).max()
    # Both engines' relative errors grow with the condition number of the ungraded factor B (a 16 x 16
    # Gaussian's reaches the hundreds: 4e-12 against a bound without it, H100 at b961702), as above.
    tol = 100 * max(m, n) * torch.finfo(torch.float64).eps * max(1.0, torch.linalg.cond(B).max().item() / 10)
    assert rel <= tol, (rel, tol)
