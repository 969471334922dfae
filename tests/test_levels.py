"""The levels of the CUDA engine and their kernel variants, each forced by the shape (and batch size) that
the planner sends to it, and checked against float64 references.

Every matrix of a call goes to the shallowest level it fits (docs/design.md, "The levels"): whole into
registers (`whole_svd_warp`, a group of lanes per matrix, several matrices a warp), whole into shared
memory (`whole_svd_smem`, its steps in shared memory or with one column of each pair in registers), or in
block columns (`block_pairs`) whose pairs are solved in shared memory (`pair_svd_smem`, a float32 pair
carrying V's rows or E = J - I) or, for pairs too tall, through their Gram matrix's EVD (`gram_evd_smem`).
Each test asserts the plan first (torch_jsvd.plan), so a planner change that moves a shape off the level
it was chosen for fails here rather than leaving that level untested. Skipped without a CUDA device.
"""

import pytest
import torch

import torch_jsvd
from jsvd_testutils import assert_valid_svd, bound, check_svd, reference_svdvals, run_child

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

DTYPES = [torch.float32, torch.float64]


def test_plan_picks_each_level_by_shape():
    p32 = torch_jsvd.plan([(32, 32)], dtype=torch.float32, device="cuda")
    assert p32["matrices"][0]["levels"][0]["kernel"] == "whole_svd_warp"
    p100 = torch_jsvd.plan([(100, 100)], dtype=torch.float32, device="cuda")
    assert p100["matrices"][0]["levels"][0]["kernel"] == "whole_svd_smem"
    p512 = torch_jsvd.plan([(512, 512)] * 100, dtype=torch.float32, device="cuda")
    lv = p512["matrices"][0]["levels"]
    assert lv[0]["kernel"] == "block_pairs" and lv[1]["kernel"] == "pair_svd_smem"
    # (in a list: a uniform float64 batch this tall is QR-preconditioned, test_qr_precondition.py)
    tall = torch_jsvd.plan([(16, 2048), (16, 2040)], dtype=torch.float64, device="cuda")["matrices"][0]
    assert tall["transposed"] and tall["levels"][1]["kernel"] == "gram_evd_smem"
    # the limit comes from the device, not the paper's 48 KB
    assert p32["smem_per_block"] > 48 * 1024


def test_whole_level_lanes_per_rotation():
    """A rotation's lanes hold about four rows of A each; float32 batches of at least twice as many matrices
    as SMs about eight (throughput-bound: planner.cpp, more_lane_rows), unless that loses the register
    steps. The plan of each, and the fewer lanes' results."""
    sms = torch_jsvd.plan([(4, 4)], device="cuda")["sm_count"]

    def level(batch, n, dtype=torch.float32):
        return torch_jsvd.plan([(n, n)] * batch, dtype=dtype, device="cuda")["matrices"][0]["levels"][0]

    # (8 lanes whose rows fill 3/4 of the register bucket take the register steps even at a cost in
    # blocks per SM: svd_smem.cu, whole_bucket_threads; 1000x33², 66 of 128 rows, does not)
    for batch in (sms, 2 * sms):
        regs = level(batch, 48)
        assert regs["lanes_per_rotation"] == 8 and regs["steps"] == "registers", regs
    assert level(2 * sms, 33).get("steps") != "registers"
    assert level(2 * sms, 48, torch.float64)["lanes_per_rotation"] == 8
    kept = level(2 * sms, 64)  # (8 lanes a rotation keep the register steps at 64², float32)
    assert kept["lanes_per_rotation"] == 8 and kept["steps"] == "registers", kept
    g = torch.Generator(device="cuda").manual_seed(48)
    A = torch.randn(2 * sms, 48, 48, device="cuda", generator=g)
    A[1] = A[1, :, :24] @ torch.randn(24, 48, device="cuda", generator=g)  # (rank 24)
    A[2] *= torch.logspace(0, -5, 48, device="cuda")
    check_svd(A, full_matrices=False)
    check_svd(A.mT, full_matrices=True)


def test_whole_level_wide_lanes(tmp_path):
    """Whole matrices whose 16 lanes a rotation hold no register bucket (A's rows and V's beyond 256) take
    32 lanes and the register steps (bucket 16, pairs in passes; planner.cpp, wider_lanes) where their rows
    are then padded to the bucket (180 x 100 float32: 280 rows to 512), and the shared-memory steps at 16
    lanes where not (160 x 112: 512 padded rows of 112 columns exceed a block); JSVD_WHOLE_WIDE_LANES=1 (in
    a child) gives both 32 lanes, 0 neither. Each gives valid outputs: a batch with a rank-deficient member
    and graded columns, wide members (on their transpose) and full_matrices."""
    g = torch.Generator().manual_seed(160)
    cases = {}
    for m, n in ((160, 112), (180, 100)):
        A = torch.randn(10, m, n, generator=g)
        A[1] = A[1, :, :40] @ torch.randn(40, n, generator=g)  # (rank 40)
        A[2] *= torch.logspace(0, -5, n)
        cases[(m, n)] = A
    torch.save(cases, tmp_path / "A.pt")
    code = f"""
        import os, torch, torch_jsvd
        out = {{}}
        for (m, n), A in torch.load({str(tmp_path / "A.pt")!r}).items():
            A = A.cuda()
            lv = torch_jsvd.plan([(m, n)] * 10, device="cuda")["matrices"][0]["levels"][0]
            out[(m, n)] = lv, [[t.cpu() for t in torch_jsvd.svd(X, full_matrices=f)] for X, f in ((A, False), (A.mT, True))]
        torch.save(out, os.environ["OUT"])
    """
    wide = {"": {(180, 100)}, "1": {(160, 112), (180, 100)}, "0": set()}
    for knob, wide_shapes in wide.items():
        env = {"JSVD_WHOLE_WIDE_LANES": knob} if knob else {}
        run_child(code, OUT=str(tmp_path / f"r{knob}.pt"), **env)
        for (m, n), (lv, out) in torch.load(tmp_path / f"r{knob}.pt").items():
            assert lv["kernel"] == "whole_svd_smem", lv
            want = (32, "registers") if (m, n) in wide_shapes else (16, "shared")
            assert (lv["lanes_per_rotation"], lv["steps"]) == want, (knob, m, n, lv)
            if (m, n) in wide_shapes and knob == "":
                assert lv["rows_padded_to"] == 512, lv
            A = cases[(m, n)]
            ref = reference_svdvals(A)
            for X, (U, S, Vh), full in ((A, out[0], False), (A.mT, out[1], True)):
                assert_valid_svd(X, U, S, Vh, full)
                assert ((S.double() - ref).abs().amax(-1) / ref[..., 0]).max() <= bound(m, n, torch.float32)


# Every register shape of the warp level (lanes per matrix x rows per lane, or a thread per matrix of at
# most 4 rows), with batches that leave warps (or the thread kernel's 128-thread blocks) partly empty.
WARP_SHAPES = [(3, 4, 3), (130, 3, 3), (5, 2, 2), (4, 1, 1), (3, 4, 4), (6, 4, 2), (2, 3, 1), (5, 8, 4), (2, 16, 4), (9, 8, 8), (3, 16, 8), (5, 32, 8), (7, 16, 16),
               (3, 32, 16), (3, 64, 16), (33, 32, 32), (3, 64, 32), (3, 20, 17)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("batch,m,n", WARP_SHAPES, ids=lambda v: str(v))
def test_warp_level_every_register_shape(batch, m, n, dtype):
    mat = torch_jsvd.plan([(m, n)], dtype=dtype, device="cuda")["matrices"][0]
    lv = mat["levels"][0]
    # (float64 from 32 columns: the Jacobi runs on the n x n R^T of a QR, test_qr_precondition.py)
    mj = mat["precondition"]["jacobi_on"][0] if "precondition" in mat else m
    # lanes = columns rounded up to a power of two (>= 4), rows per lane 1, 2 or 4,
    # and a lane holds at most 64 (float32) or 32 (float64) values of A
    lanes = max(4, 1 << (n - 1).bit_length())
    rows = next((r for r in (1, 2, 4) if mj <= r * lanes), 8)
    if mj <= 4:  # a thread per matrix, its rows in registers (svd_thread.cuh)
        lanes, rows = 1, mj
    fits = rows * lanes <= (64 if dtype == torch.float32 else 32)
    assert lv["kernel"] == ("whole_svd_warp" if fits else "whole_svd_smem"), lv
    if fits:
        assert (lv["lanes_per_matrix"], lv["rows_per_lane"]) == (lanes, rows)
    A = torch.randn(batch, m, n, dtype=dtype, device="cuda")
    A[-1, :, -1] = 0  # a zero column
    check_svd(A, full_matrices=False)
    check_svd(A.mT, full_matrices=True)
    S = torch_jsvd.svdvals(A)
    ref = reference_svdvals(A)
    err = ((S.double() - ref).abs().amax(-1) / ref[..., 0].clamp_min(1e-300)).max().item()  # (n = 1: a zero matrix)
    assert err <= bound(m, n, dtype), f"svdvals error {err:.3g} > {bound(m, n, dtype):.3g}"


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("m,n", [(48, 34), (40, 33), (100, 33)])
def test_whole_level_blocks_of_partial_warps(m, n, dtype):
    """Blocks of the shared-memory level whose size is not a multiple of 32
    (17 pairs of 8 or 16 lanes): the copies in and out of shared memory go a
    warp per column, whole warps only, and must still cover every element."""
    lv = torch_jsvd.plan([(m, n)], dtype=dtype, device="cuda")["matrices"][0]["levels"][-1]
    assert lv["kernel"] == "whole_svd_smem" and lv["steps"] == "shared" and lv["threads"] % 32 != 0, lv
    A = torch.randn(3, m, n, dtype=dtype, device="cuda")
    for X in (A, A.mT):
        for full in (False, True):
            check_svd(X, full_matrices=full)


def _check_both_orientations(A):
    """svd (reduced and full) and svdvals of the batch A and of its transpose, against float64."""
    m, n = A.shape[-2:]
    for X in (A, A.mT):
        for full in (False, True):
            check_svd(X, full_matrices=full)
        S = torch_jsvd.svdvals(X)
        ref = reference_svdvals(X)
        assert ((S.double() - ref).abs().amax(-1) <= bound(m, n, A.dtype) * ref[..., 0]).all()


@pytest.mark.parametrize("m,n,dtype", [(128, 128, torch.float32), (130, 70, torch.float32), (64, 64, torch.float64),
                                       (150, 60, torch.float32)])  # (tall, a warp a rotation, not tall enough for the QR)
def test_whole_level_register_steps(m, n, dtype):
    """Whole matrices whose lane groups keep one column of each pair in
    registers (the recursive-halving order, kernels/levels/smem/halving_order.h): the plan
    says so, and the results hold in both orientations, with and without
    vectors, including column counts that are not powers of two."""
    lv = torch_jsvd.plan([(m, n)] * 8, dtype=dtype, device="cuda")["matrices"][0]["levels"][-1]
    assert lv["kernel"] == "whole_svd_smem" and lv["steps"] == "registers", lv
    A = torch.randn(8, m, n, dtype=dtype, device="cuda")
    A[1] *= 1e-3  # graded batch: convergence is per matrix
    _check_both_orientations(A)


@pytest.mark.parametrize("m,n,dtype", [(100, 100, torch.float32), (77, 77, torch.float32), (128, 64, torch.float32),
                                       (60, 60, torch.float32),  # (8 lanes a rotation)
                                       (120, 90, torch.float32), (100, 100, torch.float64)])
def test_whole_level_rows_padded_to_register_bucket(m, n, dtype):
    """Whole matrices on the register steps hold A's and V's rows padded with zero rows to the register
    bucket (svd_smem_kernel.cuh, pa), so that the steps need no per-row bounds. The float32 plans say so
    (float64's lanes hold too few rows for the buckets at these sizes), and results hold for vectors,
    values alone, both orientations, a rank-deficient and a graded member, and a list mixing padded
    shapes with a member too tall to pad (130 x 70: 130 rows of A exceed the bucket's 128) in one launch."""
    lv = torch_jsvd.plan([(m, n)] * 8, dtype=dtype, device="cuda")["matrices"][0]["levels"][-1]
    assert lv["kernel"] == "whole_svd_smem", lv
    if dtype == torch.float32:
        assert lv["steps"] == "registers" and lv["rows_padded_to"] >= m + n, lv
    g = torch.Generator(device="cuda").manual_seed(m * n)
    A = torch.randn(8, m, n, dtype=dtype, device="cuda", generator=g)
    A[1] = A[1, :, : n // 3] @ torch.randn(n // 3, n, dtype=dtype, device="cuda", generator=g)
    A[2] *= torch.logspace(0, -6, n, dtype=dtype, device="cuda")
    _check_both_orientations(A)
    L = [torch.randn(s, dtype=dtype, device="cuda", generator=g) for s in [(m, n), (130, 70), (n, m), (77, 77)]]
    _assert_varlen_accurate(L, full_matrices=False)


# Register steps (svd_smem_kernel.cuh): square sizes whose rows fill the
# register bucket take the path without per-row bounds (rows_exact): 128²
# whole, 256² and 512² pairs with V, 512² svdvals; one row or column less
# takes the bounded path. Both must agree with float64 matrix by matrix.
@pytest.mark.parametrize("m,n", [(128, 128), (127, 128), (256, 256), (256, 255), (512, 512), (511, 512)])
def test_register_steps_with_exact_and_bounded_rows(m, n):
    A = torch.randn(2, m, n, device="cuda")
    check_svd(A, full_matrices=False)
    S = torch_jsvd.svdvals(A)
    ref = reference_svdvals(A)
    assert ((S.double() - ref).abs().amax(-1) / ref[..., 0]).max() <= bound(m, n, torch.float32)


# Float32 block pairs of 512 or 1024 rows, 16 columns a block and a multiple
# of 32 columns carry E = J - I under their columns instead of V's rows
# (svd_smem_kernel.cuh, kDelta); V is then updated by V + V E. The planner
# keeps 16-column blocks once a round-robin step fills the SMs (132 on the
# H100), hence the batch sizes. Tall (q < p) and transposed shapes (fewer
# than 256 columns: wider uniform batches run on their R^T, qr_precondition.h),
# a rank-deficient batch, and a list that mixes such pairs with pairs that do
# not qualify (the launch then carries V's rows for all). In a fresh process without
# the auto-tuner, whose timing on a given machine may plan 9 x 512² on the GEMM level.
@pytest.mark.parametrize("shape", [(9, 512, 512), (20, 512, 224), (20, 224, 512)])
def test_pair_level_carrying_delta(shape):
    out = run_child(f"""
        import torch, torch_jsvd
        from jsvd_testutils import check_svd
        shape = {shape}
        plan = torch_jsvd.plan([shape[1:]] * shape[0], dtype=torch.float32, device="cuda")["matrices"][0]
        assert plan["levels"][1].get("carries") == "delta", plan
        g = torch.Generator(device="cuda").manual_seed(sum(shape))
        check_svd(torch.randn(*shape, device="cuda", generator=g), full_matrices=False)
        L = torch.randn(shape[0], shape[1], 40, device="cuda", generator=g) @ torch.randn(40, shape[2], device="cuda",
                                                                                          generator=g)
        check_svd(L, full_matrices=True)
        print("ok")
    """, JSVD_TUNER="0")
    assert out.strip().endswith("ok"), out[-2000:]


def test_pair_level_carrying_delta_at_1024_rows():
    # 1024-row pairs: a list (no QR, no auto-tuner) of matrices under the GEMM level's 1024 columns.
    shapes = [(1024, 992), (1024, 960)] * 3
    plan = torch_jsvd.plan(shapes, dtype=torch.float32, device="cuda")["matrices"][0]
    assert plan["levels"][1].get("carries") == "delta", plan
    As = [torch.randn(m, n, device="cuda") for m, n in shapes]
    _assert_varlen_accurate(As, full_matrices=False)


def _assert_varlen_accurate(As, full_matrices):
    U, S, Vh = torch_jsvd.svd_varlen(As, full_matrices=full_matrices)
    for A, u, s, vh in zip(As, U, S, Vh):
        assert_valid_svd(A, u, s, vh, full_matrices)
        ref = reference_svdvals(A)
        assert ((s.double() - ref).abs().max() / ref[0]).item() <= bound(*A.shape, A.dtype)


def test_pair_level_list_mixing_delta_and_v_rows():
    shapes = [(512, 512)] * 8 + [(512, 464), (512, 512)]
    plans = torch_jsvd.plan(shapes, dtype=torch.float32, device="cuda")["matrices"]
    assert [p["levels"][1].get("carries") for p in plans] == ["delta"] * 8 + ["v_rows", "delta"]
    _assert_varlen_accurate([torch.randn(m, n, device="cuda") for m, n in shapes], False)


def test_pair_level_list_all_carrying_delta():
    """A list whose pairs all carry E: the kDelta kernel reads each matrix
    through the descriptor table, with square, tall and (transposed) wide
    matrices of different q in one launch (the planner's choice for a list of
    17 is checked without a GPU in cpp_tests/planner_test.cpp)."""
    shapes = [(512, 512)] * 15 + [(512, 256), (256, 512)]
    plans = torch_jsvd.plan(shapes, dtype=torch.float32, device="cuda")["matrices"]
    assert [p["levels"][1].get("carries") for p in plans] == ["delta"] * len(shapes), plans
    As = [torch.randn(m, n, device="cuda") for m, n in shapes]
    for full in (False, True):
        _assert_varlen_accurate(As, full)


@pytest.mark.parametrize("full_matrices", [False, True])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_pair_level_list_of_different_shapes(dtype, full_matrices):
    """Several blocked-level matrices of different shapes in one launch: pairs of
    different heights and widths share the shared-memory size of the largest
    (float32 pairs carry V's rows, float64 pairs their rotation)."""
    shapes = [(300, 200), (256, 256), (200, 330), (520, 300), (260, 190)]
    for m, n in shapes:
        lv = torch_jsvd.plan([(m, n)], dtype=dtype, device="cuda")["matrices"][0]["levels"]
        assert lv[-1]["kernel"] == "pair_svd_smem", (m, n, lv)
    _assert_varlen_accurate([torch.randn(m, n, dtype=dtype, device="cuda") for m, n in shapes], full_matrices)


@pytest.mark.parametrize("shape", [(3, 300, 300), (3, 1100, 700)])
def test_blocked_levels_scale_each_matrix(shape):
    """The blocked levels divide each matrix by its max|a| (found by many blocks
    per matrix) before the sweeps: magnitudes whose squares overflow or
    underflow float32 still give S to full accuracy, matrix by matrix."""
    A = torch.randn(*shape, device="cuda")
    A[0] *= 1e30
    A[1] *= 1e-30
    A[2, 5, 7] = 1e3  # one large entry
    U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
    ref = reference_svdvals(A)
    err = ((S.double() - ref).abs().amax(-1) / ref[..., 0]).max().item()
    assert err < 10 * max(shape[1:]) * 6e-8
    assert_valid_svd(A, U, S, Vh, False)


def test_uniform_batch_plan_reused_across_calls_and_streams():
    """A uniform batch's plan and uploaded task queue are kept by shape
    (jacobi_svd_cuda.cpp, uniform_prep): a later call with the same shape, on
    another stream, reuses them and must give the same factors."""
    As = [torch.randn(9, 512, 512, device="cuda"), torch.randn(3, 300, 300, device="cuda"),
          torch.randn(4, 2048, 16, device="cuda")]
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



@pytest.mark.parametrize("dtype", DTYPES)
def test_a_million_small_matrices_with_rank_deficient_ones_far_in(dtype):
    # A uniform batch is planned and packed without per-matrix host work (PackedBatch::uniform_of), the
    # warp level checks its own results for finiteness, and the completion of U's columns strides over
    # the matrices with a bounded grid: rank-deficient matrices far beyond the first blocks, a zero
    # matrix, and a non-finite one must all come out right.
    B = 300_000 if dtype == torch.float64 else 1_000_000
    g = torch.Generator(device="cuda").manual_seed(20)
    A = torch.randn(B, 3, 3, dtype=dtype, device="cuda", generator=g)
    x = torch.randn(3, 1, dtype=dtype, device="cuda", generator=g)
    for k in (0, 5000, 123_457, B - 1):
        A[k] = x @ x.mT  # rank one
    A[B // 2] = 0
    A[B // 3, 1, 2] = float("nan")
    assert torch_jsvd.plan([(3, 3)] * 2, dtype=dtype, device="cuda")["matrices"][0]["levels"][0]["kernel"] == "whole_svd_warp"
    U, S, Vh, info = torch_jsvd.svd_ex(A, full_matrices=True)
    bad = torch.zeros(B, dtype=torch.bool, device="cuda")
    bad[B // 3] = True
    assert info[B // 3].item() == torch_jsvd.INFO_NON_FINITE and torch.isnan(S[B // 3]).all()
    assert (info[~bad] > 0).all()
    keep = (~bad).nonzero().squeeze(1)
    picks = torch.cat([torch.tensor([0, 5000, 123_457, B - 1, B // 2], device="cuda"), keep[::97]])
    assert_valid_svd(A[picks], U[picks], S[picks], Vh[picks], True)
    # every matrix's U and V orthogonal, not only the sample
    eye = torch.eye(3, dtype=dtype, device="cuda")
    tol = bound(3, 3, dtype)
    assert ((U[keep].mT @ U[keep] - eye).norm(dim=(-2, -1)).max()).item() <= tol
    assert ((Vh[keep] @ Vh[keep].mT - eye).norm(dim=(-2, -1)).max()).item() <= tol
    ref = torch.linalg.svdvals(A[keep].double())
    assert ((S[keep].double() - ref).abs().amax(-1) / ref[:, :1].clamp_min(1e-300).squeeze(-1)).max().item() <= tol
