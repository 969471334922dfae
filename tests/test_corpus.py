"""Structured, sparse, rank-deficient and badly scaled matrices (tests/corpus.py): every one converges
within 2 times the sweeps of a Gaussian matrix of its shape, comes back finite, and meets the accuracy
goals: reconstruction and orthogonality of U and V <= 10 max(m, n) eps, singular values within
10 max(m, n) eps S_max of float64 LAPACK's.

CI runs sizes up to 64 on the CPU; the GPU script runs the full corpus (JSVD_CORPUS=full: sizes up to
1024, every level the planner picks) on CPU and CUDA.
"""

import functools
import os

import pytest
import torch

import torch_jsvd
from corpus import FAMILIES, build, shapes
from jsvd_testutils import assert_valid_svd, bound, subnormal_factor

FULL = os.environ.get("JSVD_CORPUS") == "full"
SIZES = [2, 3, 7, 16, 33, 64, 130, 257, 512, 1024] if FULL else [2, 3, 7, 16, 33, 64]
DTYPES = [torch.float32, torch.float64]
CASES = [(fam, m, n) for fam in FAMILIES for (m, n) in shapes(SIZES)]


@functools.lru_cache(maxsize=None)
def gaussian_sweeps(m, n, dtype, device):
    """Sweeps the engine takes on a Gaussian matrix of this shape (the largest of three)."""
    g = torch.Generator().manual_seed(m * 100003 + n)
    A = torch.randn(3, m, n, generator=g, dtype=torch.float64).to(dtype=dtype, device=device)
    info = torch_jsvd.svd_ex(A, full_matrices=False).info
    return int(info.max())


def check_matrix(A, name, full_matrices=False):
    m, n = A.shape[-2:]
    U, S, Vh, info = torch_jsvd.svd_ex(A, full_matrices=full_matrices)
    info = int(info.min()) if info.numel() else 0
    assert info >= 0, f"{name}: info {info}"
    # (CUDA float64 from 16 columns needs the QR first for this: docs/robustness.md, "Sweeps")
    x = 2.0
    limit = int(x * gaussian_sweeps(m, n, A.dtype, A.device.type))
    assert info <= max(limit, 6), f"{name}: {info} sweeps, Gaussian x{x} = {limit}"
    for t in (U, S, Vh):
        assert torch.isfinite(t).all(), f"{name}: non-finite output with info {info}"
    factor = subnormal_factor(A)
    assert_valid_svd(A, U, S, Vh, full_matrices, factor=factor)
    ref = torch.linalg.svdvals(A.double().cpu())

    def s_error(S):
        return ((S.double().cpu() - ref).abs().max() / ref.max().clamp_min(torch.finfo(torch.float64).tiny)).item()

    assert s_error(S) <= bound(m, n, A.dtype, factor), f"{name}: S error {s_error(S):.3g}"
    # The same goals through svd and svdvals, which raise where svd_ex reports and whose routes differ: one
    # matrix takes the Gram eigenvectors' start (the CPU engine's from 40 columns, CUDA's syevd from 256),
    # whose converged test on X decides whether the Jacobi on X runs at all (core.h, converged_start_x32).
    U2, S2, Vh2 = torch_jsvd.svd(A, full_matrices=full_matrices)
    assert_valid_svd(A, U2, S2, Vh2, full_matrices, factor=factor)
    assert s_error(S2) <= bound(m, n, A.dtype, factor), f"{name}: svd's S error {s_error(S2):.3g}"
    S3 = torch_jsvd.svdvals(A)
    assert s_error(S3) <= bound(m, n, A.dtype, factor), f"{name}: svdvals' error {s_error(S3):.3g}"
    return info


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("fam,m,n", CASES, ids=[f"{f}-{m}x{n}" for f, m, n in CASES])
def test_corpus_matrix(device, dtype, fam, m, n):
    A = build(fam, m, n, dtype)
    if A is None:
        pytest.skip("family has no such shape")
    check_matrix(A.to(device), f"{fam}/{m}x{n}")


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("m,n", [(16, 16), (64, 64), (33, 64)] + ([(512, 512), (300, 900)] if FULL else []))
def test_corpus_batch(device, dtype, m, n):
    # every family of one shape in one batch: one hard matrix must not spoil the others
    mats = [A for A in (build(f, m, n, dtype) for f in FAMILIES) if A is not None]
    A = torch.stack(mats).to(device)
    U, S, Vh, info = torch_jsvd.svd_ex(A, full_matrices=True)
    assert (info >= 0).all(), info
    assert_valid_svd(A, U, S, Vh, full_matrices=True)
    # and through svd, whose plan may differ, the families repeated to 100 matrices (on CUDA, 100 512²
    # ones start from the Gram eigenvectors by syevBatched: kernels/precondition/eigh_precondition.h)
    A = A.repeat(-(-100 // len(mats)), 1, 1)
    U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
    assert_valid_svd(A, U, S, Vh, full_matrices=False)


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
def test_corpus_varlen(device, dtype):
    sizes = [2, 7, 33, 64] + ([257, 512] if FULL else [])
    # (not the subnormal family: its S rounds to the subnormal grid, allowed for in test_corpus_matrix)
    mats = [A for fam in FAMILIES if fam != "subnormal" for (m, n) in shapes(sizes)
            if (A := build(fam, m, n, dtype)) is not None]
    mats = [A.to(device) for A in mats]
    Us, Ss, Vhs = torch_jsvd.svd_varlen(mats, full_matrices=False)
    for A, U, S, Vh in zip(mats, Us, Ss, Vhs):
        assert_valid_svd(A, U, S, Vh, False, check_strides=False)
