"""The Gram eigenvectors' start for a few tall matrices (kernels/precondition/eigh_precondition.h,
eigh_few_tall): up to 4 matrices of 16 to 255 columns and at least 2 rows a column take V0 from syevd (the
engine's Gram Jacobi to 64 columns), and where X = M V0 fails its converged test, the Jacobi on X runs by
the QR path (start_x_by_qr), not one block a matrix over X's rows; so do batches beyond 2048 rows of fewer
matrices than columns. Beyond 2048 rows and 8 rows a column, CholeskyQR2 on X comes first (start_cholqr.h;
not for full_matrices), and a batch it declines (a rank-deficient or zero member) takes that route. Checked: the plan, and every output property with S against LAPACK on Gaussian
batches (X passes its test) and on batches with an ill-conditioned member (X fails it), rank-deficient,
zero, graded and scaled members, tall and wide, full_matrices, svdvals, and a NaN raising.
Skipped without a CUDA device.
"""

import pytest
import torch

import torch_jsvd
from jsvd_testutils import assert_valid_svd, bound, random_rank, random_spectrum, reference_svdvals, start_v

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

DTYPES = [torch.float32, torch.float64]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_plan_few_tall(dtype):
    for shapes, solver in [([(3000, 200)] * 3, "torch.linalg.eigh"), ([(512, 255)] * 4, "torch.linalg.eigh"),
                           ([(100, 2500)] * 2, "torch.linalg.eigh"), ([(400000, 16)], "jsvd"),
                           ([(1000, 16)], "jsvd"), ([(11008, 128)], "torch.linalg.eigh")]:
        sv = start_v(shapes, dtype)
        assert all(s["solver"].startswith(solver) and s["jacobi_on_x"] == "qr_path" for s in sv), (shapes, sv)
    assert start_v([(399, 200)], dtype) == [None]  # fewer than 2 rows a column
    assert start_v([(900, 16)], dtype) == [None]  # too little work
    assert start_v([(3000, 200)] * 5, dtype) == [None] * 5  # more than 4: the batches' rules
    assert start_v([(2000, 256)], dtype)[0].get("jacobi_on_x") is None  # (from 256 columns: the Jacobi on X)
    # Beyond 2048 rows, fewer matrices than columns run the Jacobi on X by the QR path (start_x_by_qr); float32
    # took the QR path without the start below cols / 2 matrices
    for shapes in ([(200000, 16)] * 7, [(100000, 64)] * 6, [(20000, 32)] * 8, [(3500, 64)] * 8):
        assert all(s is not None and s.get("jacobi_on_x") == "qr_path" for s in start_v(shapes, dtype)), shapes
    for shapes in ([(50000, 16)] * 20, [(20000, 32)] * 40, [(2000, 64)] * 8):
        assert all(s is None or s.get("jacobi_on_x") is None for s in start_v(shapes, dtype)), shapes
    # ... tall ones (2 rows a column) only: a large square's X keeps its own Jacobi (1x4096² float32 on the
    # QR path: 272 ms against 170, H200, stop 62)
    assert start_v([(11008, 4096)], dtype)[0]["jacobi_on_x"] == "qr_path"
    for shapes in ([(4096, 4096)], [(3000, 2000)], [(8192, 8192)]):
        assert start_v(shapes, dtype)[0].get("jacobi_on_x") is None, shapes
    # CholeskyQR2 on X (start_cholqr.h) beyond 2048 rows and 8 rows a column, by either route on X
    for shapes in ([(200000, 16)] * 7, [(50000, 16)] * 20, [(3000, 200)], [(2500, 100)] * 2):
        assert all(s["x_qr"].startswith("cholesky_qr2") for s in start_v(shapes, dtype)), shapes
    for shapes in ([(1000, 16)], [(11008, 1400)], [(2000, 64)] * 8, [(3000, 400)]):
        assert all(s is None or "x_qr" not in s for s in start_v(shapes, dtype)), shapes


def _batch(m, n, kind, seed, b=4):
    """b members: "gauss" (X passes its test), "hard" (1e6-conditioned, rank n/2, zero, then Gaussian),
    "illcond" (all 1e6-conditioned, some scaled by 1e-30 and 1e30), "scaled" (1e-30, 1e30 and column-graded
    over three decades, then Gaussian); float64 entries, wide ones transposed."""
    g = torch.Generator().manual_seed(seed)
    p, q = max(m, n), min(m, n)
    A = torch.randn(b, p, q, generator=g, dtype=torch.float64)
    if kind == "hard":
        A[0] = random_spectrum(p, q, 6, g)
        A[1] = random_rank((p, q), q // 2)
        A[2] = 0
    elif kind == "illcond":  # (every member: X fails its test, and CholeskyQR2 on X takes the batch)
        for k in range(b):
            A[k] = random_spectrum(p, q, 6, g) * [1.0, 1e-30, 1e30, 1.0][k % 4]
    elif kind == "scaled":
        A[0] *= 1e-30
        A[1] *= 1e30
        A[2] *= torch.logspace(0, -3, q, dtype=torch.float64)
    return A if m >= n else A.mT


def _check(A, m, n, dtype):
    """svd's every output property (full_matrices too up to 5000 rows: checking a 20000² U takes 3 GiB a
    copy in float64, too much beside the suite's other workers), and svd's and svdvals' S against LAPACK."""
    ref = reference_svdvals(A)
    err = lambda S: ((S.double() - ref).abs().amax(-1) / ref[..., 0].clamp_min(1e-300)).max()
    for full in (False, True) if max(m, n) <= 5000 else (False,):
        U, S, Vh = torch_jsvd.svd(A, full_matrices=full)
        assert_valid_svd(A, U, S, Vh, full)
        assert err(S) <= bound(m, n, dtype)
    assert err(torch_jsvd.svdvals(A)) <= bound(m, n, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("m,n", [(3000, 200), (400, 200), (1000, 16), (20000, 64), (100, 2500)])
@pytest.mark.parametrize("kind", ["gauss", "hard", "illcond", "scaled"])
def test_few_tall(dtype, m, n, kind):
    A = _batch(m, n, kind, seed=m + n).to(dtype).cuda()
    assert start_v([(m, n)] * 4, dtype)[0] is not None
    _check(A, m, n, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_few_tall_non_finite(dtype):
    A = _batch(3000, 200, "gauss", seed=5).to(dtype).cuda()
    A[1, 7, 3] = float("nan")
    with pytest.raises(torch.linalg.LinAlgError):
        torch_jsvd.svd(A)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("b,m,n", [(8, 3500, 64), (8, 20000, 32), (6, 64, 5000)])
@pytest.mark.parametrize("kind", ["gauss", "hard", "illcond", "scaled"])
def test_long_batch(dtype, b, m, n, kind):
    """Batches of long matrices, fewer than their columns: the start, and the Jacobi on X by the QR path."""
    A = _batch(m, n, kind, seed=b + m + n, b=b).to(dtype).cuda()
    assert all(s["jacobi_on_x"] == "qr_path" for s in start_v([(m, n)] * b, dtype))
    _check(A, m, n, dtype)
