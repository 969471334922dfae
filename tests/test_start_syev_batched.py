"""Batches whose Gram eigenvectors come from cuSOLVER's syevBatched (kernels/precondition/eigh_precondition.h,
syev_batched.cpp): float32 and float64 batches of 65 to 128 columns (tall or wide) and near-square ones from
256 columns. Checked: the plan's rule, every output property and S against LAPACK on Gaussian, rank-deficient,
zero, graded, two-equal-column and scaled members, float64's declined batches solved exactly as without the
start (a child process with JSVD_EIGH=0), and non-finite members reported. The other routes of the start:
test_eigh_precondition.py. Skipped without a CUDA device.
"""

import pytest
import torch

import torch_jsvd
from jsvd_testutils import (SYEV_ROUTE, assert_valid_svd, bound, random_rank, random_spectrum, reference_svdvals,
                            run_child, start_v)

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_plan_mid_columns(dtype):
    """Batches of 65 to 128 columns, beyond the engine's Gram Jacobi: V0 from syevBatched from 5 matrices,
    float32 of at least 2 rows a column (wide ones on their transpose), float64 near-square ones too (its
    squares of 128 columns solved in float32: evd32_route_on), float32's near-square ones of 1.4 rows a
    column from 40 matrices, squarer ones from 200 (in float32 where X is tested: test_start_evd32.py), not
    fewer; nor from 129 columns of tall ones, nor fewer matrices (but up to 4 tall ones:
    test_start_few_tall.py)."""
    syevb = lambda shapes: (start_v(shapes, dtype)[0] or {}).get("solver") in SYEV_ROUTE
    f32 = dtype == torch.float32
    assert syevb([(300, 100)] * 5)
    assert syevb([(1000, 128)] * 200) and syevb([(65, 200)] * 40) and syevb([(130, 65)] * 10)
    assert syevb([(2048, 128)] * 10) and syevb([(2049, 128)] * 10) and syevb([(8192, 100)] * 20)
    assert syevb([(129, 65)] * 10) == syevb([(100, 100)] * 39) == syevb([(65, 120)] * 39) == (not f32)
    assert syevb([(100, 100)] * 199) == syevb([(128, 100)] * 199) == (not f32)  # (squarer than 1.4: from 200)
    assert syevb([(100, 100)] * 200) and syevb([(65, 120)] * 40) and syevb([(129, 65)] * 40)
    # (squares: the same with full_matrices, which changes nothing for them; near-square float32 ones take
    # the route without full_matrices only: "null" with it)
    square = start_v([(128, 128)] * 200, dtype)[0]
    assert square["gram_dtype"] == "float32" and "gram_dtype_full_matrices" not in square
    assert ("gram_dtype_full_matrices" in start_v([(160, 112)] * 200, dtype)[0]) == f32
    assert start_v([(128, 128)] * 4, dtype) == [None] * 4
    assert start_v([(300, 100)] * 4, dtype)[0]["solver"] == "torch.linalg.eigh"  # (few tall: syevd)
    assert start_v([(180, 100)] * 4, dtype) == [None] * 4
    assert start_v([(1000, 129)] * 100, dtype) == [None] * 100


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("m,n,full", [(300, 256, False), (256, 300, True), (384, 384, False), (300, 100, False),
                                    (77, 300, True), (2100, 100, False)])
def test_batches_by_syev_batched(dtype, m, n, full):
    """Batches whose Gram eigenvectors come from cuSOLVER's syevBatched (near-square ones from 256 columns;
    tall or wide ones of 65 to 128 columns, beyond 2048 rows with the QR path on X): every output property
    and S against LAPACK on Gaussian, rank-deficient, zero, graded (columns over 3 decades), two-equal-column
    and scaled (1e-30, 1e30) members; svdvals alike; a NaN raises. (float64's rank-deficient member
    declines its batch: test_batches_by_syev_batched_declined has float64's taken start.)"""
    g = torch.Generator().manual_seed(m + n)
    k = min(m, n)
    batch = 40 if dtype == torch.float64 else 100  # (the smallest batches that take it from 256 to 767 columns)
    A = torch.randn(batch, m, n, generator=g, dtype=torch.float64)
    A[1] = random_rank((m, n), k // 3)
    A[2] = 0
    A[3] *= torch.logspace(0, -3, n, dtype=torch.float64)
    A[4, :, 1] = A[4, :, 0]
    A[5] *= 1e-30
    A[6] *= 1e30
    A = A.to(dtype).cuda()
    assert start_v([(m, n)] * batch, dtype)[0]["solver"] in SYEV_ROUTE
    U, S, Vh = torch_jsvd.svd(A, full_matrices=full)
    assert_valid_svd(A, U, S, Vh, full)
    ref = reference_svdvals(A)
    err = lambda S: ((S.double() - ref).abs().amax(-1) / ref[..., 0].clamp_min(1e-300)).max()
    assert err(S) <= bound(m, n, dtype)
    assert err(torch_jsvd.svdvals(A)) <= bound(m, n, dtype)
    if dtype == torch.float64:  # (graded within the start's ratio: small singular values relatively accurate)
        cpu = torch_jsvd.svdvals(A[3].cpu()).double()
        assert ((S[3].cpu() - cpu).abs() / cpu).max() <= 1e-10
    A[7, 3, 3] = float("nan")
    with pytest.raises(torch.linalg.LinAlgError):
        torch_jsvd.svd(A)


@pytest.mark.parametrize("member", ["graded_columns", "ill_conditioned", "rank_deficient", "none"])
@pytest.mark.parametrize("n", [256, 100])
def test_batches_by_syev_batched_declined(tmp_path, member, n):
    """A float64 batch with a member whose columns are graded beyond the start's ratio (12 decades; declined
    before syevBatched), or whose singular values span 12 decades, or of half rank (declined by the Cholesky
    pivots before it, or by its eigenvalues after it), is solved exactly as with the start switched off
    (JSVD_EIGH=0, in a child process); the graded member keeps its small singular values relatively
    accurate. A batch of Gaussian members takes the start (other bits), and its S agrees with LAPACK's."""
    g = torch.Generator().manual_seed(6)
    A = torch.randn(40, 300, n, generator=g, dtype=torch.float64)
    if member == "graded_columns":
        A[2] *= torch.logspace(0, -12, n, dtype=torch.float64)[torch.randperm(n, generator=g)]
    elif member == "ill_conditioned":
        A[2] = random_spectrum(300, n, 12, g)
    elif member == "rank_deficient":
        A[2] = random_rank((300, n), n // 2)
    assert start_v([(300, n)] * 40, torch.float64)[0]["solver"] in SYEV_ROUTE
    torch.save(A, tmp_path / "A.pt")
    code = f"""
        import os, torch, torch_jsvd
        A = torch.load({str(tmp_path / "A.pt")!r}).cuda()
        torch.save(torch_jsvd.svd(A, full_matrices=False)[1].cpu(), os.environ["OUT"])
    """
    run_child(code, JSVD_TUNER="0", OUT=str(tmp_path / "S.pt"))
    run_child(code, JSVD_TUNER="0", JSVD_EIGH="0", OUT=str(tmp_path / "S_off.pt"))
    S, S_off = torch.load(tmp_path / "S.pt"), torch.load(tmp_path / "S_off.pt")
    assert torch.equal(S, S_off) == (member != "none")
    ref = torch.linalg.svdvals(A)
    assert ((S - ref).abs().amax(-1) / ref[..., 0]).max() <= bound(300, n, torch.float64)
    cpu = torch_jsvd.svdvals(A[2]).double()
    if member == "graded_columns":  # (the other members' small singular values are not the data's to keep)
        assert ((S[2] - cpu).abs() / cpu).max() <= 1e-10
    else:
        assert (S[2] - cpu).abs().max() <= 1e-13 * cpu[0]


@pytest.mark.parametrize("dtype,shape", [(torch.float32, (100, 300, 272)), (torch.float32, (37, 300, 77)),
                                         (torch.float32, (31, 300, 77)), (torch.float32, (40, 160, 112)),
                                         (torch.float64, (40, 300, 272))],
                         ids=str)
@pytest.mark.parametrize("bad", ["nan", "inf", "overflow"])
def test_non_finite_member_on_syev_batched_route(dtype, shape, bad):
    """On syevBatched's route a member with a NaN, an Inf, or entries whose Gram matrix would overflow,
    declines the batch (start_checks): svd raises for the non-finite member (svd_ex: its info -2, the others
    converged); with the overflowing one every member comes out valid, S against LAPACK's."""
    assert start_v([shape[1:]] * shape[0], dtype)[0]["solver"] in SYEV_ROUTE
    g = torch.Generator(device="cuda").manual_seed(11)
    A = torch.randn(shape, device="cuda", dtype=dtype, generator=g)
    if bad == "overflow":
        A[3] *= 1e36 if dtype == torch.float32 else 1e200
    else:
        A[3, 5, 7] = float(bad)
    if bad != "overflow":
        with pytest.raises(torch.linalg.LinAlgError):
            torch_jsvd.svd(A)
        *_, info = torch_jsvd.svd_ex(A)
        assert int(info[3]) == -2 and bool((info[torch.arange(shape[0]) != 3] > 0).all())
        return
    U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
    assert_valid_svd(A, U, S, Vh, False)
    ref = reference_svdvals(A)
    assert ((S.double() - ref).abs().amax(-1) / ref[..., 0]).max() <= bound(*shape[1:], dtype)
