"""Forward results of torch_jsvd.svd / svd_ex / svdvals: accuracy, shapes, dtypes, layouts, out=.
(Convergence and info: test_convergence.py; non-finite input: test_finite_or_flagged.py.)"""

import warnings

import pytest
import torch

import torch_jsvd
from jsvd_testutils import (assert_valid_svd, bound, check_svd, on_devices, orthogonality_error, random_rank,
                            reference_svdvals)

# square, tall, wide, thin, batched, sizes off multiples of 32; the CUDA engine's warp and shared-memory
# levels, with warps and blocks partly filled
SHAPES = [(1, 1), (5, 3), (3, 5), (8, 8), (33, 17), (17, 33), (64, 64), (4, 7, 5), (2, 3, 6, 6), (100, 2),
          (7, 1, 1), (5, 1, 9), (5, 9, 1), (33, 8, 32), (33, 32, 8), (100, 16, 16), (64, 32, 32), (3, 4, 17, 13),
          (6, 33, 47), (4, 100, 100), (2, 32, 8), (2, 8, 32)]
# CUDA alone: shapes that land on its other levels (pair SVD, Gram EVD, QR preconditioning)
CUDA_SHAPES = [(3, 128, 128), (2, 130, 70), (2, 200, 200), (2, 256, 256), (1, 300, 520), (2, 2048, 16),
               (2, 16, 2048), (2, 70, 130), (2, 300, 40)]
DTYPES = [torch.float32, torch.float64]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(*on_devices("shape", SHAPES, CUDA_SHAPES))
@pytest.mark.parametrize("full_matrices", [True, False])
def test_accurate_on_random_matrices(device, dtype, shape, full_matrices):
    A = torch.randn(shape, dtype=dtype, device=device)
    A0 = A.clone()
    U, S, Vh = torch_jsvd.svd(A, full_matrices)
    assert torch.equal(A, A0), "input was modified"
    assert_valid_svd(A, U, S, Vh, full_matrices)
    # Same singular values as LAPACK / cuSOLVER, to the accuracy of both (absolute, as S_max scales errors).
    ref = reference_svdvals(A)
    m, n = shape[-2:]
    assert ((S.double() - ref).abs() <= bound(m, n, dtype) * ref[..., :1]).all()


# full_matrices=True (torch.linalg.svd's default) on large tall and wide matrices: the extra columns by a
# QR of the first ones (csrc/complement_qr.h) where the engines' own completions took seconds (1 x
# 3072x768: 9 s on the H200; 1 x 3000x300: 3.8 s on a CPU). Rank-deficient ones complete their own
# columns first; a list mixes such members with small ones, whose extra columns stay the engine's.
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(*on_devices("shape,rank", [((1, 900, 120), None), ((1, 150, 700), None), ((1, 800, 150), 50)],
                                     cuda_only=[((1, 3072, 768), None), ((1, 600, 2500), None), ((3, 1500, 300), None),
                                                ((1, 2000, 500), 200)]))
def test_full_matrices_of_large_matrices(device, shape, rank, dtype):
    g = torch.Generator().manual_seed(shape[1])
    A = torch.randn(shape, generator=g, dtype=torch.float64)
    if rank is not None:
        A = A[..., :rank] @ torch.randn(rank, shape[2], generator=g, dtype=torch.float64)
    A = A.to(dtype=dtype, device=device)
    check_svd(A, True)
    mats = [A[0], torch.randn(40, 7, generator=g).to(dtype=dtype, device=device), A[0, :, : shape[2] // 3],
            torch.randn(5, 300, generator=g).to(dtype=dtype, device=device)]
    for M, (U, S, Vh) in zip(mats, zip(*torch_jsvd.svd_varlen(mats, full_matrices=True))):
        assert_valid_svd(M, U, S, Vh, True)


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
    # With distinct singular values the factors are unique up to the sign of each (u_i, v_i) pair, and
    # as accurate as eps ||A|| over the gap between singular values (m > n: also to zero).
    g = torch.Generator().manual_seed(55)
    A = torch.randn(6, 9, 5, dtype=dtype, generator=g).to(device)
    U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
    U2, S2, Vh2 = torch.linalg.svd(A, full_matrices=False)
    sign = torch.sign((U * U2).sum(-2))
    S64 = S2.double()
    gap = torch.minimum((S64[..., :-1] - S64[..., 1:]).amin(), S64[..., -1].amin()) / S64[..., 0].amax()
    tol = 20 * torch.finfo(dtype).eps / gap.item()
    torch.testing.assert_close(U * sign.unsqueeze(-2), U2, atol=tol, rtol=0)
    torch.testing.assert_close(Vh * sign.unsqueeze(-1), Vh2, atol=tol, rtol=0)
    torch.testing.assert_close(S, S2, atol=tol * S2[..., :1].max().item(), rtol=0)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype,m,n", [(torch.float32, 30000, 8), (torch.float64, 15000, 5)])
def test_svd_ex_of_rank_deficient_matrices_too_tall_for_the_greedy_completion(dtype, m, n):
    # svd_ex reads no rank, so the zero columns of U were the greedy kernel's, whose shared memory holds
    # at most about 19000 float32 (14000 float64) rows: its launch failed ("invalid argument"). A QR on
    # the device completes them (kernels/engine/complete_u.cpp). A rank-one, a zero and a rank-2 matrix.
    g = torch.Generator(device="cuda").manual_seed(0)
    A = torch.randn(3, m, 2, dtype=dtype, device="cuda", generator=g) @ torch.randn(3, 2, n, dtype=dtype, device="cuda", generator=g)
    A[0] = A[0, :, :1] * torch.randn(1, n, dtype=dtype, device="cuda", generator=g)
    A[1] = 0
    U, S, Vh, info = torch_jsvd.svd_ex(A, full_matrices=False)
    assert (info >= 0).all(), info
    assert_valid_svd(A, U, S, Vh, False)
    assert (S[1] == 0).all() and (S[0, 1:] <= 1e-5 * S[0, 0]).all()


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_full_rank_matrices_too_tall_for_the_greedy_completion_beside_deficient_ones(dtype):
    # svd and svd_varlen read the ranks; a full-rank matrix needs no completion, but the greedy's launch
    # was sized for the tallest matrix of the call and failed ("invalid argument") when that one could
    # not fit its shared memory: svd of 40 30000 x 16 float32 matrices (the Gram start's route, whose
    # Jacobi runs on the tall A V0), or a list with a 30000-row member beside a small rank-deficient one.
    g = torch.Generator(device="cuda").manual_seed(3)
    tall = torch.randn(40 if dtype == torch.float32 else 30, 30000 if dtype == torch.float32 else 20000, 16, dtype=dtype,
                       device="cuda", generator=g)
    U, S, Vh = torch_jsvd.svd(tall, full_matrices=False)
    assert_valid_svd(tall, U, S, Vh, False)
    small = torch.randn(40, 1, dtype=dtype, device="cuda", generator=g) @ torch.randn(1, 30, dtype=dtype, device="cuda",
                                                                                    generator=g)
    As = [torch.randn(30000, 8, dtype=dtype, device="cuda", generator=g), small]
    Us, Ss, Vhs = torch_jsvd.svd_varlen(As)
    for A, U, S, Vh in zip(As, Us, Ss, Vhs):
        assert_valid_svd(A, U, S, Vh, False)


@pytest.mark.parametrize("full_matrices", [True, False])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(*on_devices("m,n,rank", [(6, 4, 2), (4, 6, 1), (7, 7, 3), (9, 5, 4), (5, 5, 0), (8, 3, 0),
                                                  (16, 16, 3), (40, 24, 1)],
                                     cuda_only=[(256, 256, 10), (520, 300, 7), (1024, 1024, 2)]))
def test_u_v_orthogonal_for_rank_deficient_input(device, m, n, rank, dtype, full_matrices):
    # U (and Vh) must stay orthonormal even where S == 0, including the completed full bases. (CUDA, from
    # 256 columns: the completion by a QR from each matrix's own rank, kernels/engine/complete_u.h.)
    A = random_rank((3, m, n), rank, dtype=dtype, device=device)
    A[1] = 0  # a zero matrix in the batch
    A[2, :, : n // 2] = A[2, :, n // 2 : 2 * (n // 2)]  # repeated columns: exact zero columns appear
    U, S, Vh = torch_jsvd.svd(A, full_matrices=full_matrices)
    assert_valid_svd(A, U, S, Vh, full_matrices)
    assert (S[1] == 0).all()
    smax = max(S.max().item(), 1.0)
    assert (S[..., rank:] <= bound(m, n, dtype) * smax).all()
    if rank:
        assert (S[0, rank - 1] > 1e-3).all()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(*on_devices("n", [8, 16, 32, 40, 100], cuda_only=[256]))  # CUDA: warp, shared memory, pairs
def test_u_v_orthogonal_for_a_zero_row_or_column(device, n, dtype):
    """A zero row (or column): rank n - 1. The column the sweeps leave for the
    zero singular value is rounding noise (float64: norms down to 1e-161) and
    must be completed in U, not normalised (it was, on CUDA, for float64 at 9x8x8)."""
    b = 16 if n <= 40 else 2
    A = torch.randn(b, n, n, dtype=dtype, device=device)
    A[:, -1, :] = 0
    for X in (A, A.mT):
        for full in (False, True):
            U, S, Vh = torch_jsvd.svd(X, full_matrices=full)
            assert_valid_svd(X, U, S, Vh, full_matrices=full)
            assert (S[:, -1] <= bound(n, n, dtype) * S[:, 0]).all()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [12, 64, 200])
def test_repeated_singular_values_recovered(device, n, dtype):
    Q1, _ = torch.linalg.qr(torch.randn(n, n, dtype=torch.float64))
    Q2, _ = torch.linalg.qr(torch.randn(n, n, dtype=torch.float64))
    s = torch.ones(n, dtype=torch.float64)
    s[n // 2 :] = 0.5
    A = ((Q1 * s) @ Q2.T).to(dtype=dtype, device=device)[None]
    U, S, Vh = check_svd(A, full_matrices=False)
    assert torch.allclose(S[0].double().cpu(), s.sort(descending=True).values, atol=bound(n, n, dtype))


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
