"""V by the log of rotations (kernels/levels/smem/kernel_log_v.cuh): float64 whole matrices whose V does not
fit beside A in one block's shared memory keep A there alone, log each step's rotations and apply a sweep's
log to V in global memory, instead of going to block pairs. Each shape asserts its plan (the register steps;
the shared-memory steps, which JSVD_LOG_V=2 allows, in a child), then the results against float64 LAPACK and
against the block pairs that JSVD_LOG_V=0 restores (in a fresh process: the engine reads its switches once).
Skipped without CUDA.
"""

import pytest
import torch

import torch_jsvd
from jsvd_testutils import (assert_valid_svd, bound, check_against_child, orthogonality_error, random_spectrum,
                            reference_svdvals, run_child)

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

F64 = torch.float64
# (batch, m, n): 128² and 128 x 121 (odd columns), on float64's register steps (8 rows a lane, 16 lanes a
# rotation), where the planner takes the log (planner.cpp, plan_matrix); the shared-memory steps in a child
SHAPES = [(4, 128, 128), (3, 128, 121)]
IDS = [f"{b}x{m}x{n}" for b, m, n in SHAPES]


def _level(b, m, n, sync=True):
    return torch_jsvd.plan([(m, n)] * b, dtype=F64, device="cuda", sync=sync)["matrices"][0]["levels"][0]


def _mixed(b, m, n, seed):
    """Gaussian members, then (where the batch has them) rank n // 3, a zero column, graded columns over
    ten decades and a spectrum over twelve decades."""
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(b, m, n, generator=g, dtype=F64)
    extra = [lambda: torch.randn(m, n // 3, generator=g, dtype=F64) @ torch.randn(n // 3, n, generator=g, dtype=F64),
             lambda: torch.cat([torch.randn(m, n - 1, generator=g, dtype=F64), torch.zeros(m, 1, dtype=F64)], 1),
             lambda: torch.randn(m, n, generator=g, dtype=F64) * torch.logspace(0, -10, n, dtype=F64),
             lambda: random_spectrum(m, n, 12, generator=g)]
    for k in range(1, b):
        A[k] = extra[(k - 1) % len(extra)]()
    return A.cuda()


@pytest.mark.parametrize("b,m,n", SHAPES, ids=IDS)
def test_plan_takes_the_log_where_v_does_not_fit(b, m, n):
    lv = _level(b, m, n, sync=False)  # (svd_ex's; svd's QR path solves for V instead, test_qr_precondition.py)
    assert lv["kernel"] == "whole_svd_smem" and lv.get("v") == "rotation_log" and lv["steps"] == "registers", lv
    if torch.cuda.get_device_capability() >= (9, 0):  # (227 KB a block: V's rows two a warp, 8 steps of the log)
        rows, steps = lv["log_staging"]
        assert rows >= 2 * (lv["threads"] // 32) and steps >= 8, lv
    assert lv["log_sweeps_held"] == 4, lv  # (the log applied after the kernel: log_v_apply.cu)
    # svd's Jacobi on the start's X = A V0 (a batch of near-square float64 matrices: the float32-solved start)
    start = torch_jsvd.plan([(128, 128)] * 200, dtype=F64, device="cuda")["matrices"][0]
    assert "start_v" in start and start["levels"][0].get("v") == "rotation_log", start
    assert start["levels"][0]["log_sweeps_held"] == 4, start
    # 2000 matrices: a sweep's log is 390 MB, over the log's 256 MB; one sweep held (the kernel applies it)
    many = _level(2000, 128, 128, sync=False)
    assert many.get("log_sweeps_held") == 1, many
    # float64's shared-memory steps (150 x 141: 8 lanes a rotation; 200 x 117: 16 rows a lane) keep the
    # block pairs, which were faster
    assert _level(2, 150, 141, sync=False)["kernel"] == "block_pairs"
    assert _level(2, 200, 117, sync=False)["kernel"] == "block_pairs"
    # V fits beside A: no log; float32, svdvals and a list: none either
    assert "v" not in _level(b, 64, 64)
    assert "v" not in torch_jsvd.plan([(m, n)] * b, dtype=torch.float32, device="cuda")["matrices"][0]["levels"][0]
    vals = torch_jsvd.plan([(m, n)] * b, dtype=F64, device="cuda", compute_uv=False)["matrices"][0]["levels"][0]
    assert "v" not in vals
    listed = torch_jsvd.plan([(m, n), (m - 1, n)], dtype=F64, device="cuda")["matrices"][0]["levels"][0]
    assert listed.get("v") != "rotation_log", listed


@pytest.mark.parametrize("full_matrices", [False, True])
@pytest.mark.parametrize("b,m,n", SHAPES, ids=IDS)
def test_svd_ex_by_the_log(b, m, n, full_matrices):
    """svd_ex (no start, no host read): a valid SVD, S to float64 LAPACK's bound, info the sweeps; the wide
    transpose as well."""
    A = _mixed(b, m, n, seed=n)
    for X in (A, A.mT):
        U, S, Vh, info = torch_jsvd.svd_ex(X, full_matrices=full_matrices)
        assert (info > 0).all(), info
        assert_valid_svd(X, U, S, Vh, full_matrices)
        ref = reference_svdvals(X)
        assert ((S - ref).abs().amax(-1) / ref[..., 0]).max() <= bound(m, n, F64)


@pytest.mark.parametrize("b,m,n", SHAPES, ids=IDS)
def test_log_against_block_pairs(tmp_path, b, m, n):
    """svd by the log against svd with JSVD_LOG_V=0 (the block pairs) in a fresh process: S within the bound
    of each other and of LAPACK's, U and V as orthogonal (check_against_child)."""
    A = _mixed(b, m, n, seed=7 * n)
    U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
    check_against_child(tmp_path, A, U, S, Vh, JSVD_LOG_V="0")


def test_graded_columns_keep_small_singular_values():
    """Column-graded float64 (A = B D, B's columns of unit norm, D over 12 decades, unordered): one-sided
    Jacobi's relative accuracy of every singular value (about eps kappa(B)), which V's log must not spoil;
    the reference is the CPU engine's (test_graded.py checks it against mpmath)."""
    g = torch.Generator().manual_seed(3)
    n = 128
    B = torch.randn(2, n, n, generator=g, dtype=F64)
    B = B / torch.linalg.vector_norm(B, dim=-2, keepdim=True)
    A = B * torch.logspace(0, -12, n, dtype=F64)[torch.randperm(n, generator=g)]
    assert _level(2, n, n, sync=False).get("v") == "rotation_log"
    U, S, Vh, info = torch_jsvd.svd_ex(A.cuda(), full_matrices=False)
    assert (info > 0).all()
    ref = torch_jsvd.svdvals(A)
    assert ref[:, 0].min() / ref[:, -1].max() > 1e10  # really that ill-conditioned
    tol = 10 * n * torch.finfo(F64).eps * torch.linalg.cond(B).max().item()
    rel = ((S.cpu() - ref).abs() / ref).max().item()
    assert rel <= tol, (rel, tol)
    assert orthogonality_error(Vh.mT).max().item() <= bound(n, n, F64)


def test_non_finite_and_max_sweeps():
    """A NaN member: NaN outputs and a negative info, its neighbours unharmed; one sweep allowed: a
    negative info (not converged), never a silent answer."""
    A = _mixed(3, 128, 121, seed=11)
    A[1, 5, 7] = float("nan")
    U, S, Vh, info = torch_jsvd.svd_ex(A, full_matrices=False)
    assert info[1] < 0 and torch.isnan(S[1]).all() and torch.isnan(Vh[1]).all(), (info, S[1, :3], Vh[1, 0, :3])
    assert info[0] > 0 and info[2] > 0, info
    assert_valid_svd(A[0::2], U[0::2], S[0::2], Vh[0::2], False, check_strides=False)
    info1 = torch_jsvd.svd_ex(_mixed(2, 128, 121, seed=12), max_sweeps=1)[3]
    assert (info1 < 0).all(), info1


def test_shared_memory_steps_by_the_log():
    """The log's other half: the shared-memory steps (JSVD_LOG_V=2 JSVD_WHOLE_REGS=0, in a fresh process),
    a slot per pair; 200 x 117 ends its block in a partial warp (59 groups of 16 lanes), which the log's
    pass skips."""
    out = run_child("""
        import torch, torch_jsvd, jsvd_testutils as t
        from test_log_v import _level, _mixed
        for b, m, n in [(2, 128, 128), (3, 200, 117)]:
            lv = _level(b, m, n, sync=False)
            assert lv.get("v") == "rotation_log" and lv["steps"] == "shared", lv
            A = _mixed(b, m, n, seed=m)
            U, S, Vh, info = torch_jsvd.svd_ex(A, full_matrices=False)
            assert (info > 0).all(), info
            t.assert_valid_svd(A, U, S, Vh, False)
            ref = t.reference_svdvals(A)
            assert ((S - ref).abs().amax(-1) / ref[..., 0]).max() <= t.bound(m, n, A.dtype)
        print("ok")
    """, JSVD_LOG_V="2", JSVD_WHOLE_REGS="0")
    assert out.strip().endswith("ok"), out


def test_switch_off_restores_block_pairs():
    out = run_child("""
        import torch, torch_jsvd
        lv = torch_jsvd.plan([(128, 128)] * 4, dtype=torch.float64, device="cuda", sync=False)["matrices"][0]["levels"]
        print(lv[0]["kernel"], lv[0].get("v"))
    """, JSVD_LOG_V="0")
    assert out.split()[-2:] == ["block_pairs", "None"], out


@pytest.mark.parametrize("b,m,n", SHAPES, ids=IDS)
def test_deferred_log_as_in_kernel(tmp_path, b, m, n):
    """The log applied after the kernel (log_v_apply.cu; JSVD_LOG_DEFER=N sweeps held, 4 by default) against
    each sweep's log applied in the kernel (=0): svd_ex (no start: ~10 sweeps, so the log fills and the
    kernel applies the held sweeps itself), svd (the Jacobi on the start's X) and a batch with a NaN member,
    equal to the bit; =1 and =2 too (a ring of one or two sweeps: the kernel applies the oldest where it
    fills, the pass after it the rest and the permutation); 200 x 128² svd (the Jacobi on the start's X, the benchmark's
    case) as well."""
    A = _mixed(max(b, 5), m, n, seed=5 * n)
    A_nan = A.clone()
    A_nan[1, 3, 4] = float("nan")
    torch.save([A.cpu(), A_nan.cpu()], tmp_path / "A.pt")
    code = f"""
        import os, torch, torch_jsvd
        A, A_nan = (t.cuda() for t in torch.load({str(tmp_path / "A.pt")!r}))
        out = [t.cpu() for t in torch_jsvd.svd_ex(A, full_matrices=False)]
        out += [t.cpu() for t in torch_jsvd.svd(A, full_matrices=False)]
        out += [t.cpu() for t in torch_jsvd.svd_ex(A_nan, full_matrices=True)]
        g = torch.Generator(device="cuda").manual_seed(1)
        A2 = torch.randn(200, 128, 128, generator=g, device="cuda", dtype=torch.float64)
        out += [t.cpu() for t in torch_jsvd.svd(A2, full_matrices=False)]
        torch.save(out, os.environ["OUT"])
    """
    outs = {}
    for knob in ("4", "0", "1", "2"):
        run_child(code, OUT=str(tmp_path / f"r{knob}.pt"), JSVD_LOG_DEFER=knob)
        outs[knob] = torch.load(tmp_path / f"r{knob}.pt")
    for knob in ("0", "1", "2"):
        for x, y in zip(outs["4"], outs[knob]):
            assert torch.equal(x.nan_to_num(), y.nan_to_num()), knob
    U, S, Vh, info = outs["4"][:4]
    assert (info > 0).all() and (info >= 5).any(), info  # (more sweeps than the log holds: a flush in the kernel)
    assert_valid_svd(A.cpu(), U, S, Vh, False)
    info_nan = outs["4"][10]
    assert info_nan[1] < 0 and (info_nan[torch.arange(len(info_nan)) != 1] > 0).all(), info_nan
    assert torch.isnan(outs["4"][9][1]).all()  # (the NaN member's V: the kernel's, not the pass's)
    U2, S2, Vh2 = outs["4"][11:]  # (200 x 128²: svd's Jacobi on the start's X, test_plan_takes_the_log...)
    assert orthogonality_error(Vh2.mT).max().item() <= bound(128, 128, F64)
    assert orthogonality_error(U2).max().item() <= bound(128, 128, F64)
