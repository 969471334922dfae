"""Forward results of torch_jsvd.svd / svd_ex / svdvals: accuracy, shapes, dtypes, layouts, info."""

import warnings

import pytest
import torch

import torch_jsvd
from jsvd_testutils import assert_valid_svd, bound, orthogonality_error, random_rank

SHAPES = [(1, 1), (5, 3), (3, 5), (8, 8), (33, 17), (17, 33), (64, 64), (4, 7, 5), (2, 3, 6, 6), (100, 2)]
DTYPES = [torch.float32, torch.float64]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("full_matrices", [True, False])
def test_random(device, dtype, shape, full_matrices):
    A = torch.randn(shape, dtype=dtype, device=device)
    A0 = A.clone()
    U, S, Vh = torch_jsvd.svd(A, full_matrices)
    assert torch.equal(A, A0), "input was modified"
    assert_valid_svd(A, U, S, Vh, full_matrices)
    # Same singular values as LAPACK / cuSOLVER, to the accuracy of both (absolute, as S_max scales errors).
    ref = torch.linalg.svdvals(A.double())
    m, n = shape[-2:]
    assert ((S.double() - ref).abs() <= bound(m, n, dtype) * ref[..., :1]).all()


@pytest.mark.parametrize("shape", [(8, 64, 64), (4, 128, 128), (4, 200, 150), (4, 100, 300)], ids=str)
def test_float32_columns_orthogonal_to_working_precision_cpu(shape):
    # float32 rotations are applied down to eps while convergence is judged at tol = sqrt(rows) eps, so
    # the factor made of the converged, normalised columns (U; V for wide input, which the engine
    # transposes) is orthogonal to working precision, not just to tol. Measured on this engine: 0.1-0.3
    # max(m, n) eps; stopping the rotations at tol left it at 1.5-4.5 (benchmarks/RESULTS.md). The CUDA
    # engine does the same (kernels/common/jacobi_device.cuh, step_tolerances); its orthogonality at sizes up to
    # 1536 is in the GPU benchmark's table.
    *_, m, n = shape
    A = torch.randn(shape)
    U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
    from_columns = orthogonality_error(U) if m >= n else orthogonality_error(Vh, rows=True)
    assert from_columns.max().item() <= 0.75 * max(m, n) * torch.finfo(torch.float32).eps
    assert_valid_svd(A, U, S, Vh, full_matrices=False)


@pytest.mark.parametrize("dtype", DTYPES)
def test_matches_torch_factors_up_to_sign(device, dtype):
    # With distinct singular values the factors are unique up to the sign of each (u_i, v_i) pair.
    A = torch.randn(6, 9, 5, dtype=dtype, device=device)
    U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
    U2, S2, Vh2 = torch.linalg.svd(A, full_matrices=False)
    sign = torch.sign((U * U2).sum(-2))
    tol = 1e3 * torch.finfo(dtype).eps
    torch.testing.assert_close(U * sign.unsqueeze(-2), U2, atol=tol, rtol=0)
    torch.testing.assert_close(Vh * sign.unsqueeze(-1), Vh2, atol=tol, rtol=0)
    torch.testing.assert_close(S, S2, atol=tol * S2[..., :1].max().item(), rtol=0)


@pytest.mark.parametrize("full_matrices", [True, False])
@pytest.mark.parametrize("shape,rank", [((6, 4), 2), ((4, 6), 1), ((7, 7), 3), ((3, 9, 5), 4), ((5, 5), 0), ((8, 3), 0)],
                         ids=str)
def test_rank_deficient_and_zero(device, shape, rank, full_matrices):
    # U (and Vh) must stay orthonormal even where S == 0, including the completed full bases.
    A = random_rank(shape, rank, device=device) if rank else torch.zeros(shape, dtype=torch.float64, device=device)
    U, S, Vh = torch_jsvd.svd(A, full_matrices)
    assert_valid_svd(A, U, S, Vh, full_matrices)
    m, n = shape[-2:]
    smax = max(S.max().item(), 1.0)
    assert (S[..., rank:] <= bound(m, n, A.dtype) * smax).all()
    if rank:
        assert (S[..., rank - 1] > 1e-3).all()


def test_repeated_columns_and_tiny_values(device):
    A = torch.randn(10, 4, dtype=torch.float64, device=device)
    A[:, 2] = A[:, 0]  # exactly dependent columns
    A[:, 3] = 1e-200  # columns far below the others, not underflowing
    U, S, Vh = torch_jsvd.svd(A, True)
    assert_valid_svd(A, U, S, Vh, True)


@pytest.mark.parametrize("layout", ["transposed", "sliced", "expanded", "permuted_batch"])
def test_non_contiguous_inputs(device, layout):
    if layout == "transposed":
        A = torch.randn(4, 9, 6, device=device).mT
    elif layout == "sliced":
        A = torch.randn(4, 12, 14, device=device)[:, ::2, 1::3]
    elif layout == "expanded":
        A = torch.randn(1, 7, 5, device=device).expand(3, 7, 5)
    else:
        A = torch.randn(5, 3, 4, 6, device=device).permute(1, 0, 2, 3)
    assert not A.is_contiguous()
    for full in (True, False):
        U, S, Vh = torch_jsvd.svd(A, full)
        assert_valid_svd(A, U, S, Vh, full)
        Uc, Sc, Vhc = torch_jsvd.svd(A.contiguous(), full)
        torch.testing.assert_close(S, Sc, rtol=0, atol=0)
        torch.testing.assert_close(U, Uc, rtol=0, atol=0)


@pytest.mark.parametrize("shape", [(5, 16, 16), (2, 3, 12, 20), (2, 40, 70), (1, 300, 300)], ids=str)
def test_input_unchanged(device, shape):
    """The CUDA warp level reads the caller's tensor in place (no packing copy);
    every level must leave it as it was."""
    A = torch.randn(*shape, device=device)
    A0 = A.clone()
    torch_jsvd.svd(A)
    torch_jsvd.svd_ex(A, compute_uv=False)
    torch_jsvd.svdvals(A)
    assert torch.equal(A, A0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape", [(6, 4), (4, 6), (2, 5, 5)], ids=str)
def test_half_precision(device, dtype, shape):
    # Computed in float32, returned in the input dtype.
    A = torch.randn(shape, device=device).to(dtype)
    U, S, Vh = torch_jsvd.svd(A, False)
    assert U.dtype == S.dtype == Vh.dtype == dtype
    assert_valid_svd(A, U, S, Vh, False)
    S32 = torch_jsvd.svdvals(A.float())
    # The float32 result rounded to dtype (within one rounding, should an engine not be bitwise reproducible).
    torch.testing.assert_close(S.float(), S32.to(dtype).float(), rtol=torch.finfo(dtype).eps, atol=0)
    assert torch_jsvd.svdvals(A).dtype == dtype
    assert torch_jsvd.svd_ex(A).info.dtype == torch.int32


@pytest.mark.parametrize("shape", [(3, 0), (0, 3), (0, 0), (2, 0, 3, 4), (2, 3, 0), (0, 5, 5)], ids=str)
@pytest.mark.parametrize("full_matrices", [True, False])
def test_size_zero_like_torch(device, shape, full_matrices):
    A = torch.randn(shape, device=device)
    U, S, Vh = torch_jsvd.svd(A, full_matrices)
    U2, S2, Vh2 = torch.linalg.svd(A, full_matrices=full_matrices)
    for a, b in ((U, U2), (S, S2), (Vh, Vh2)):
        assert a.shape == b.shape and a.dtype == b.dtype
        torch.testing.assert_close(a, b, rtol=0, atol=0)  # identities for the full bases
    assert torch_jsvd.svdvals(A).shape == S2.shape
    assert torch_jsvd.svd_ex(A, full_matrices).info.shape == shape[:-2]


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4)], ids=str)
def test_compute_uv_false(device, shape):
    # Like torch._linalg_svd(compute_uv=False): U and Vh are empty (0,) tensors.
    A = torch.randn(shape, dtype=torch.float64, device=device)
    U, S, Vh, info = torch_jsvd.svd_ex(A, compute_uv=False)
    assert U.shape == (0,) and Vh.shape == (0,)
    assert (info >= 0).all()
    torch.testing.assert_close(S, torch_jsvd.svd(A).S, rtol=0, atol=0)
    torch.testing.assert_close(torch_jsvd.svdvals(A), S, rtol=0, atol=0)
    U, S2, Vh = torch.ops.jsvd.svd(A, False, False)
    assert U.shape == (0,) and Vh.shape == (0,)


def test_results_are_named_tuples(device):
    A = torch.randn(4, 3, device=device)
    r = torch_jsvd.svd(A)
    assert r._fields == ("U", "S", "Vh") and r.U is r[0] and r.Vh is r[2]
    r = torch_jsvd.svd_ex(A)
    assert r._fields == ("U", "S", "Vh", "info")


@pytest.mark.parametrize("dtype", DTYPES)
def test_info_converged(device, dtype):
    A = torch.randn(3, 2, 20, 12, dtype=dtype, device=device)
    info = torch_jsvd.svd_ex(A).info
    assert info.shape == (3, 2) and info.dtype == torch.int32 and info.device == A.device
    assert (info >= 1).all() and (info <= torch_jsvd._ops.DEFAULT_MAX_SWEEPS).all()


def test_info_not_converged(device):
    # One sweep cannot diagonalise a random 48 x 48 matrix: the last iterate comes back with info = -1.
    A = torch.randn(2, 48, 48, dtype=torch.float64, device=device)
    U, S, Vh, info = torch_jsvd.svd_ex(A, max_sweeps=1)
    assert (info == torch_jsvd.INFO_NOT_CONVERGED).all()
    assert torch.isfinite(S).all()
    with pytest.raises(torch.linalg.LinAlgError, match="max_sweeps"):
        torch_jsvd.svd(A, max_sweeps=1)
    with pytest.raises(torch.linalg.LinAlgError, match="max_sweeps"):
        torch_jsvd.svdvals(A, max_sweeps=1)
    # Enough sweeps: converged.
    assert (torch_jsvd.svd_ex(A, max_sweeps=60).info >= 0).all()


def test_tol_option(device):
    A = torch.randn(30, 30, dtype=torch.float64, device=device)
    loose = torch_jsvd.svd_ex(A, tol=1e-3)
    tight = torch_jsvd.svd_ex(A)
    assert (loose.info >= 0).all() and (loose.info <= tight.info).all()
    assert_valid_svd(A, *tight[:3], True)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_input(device, bad):
    A = torch.randn(3, 5, 4, device=device)
    A[1, 2, 3] = bad
    U, S, Vh, info = torch_jsvd.svd_ex(A)
    assert info.tolist()[1] == torch_jsvd.INFO_NON_FINITE
    assert info[0] >= 0 and info[2] >= 0
    assert torch.isnan(S[1]).all()
    for i in (0, 2):  # the others are unaffected
        assert_valid_svd(A[i], U[i], S[i], Vh[i], True)
    for fn in (torch_jsvd.svd, torch_jsvd.svdvals):
        with pytest.raises(torch.linalg.LinAlgError, match="NaN or Inf"):
            fn(A)


# torch.linalg.svd / svdvals's keyword arguments: driver= (accepted, ignored) and out=.
@pytest.mark.parametrize("driver", [None, "gesvd", "gesvdj", "gesvda"])
def test_driver_accepted(device, driver):
    A = torch.randn(3, 6, 4, device=device)
    ref = torch_jsvd.svd(A, full_matrices=False)
    U, S, Vh = torch_jsvd.svd(A, full_matrices=False, driver=driver)
    assert torch.equal(U, ref.U) and torch.equal(S, ref.S) and torch.equal(Vh, ref.Vh)
    assert torch.equal(torch_jsvd.svdvals(A, driver=driver), torch_jsvd.svdvals(A))


def test_driver_unknown_raises(device):
    A = torch.randn(4, 4, device=device)
    with pytest.raises(ValueError, match="driver"):
        torch_jsvd.svd(A, driver="gesdd")
    with pytest.raises(ValueError, match="driver"):
        torch_jsvd.svdvals(A, driver="jacobi")


@pytest.mark.parametrize("full_matrices", [True, False])
@pytest.mark.parametrize("shape", [(5, 3), (2, 4, 7)], ids=str)
def test_out_empty_tensors(device, shape, full_matrices):
    A = torch.randn(shape, device=device)
    out = tuple(torch.empty(0, device=device) for _ in range(3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # empty out tensors are resized silently, as in torch
        r = torch_jsvd.svd(A, full_matrices, out=out)
    ref = torch_jsvd.svd(A, full_matrices)
    for got, o, want in zip(r, out, ref):
        assert got is o
        assert torch.equal(got, want) and got.stride() == want.stride()
    s = torch.empty(0, device=device)
    assert torch_jsvd.svdvals(A, out=s) is s and torch.equal(s, torch_jsvd.svdvals(A))


def test_out_sized_and_resized(device):
    A = torch.randn(6, 4, device=device)
    ref = torch_jsvd.svd(A, full_matrices=False)
    sized = (torch.empty(4, 6, device=device).mT, torch.empty(4, device=device), torch.empty(4, 4, device=device))
    ptrs = [t.data_ptr() for t in sized]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch_jsvd.svd(A, full_matrices=False, out=sized)
    assert [t.data_ptr() for t in sized] == ptrs  # written in place
    assert all(torch.equal(t, w) for t, w in zip(sized, ref))
    wrong = (torch.empty(2, 2, device=device), torch.empty(0, device=device), torch.empty(0, device=device))
    with pytest.warns(UserWarning, match="resized"):
        torch_jsvd.svd(A, full_matrices=False, out=wrong)
    assert wrong[0].shape == (6, 4) and torch.equal(wrong[0], ref.U)


def test_out_errors(device):
    A = torch.randn(5, 4, device=device)
    with pytest.raises(RuntimeError, match="dtype"):
        torch_jsvd.svd(A, out=tuple(torch.empty(0, dtype=torch.float64, device=device) for _ in range(3)))
    with pytest.raises(RuntimeError, match="dtype"):
        torch_jsvd.svdvals(A, out=torch.empty(0, dtype=torch.float64, device=device))
    with pytest.raises(TypeError, match="tuple of 3"):
        torch_jsvd.svd(A, out=(torch.empty(0, device=device),) * 2)
    with pytest.raises(TypeError, match="tuple of 3"):
        torch_jsvd.svd(A, out=torch.empty(0, device=device))
    Ag = A.clone().requires_grad_()
    with pytest.raises(RuntimeError, match="automatic differentiation"):
        torch_jsvd.svd(Ag, out=tuple(torch.empty(0, device=device) for _ in range(3)))
    with pytest.raises(RuntimeError, match="automatic differentiation"):
        torch_jsvd.svdvals(Ag, out=torch.empty(0, device=device))
    with torch.no_grad():  # as torch: fine without grad mode
        torch_jsvd.svdvals(Ag, out=torch.empty(0, device=device))
    if device == "cuda":
        with pytest.raises(RuntimeError, match="device"):
            torch_jsvd.svdvals(A, out=torch.empty(0))
