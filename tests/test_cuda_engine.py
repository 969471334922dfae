"""The CUDA W-cycle engine (issue 3): every level on a grid of shapes, checked
against float64 references. Skipped without a CUDA device."""

import json

import pytest
import torch

import torch_jsvd
from jsvd_testutils import (
    assert_valid_svd,
    bound,
    orthogonality_error,
    random_rank,
    rel_reconstruction_error,
)

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

DTYPES = [torch.float32, torch.float64]

# (batch, m, n): square, tall, wide, thin, sizes off multiples of 32, and shapes
# that land on every level of the planner (whole in smem, pair SVD, Gram EVD).
SHAPES = [
    ((7,), 1, 1),
    ((5,), 1, 9),
    ((5,), 9, 1),
    ((33,), 8, 32),
    ((33,), 32, 8),
    ((100,), 16, 16),
    ((64,), 32, 32),
    ((3, 4), 17, 13),
    ((6,), 33, 47),
    ((4,), 100, 100),
    ((3,), 128, 128),
    ((2,), 130, 70),
    ((2,), 200, 200),
    ((2,), 256, 256),
    ((1,), 300, 520),
    ((2,), 2048, 16),
    ((2,), 16, 2048),
]


def _check(A, full_matrices, factor=10.0):
    U, S, Vh = torch_jsvd.svd(A, full_matrices=full_matrices)
    assert_valid_svd(A, U, S, Vh, full_matrices, factor)
    ref = torch.linalg.svdvals(A.double())
    err = (S.double() - ref).abs().amax(-1) / ref[..., :1].clamp_min(1e-300).squeeze(-1)
    assert err.max() <= bound(*A.shape[-2:], A.dtype), err.max()
    return U, S, Vh


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("batch,m,n", SHAPES, ids=lambda v: str(v))
def test_shapes(batch, m, n, dtype):
    A = torch.randn(*batch, m, n, dtype=dtype, device="cuda")
    _check(A, full_matrices=False)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("m,n", [(32, 8), (8, 32), (70, 130), (300, 40), (2048, 16)])
def test_full_matrices(m, n, dtype):
    A = torch.randn(2, m, n, dtype=dtype, device="cuda")
    _check(A, full_matrices=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("m,n,rank", [(16, 16, 3), (40, 24, 1), (256, 256, 10), (520, 300, 7)])
@pytest.mark.parametrize("full_matrices", [False, True])
def test_rank_deficient(m, n, rank, dtype, full_matrices):
    A = random_rank((3, m, n), rank, dtype=dtype, device="cuda")
    A[1] = 0  # a zero matrix in the batch
    A[2, :, : n // 2] = A[2, :, n // 2 : 2 * (n // 2)]  # repeated columns: exact zero columns appear
    U, S, Vh = torch_jsvd.svd(A, full_matrices=full_matrices)
    assert_valid_svd(A, U, S, Vh, full_matrices)
    assert (S[1] == 0).all()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [12, 64, 200])
def test_repeated_singular_values(n, dtype):
    Q1, _ = torch.linalg.qr(torch.randn(n, n, dtype=torch.float64))
    Q2, _ = torch.linalg.qr(torch.randn(n, n, dtype=torch.float64))
    s = torch.ones(n, dtype=torch.float64)
    s[n // 2 :] = 0.5
    A = ((Q1 * s) @ Q2.T).to(dtype).cuda()[None]
    U, S, Vh = _check(A, full_matrices=False)
    assert torch.allclose(S[0].double().cpu(), s.sort(descending=True).values, atol=bound(n, n, dtype))


def _graded(m, n, kappa, generator):
    B = torch.randn(m, n, dtype=torch.float64, generator=generator)
    return B * torch.logspace(0, -torch.log10(torch.tensor(kappa)).item(), n, dtype=torch.float64)


@pytest.mark.parametrize("m,n", [(16, 16), (64, 48), (300, 200), (2048, 16)])
def test_graded_relative_accuracy(m, n):
    """Column-graded float64, kappa up to 1e12: every singular value to high
    relative accuracy (the reason to use Jacobi). Reference: the CPU engine,
    itself checked against mpmath in tests/test_graded.py."""
    g = torch.Generator().manual_seed(torch.randint(0, 2**31, ()).item())
    A = torch.stack([_graded(m, n, 1e12, g), _graded(m, n, 1e8, g)])
    ref = torch_jsvd.svdvals(A)
    S = torch_jsvd.svdvals(A.cuda()).cpu()
    rel = ((S - ref).abs() / ref).max()
    assert rel <= 100 * max(m, n) * torch.finfo(torch.float64).eps, rel


# Every register shape of the warp level (lanes per matrix x rows per lane),
# with batches that leave warps partly empty.
WARP_SHAPES = [(3, 4, 3), (5, 8, 4), (2, 16, 4), (9, 8, 8), (3, 16, 8), (5, 32, 8), (7, 16, 16),
               (3, 32, 16), (3, 64, 16), (33, 32, 32), (3, 64, 32), (3, 20, 17)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("batch,m,n", WARP_SHAPES, ids=lambda v: str(v))
def test_warp_level(batch, m, n, dtype):
    lv = torch_jsvd.plan([(m, n)], dtype=dtype, device="cuda")["matrices"][0]["levels"][0]
    # lanes = columns rounded up to a power of two (>= 4), rows per lane 1, 2 or 4,
    # and a lane holds at most 64 (float32) or 32 (float64) values of A
    lanes = max(4, 1 << (n - 1).bit_length())
    rows = next((r for r in (1, 2, 4) if m <= r * lanes), 8)
    fits = rows * lanes <= (64 if dtype == torch.float32 else 32)
    assert lv["kernel"] == ("whole_svd_warp" if fits else "whole_svd_smem"), lv
    if fits:
        assert (lv["lanes_per_matrix"], lv["rows_per_lane"]) == (lanes, rows)
    A = torch.randn(batch, m, n, dtype=dtype, device="cuda")
    A[-1, :, -1] = 0  # a zero column
    _check(A, full_matrices=False)
    _check(A.mT, full_matrices=True)
    S = torch_jsvd.svdvals(A)
    ref = torch.linalg.svdvals(A.double())
    err = ((S.double() - ref).abs().amax(-1) / ref[..., 0]).max().item()
    assert err <= bound(m, n, dtype), f"svdvals error {err:.3g} > {bound(m, n, dtype):.3g}"


def test_varlen_matches_per_matrix():
    shapes = [(int(m), int(n)) for m, n in torch.randint(1, 90, (60, 2))] + [(300, 20), (20, 300), (256, 256)]
    for dtype in DTYPES:
        As = [torch.randn(m, n, dtype=dtype, device="cuda") for m, n in shapes]
        Us, Ss, Vhs = torch_jsvd.svd_varlen(As)
        for A, U, S, Vh in zip(As, Us, Ss, Vhs):
            assert_valid_svd(A, U, S, Vh, full_matrices=False)
            ref = torch.linalg.svdvals(A.double())
            assert (S.double() - ref).abs().max() <= bound(*A.shape, dtype) * ref[0]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [8, 16, 32, 40, 100, 256])  # warp, shared-memory and pair levels
def test_rank_deficient_rows(n, dtype):
    """A zero row (or column): rank n - 1. The column the sweeps leave for the
    zero singular value is rounding noise (float64: norms down to 1e-161) and
    must be completed in U, not normalised (it was, for float64, at 9x8x8)."""
    b = 16 if n <= 40 else 2
    A = torch.randn(b, n, n, dtype=dtype, device="cuda")
    A[:, -1, :] = 0
    for X in (A, A.mT):
        for full in (False, True):
            U, S, Vh = torch_jsvd.svd(X, full_matrices=full)
            assert_valid_svd(X, U, S, Vh, full_matrices=full)
            assert (S[:, -1] <= bound(n, n, dtype) * S[:, 0]).all()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("m,n", [(48, 34), (40, 33), (100, 33)])
def test_whole_level_partial_warp(m, n, dtype):
    """Blocks of the shared-memory level whose size is not a multiple of 32
    (17 pairs of 8 or 16 lanes): the copies in and out of shared memory go a
    warp per column, whole warps only, and must still cover every element."""
    lv = torch_jsvd.plan([(m, n)], dtype=dtype, device="cuda")["matrices"][0]["levels"][-1]
    assert lv["kernel"] == "whole_svd_smem" and lv["steps"] == "shared" and lv["threads"] % 32 != 0, lv
    A = torch.randn(3, m, n, dtype=dtype, device="cuda")
    for X in (A, A.mT):
        for full in (False, True):
            _check(X, full_matrices=full)


@pytest.mark.parametrize("m,n,dtype", [(128, 128, torch.float32), (130, 70, torch.float32), (64, 64, torch.float64),
                                       (300, 40, torch.float32)])
def test_whole_level_register_steps(m, n, dtype):
    """Whole matrices whose lane groups keep one column of each pair in
    registers (the recursive-halving order, kernels/levels/smem/halving_order.h): the plan
    says so, and the results hold in both orientations, with and without
    vectors, including column counts that are not powers of two."""
    lv = torch_jsvd.plan([(m, n)] * 8, dtype=dtype, device="cuda")["matrices"][0]["levels"][-1]
    assert lv["kernel"] == "whole_svd_smem" and lv["steps"] == "registers", lv
    A = torch.randn(8, m, n, dtype=dtype, device="cuda")
    A[1] *= 1e-3  # graded batch: convergence is per matrix
    for X in (A, A.mT):
        for full in (False, True):
            _check(X, full_matrices=full)
        S = torch_jsvd.svdvals(X)
        ref = torch.linalg.svdvals(X.double())
        assert ((S.double() - ref).abs().amax(-1) <= bound(m, n, dtype) * ref[..., 0]).all()


@pytest.mark.parametrize("full_matrices", [False, True])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_varlen_blocked_shapes(dtype, full_matrices):
    """Several blocked-level matrices of different shapes in one launch: pairs of
    different heights and widths share the shared-memory size of the largest
    (float32 pairs carry V's rows, float64 pairs their rotation)."""
    shapes = [(300, 200), (256, 256), (200, 330), (520, 300), (260, 190)]
    for m, n in shapes:
        lv = torch_jsvd.plan([(m, n)], dtype=dtype, device="cuda")["matrices"][0]["levels"]
        assert lv[-1]["kernel"] == "pair_svd_smem", (m, n, lv)
    As = [torch.randn(m, n, dtype=dtype, device="cuda") for m, n in shapes]
    Us, Ss, Vhs = torch_jsvd.svd_varlen(As, full_matrices=full_matrices)
    for A, U, S, Vh in zip(As, Us, Ss, Vhs):
        assert_valid_svd(A, U, S, Vh, full_matrices=full_matrices)
        ref = torch.linalg.svdvals(A.double())
        assert (S.double() - ref).abs().max() <= bound(*A.shape, dtype) * ref[0]


@pytest.mark.parametrize("n", [64, 24])  # shared-memory and register (warp) levels
def test_svd_ex_info_and_no_convergence(n):
    A = torch.randn(4, n, n, device="cuda")
    _, S, _, info = torch_jsvd.svd_ex(A)
    assert info.dtype == torch.int32 and info.shape == (4,) and (info > 1).all()
    _, _, _, info1 = torch_jsvd.svd_ex(A, max_sweeps=1)
    assert (info1 == torch_jsvd.INFO_NOT_CONVERGED).all()
    B = torch.randn(2, 512, 512, device="cuda")  # blocked level
    _, _, _, infob = torch_jsvd.svd_ex(B, max_sweeps=1)
    assert (infob == torch_jsvd.INFO_NOT_CONVERGED).all()
    with pytest.raises(RuntimeError):
        torch_jsvd.svd(A, max_sweeps=1)


# Blocked levels: pair SVD, Gram EVD, the QR-preconditioned Jacobi; a list.
@pytest.mark.parametrize("shape", [(6, 200, 200), (3, 2048, 16), (4, 300, 300), "list"])
def test_svd_stops_where_svd_ex_converges(shape):
    """svd stops sweeping once no matrix rotates (it reads each sweep's count on
    the host, pipelined a sweep behind); svd_ex queues max_sweeps sweeps, which
    converged matrices sit out. So both must give the same bits and sweeps,
    while a max_sweeps short of convergence is reported by both."""
    if shape == "list":
        As = [torch.randn(m, n, device="cuda") for m, n in [(300, 40), (64, 200), (257, 257), (16, 16)]]
        # (svd_varlen has no _ex to compare with: its results are checked.)
        for A, U, S, Vh in zip(As, *torch_jsvd.svd_varlen(As, full_matrices=False)):
            assert_valid_svd(A, U, S, Vh, False, 10.0)
        return
    A = torch.randn(*shape, device="cuda")
    # Graded columns spread the sweeps the matrices take.
    A[0] *= torch.logspace(0, 6, shape[-1], device="cuda")
    U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
    U1, S1, Vh1, info = torch_jsvd.svd_ex(A, full_matrices=False)
    assert (info > 0).all()
    assert torch.equal(S, S1) and torch.equal(U, U1) and torch.equal(Vh, Vh1)
    short = int(info.max()) - 1
    _, _, _, info_short = torch_jsvd.svd_ex(A, full_matrices=False, max_sweeps=short)
    assert (info_short == torch_jsvd.INFO_NOT_CONVERGED).any()
    with pytest.raises(RuntimeError):
        torch_jsvd.svd(A, full_matrices=False, max_sweeps=short)


# (warp level: 3 matrices in one warp; shared memory; blocked; Gram EVD)
@pytest.mark.parametrize("shape", [(3, 16, 16), (3, 100, 100), (2, 512, 512), (2, 2048, 16)])
def test_non_finite_input(shape):
    A = torch.randn(*shape, dtype=torch.float64, device="cuda")
    A[1, 0, 0] = float("nan")
    U, S, Vh, info = torch_jsvd.svd_ex(A)
    assert info[1] == torch_jsvd.INFO_NON_FINITE and info[0] >= 0
    assert torch.isnan(S[1]).all() and torch.isfinite(S[0]).all()


# Register steps (svd_smem_kernel.cuh): square sizes whose rows fill the
# register bucket take the path without per-row bounds (rows_exact): 128²
# whole, 256² and 512² pairs with V, 512² svdvals; one row or column less
# takes the bounded path. Both must agree with float64 matrix by matrix.
@pytest.mark.parametrize("m,n", [(128, 128), (127, 128), (256, 256), (256, 255), (512, 512), (511, 512)])
def test_register_steps_exact_and_bounded(m, n):
    A = torch.randn(2, m, n, device="cuda")
    _check(A, full_matrices=False)
    S = torch_jsvd.svdvals(A)
    ref = torch.linalg.svdvals(A.double())
    assert ((S.double() - ref).abs().amax(-1) / ref[..., 0]).max() <= bound(m, n, torch.float32)


# Float32 block pairs of 512 or 1024 rows, 16 columns a block and a multiple
# of 32 columns carry E = J - I under their columns instead of V's rows
# (svd_smem_kernel.cuh, kDelta); V is then updated by V + V E. The planner
# keeps 16-column blocks once a round-robin step fills the SMs (132 on the
# H100), hence the batch sizes. Tall (q < p) and transposed shapes (fewer
# than 256 columns: wider uniform batches run on their R^T, qr_precondition.h),
# a rank-deficient batch, and a list that mixes such pairs with pairs that do
# not qualify (the launch then carries V's rows for all).
@pytest.mark.parametrize("shape", [(9, 512, 512), (20, 512, 224), (20, 224, 512), (5, 1024, 1024)])
def test_pair_delta(shape):
    plan = torch_jsvd.plan([shape[1:]] * shape[0], dtype=torch.float32, device="cuda")["matrices"][0]
    assert plan["levels"][1].get("carries") == "delta", plan
    A = torch.randn(*shape, device="cuda")
    _check(A, full_matrices=False)
    L = torch.randn(shape[0], shape[1], 40, device="cuda") @ torch.randn(40, shape[2], device="cuda")
    _check(L, full_matrices=True)


def test_pair_delta_mixed_list():
    shapes = [(512, 512)] * 8 + [(512, 464), (512, 512)]
    plans = torch_jsvd.plan(shapes, dtype=torch.float32, device="cuda")["matrices"]
    assert [p["levels"][1].get("carries") for p in plans] == ["delta"] * 8 + ["v_rows", "delta"]
    As = [torch.randn(m, n, device="cuda") for m, n in shapes]
    U, S, Vh = torch_jsvd.svd_varlen(As, full_matrices=False)
    for A, u, s, vh in zip(As, U, S, Vh):
        assert_valid_svd(A, u, s, vh, False)
        ref = torch.linalg.svdvals(A.double())
        assert ((s.double() - ref).abs().max() / ref[0]).item() <= bound(*A.shape, torch.float32)


def test_pair_delta_varlen():
    """A list whose pairs all carry E: the kDelta kernel reads each matrix
    through the descriptor table, with square, tall and (transposed) wide
    matrices of different q in one launch (the planner's choice for a list of
    17 is checked without a GPU in cpp_tests/planner_test.cpp)."""
    shapes = [(512, 512)] * 15 + [(512, 256), (256, 512)]
    plans = torch_jsvd.plan(shapes, dtype=torch.float32, device="cuda")["matrices"]
    assert [p["levels"][1].get("carries") for p in plans] == ["delta"] * len(shapes), plans
    As = [torch.randn(m, n, device="cuda") for m, n in shapes]
    for full in (False, True):
        U, S, Vh = torch_jsvd.svd_varlen(As, full_matrices=full)
        for A, u, s, vh in zip(As, U, S, Vh):
            assert_valid_svd(A, u, s, vh, full)
            ref = torch.linalg.svdvals(A.double())
            assert ((s.double() - ref).abs().max() / ref[0]).item() <= bound(*A.shape, torch.float32)


@pytest.mark.parametrize("shape", [(3, 300, 300), (3, 1100, 700)])
def test_blocked_scaling(shape):
    """The blocked levels divide each matrix by its max|a| (found by many blocks
    per matrix) before the sweeps: magnitudes whose squares overflow or
    underflow float32 still give S to full accuracy, matrix by matrix."""
    A = torch.randn(*shape, device="cuda")
    A[0] *= 1e30
    A[1] *= 1e-30
    A[2, 5, 7] = 1e3  # one large entry
    U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
    ref = torch.linalg.svdvals(A.double())
    err = ((S.double() - ref).abs().amax(-1) / ref[..., 0]).max().item()
    assert err < 10 * max(shape[1:]) * 6e-8
    assert_valid_svd(A, U, S, Vh, False)


def test_uniform_prep_kept_across_calls_and_streams():
    """A uniform batch's plan and uploaded task queue are kept by shape
    (jacobi_svd_cuda.cpp, uniform_prep): a later call with the same shape, on
    another stream, reuses them and must give the same factors."""
    As = [torch.randn(9, 512, 512, device="cuda"), torch.randn(3, 300, 300, device="cuda"), torch.randn(4, 2048, 16, device="cuda")]
    first = [torch_jsvd.svd(A, full_matrices=False) for A in As]
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        second = [torch_jsvd.svd(A, full_matrices=False) for A in As]
        full = torch_jsvd.svd(As[1], full_matrices=True)  # another key: its own queue
    torch.cuda.current_stream().wait_stream(s)
    for A, f, g in zip(As, first, second):
        assert_valid_svd(A, *g, False)
        for x, y in zip(f, g):
            torch.testing.assert_close(x, y, rtol=0, atol=1e-5)
    assert_valid_svd(As[1], *full, True)


def test_side_stream():
    A = torch.randn(50, 100, 60, device="cuda")
    B = torch.randn(2, 600, 600, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        outA = torch_jsvd.svd_ex(A, full_matrices=False)
        outB = torch_jsvd.svd_ex(B, full_matrices=False)
    torch.cuda.current_stream().wait_stream(s)
    assert_valid_svd(A, *outA[:3], full_matrices=False)
    assert_valid_svd(B, *outB[:3], full_matrices=False)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cuda_graph_capture(dtype):
    """svd_ex never synchronises, so it can be captured in a CUDA graph (as
    torch.compile's reduce-overhead mode does). Its launches read task lists
    uploaded from pinned host memory during capture: replays must still see
    them intact (the pinned blocks are churned in between) and the new input."""
    shapes = [(64, 16, 16), (6, 100, 60), (2, 300, 260)]  # warp, whole and pair levels
    for shape in shapes:
        A = torch.randn(shape, dtype=dtype, device="cuda")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up: per-device caches filled before capture
            torch_jsvd.svd_ex(A, full_matrices=False)
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            U, S, Vh, info = torch_jsvd.svd_ex(A, full_matrices=False)
        for _ in range(2):
            A.copy_(torch.randn_like(A))
            for e in range(8, 21):  # reuse of a freed pinned block would put these bytes in a task list
                junk = torch.full((1 << e,), 0x7F, dtype=torch.uint8).pin_memory()
                junk.to("cuda", non_blocking=True)
            g.replay()
            torch.cuda.synchronize()
            assert (info >= 0).all(), info
            assert_valid_svd(A, U, S, Vh, full_matrices=False)


def test_syncing_ops_under_capture_raise():
    """svd, svdvals and svd_varlen read on the host: inside a CUDA graph capture
    they raise a clear error that names svd_ex, instead of invalidating it."""
    A = torch.randn(4, 16, 16, device="cuda")
    torch_jsvd.svd(A)  # warm-up outside the capture
    for call in (lambda: torch_jsvd.svd(A), lambda: torch_jsvd.svdvals(A), lambda: torch_jsvd.svd_varlen([A[0]])):
        g = torch.cuda.CUDAGraph()
        with pytest.raises(RuntimeError, match="svd_ex"):
            with torch.cuda.graph(g):
                call()
    U, S, Vh = torch_jsvd.svd(A)  # and the stream works afterwards
    assert_valid_svd(A, U, S, Vh, full_matrices=True)


def test_tolerance_control():
    A = torch.randn(8, 96, 96, dtype=torch.float64, device="cuda")
    _, _, _, loose = torch_jsvd.svd_ex(A, tol=1e-4)
    _, _, _, tight = torch_jsvd.svd_ex(A)
    assert (loose <= tight).all() and (loose < tight).any()


def test_plan_levels():
    p32 = torch_jsvd.plan([(32, 32)], dtype=torch.float32, device="cuda")
    assert p32["matrices"][0]["levels"][0]["kernel"] == "whole_svd_warp"
    p100 = torch_jsvd.plan([(100, 100)], dtype=torch.float32, device="cuda")
    assert p100["matrices"][0]["levels"][0]["kernel"] == "whole_svd_smem"
    p512 = torch_jsvd.plan([(512, 512)] * 100, dtype=torch.float32, device="cuda")
    lv = p512["matrices"][0]["levels"]
    assert lv[0]["kernel"] == "block_pairs" and lv[1]["kernel"] == "pair_svd_smem"
    tall = torch_jsvd.plan([(16, 2048)], dtype=torch.float64, device="cuda")["matrices"][0]
    assert tall["transposed"] and tall["levels"][1]["kernel"] == "gram_evd_smem"
    # the limit comes from the device, not the paper's 48 KB
    assert p32["smem_per_block"] > 48 * 1024


def test_opcheck_cuda():
    A = torch.randn(3, 20, 12, device="cuda", dtype=torch.float64)
    torch.library.opcheck(torch.ops.jsvd.svd.default, (A,), {"full_matrices": False})
    torch.library.opcheck(torch.ops.jsvd.svd_ex.default, (A,), {"full_matrices": False})
    torch.library.opcheck(torch.ops.jsvd.svdvals.default, (A,))
    torch.library.opcheck(torch.ops.jsvd.svd_varlen.default, ([A[0], A[1, :5]],))


def test_gradcheck_cuda():
    A = torch.randn(2, 6, 4, dtype=torch.float64, device="cuda", requires_grad=True)

    def f(A):
        U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
        return U @ torch.diag_embed(S) @ Vh, S, U @ U.mT

    assert torch.autograd.gradcheck(f, (A,))
