"""The Gram eigenvectors' start for a list's large near-square members (kernels/precondition/list_start.h).

svd_varlen's members of 256 to 768 columns (float64 1024) with rows < 2 cols take the start where the list
has as many as a uniform batch's minimum for syevBatched (float32 100, float64 40): their Gram matrices
padded to a size class, one syevBatched a class, the Jacobi on X = M V0. Checked: the plan, every output
property on lists that mix structured large members (rank-deficient, zero, graded, scaled, wide) with
small ones, agreement with float64 singular values, and in child processes (the engine reads its
switches once per process) that members the start declines are solved exactly as with it off
(JSVD_LIST_START=0) while the others are not. Skipped without a CUDA device.
"""

import pytest
import torch

import torch_jsvd
from jsvd_testutils import (SYEV_BATCHED, assert_valid_svd, bound, random_rank, random_spectrum, reference_svdvals,
                            run_child, start_v)

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

SMALL = [(8, 5), (5, 8), (1, 300), (300, 1), (40, 30), (0, 7), (600, 64)]


def _large_shapes(count, lo, hi, seed):
    g = torch.Generator().manual_seed(seed)
    shapes = []
    for i in range(count):
        n = int(torch.randint(lo, hi + 1, (1,), generator=g))
        m = n + int(torch.randint(0, n // 2, (1,), generator=g))  # (rows < 1.5 cols: near-square)
        shapes.append((m, n) if i % 3 else (n, m))  # (every third wide)
    return shapes


@pytest.mark.parametrize("dtype, count", [(torch.float32, 100), (torch.float64, 40)], ids=["float32", "float64"])
def test_plan(dtype, count):
    """From the minimum count on, every near-square member of 256 columns or more has start_v, padded to a
    multiple of 128 columns at least its own; below it, or with svd_ex (sync=False), none; small and long
    members never."""
    shapes = _large_shapes(count, 256, 400, seed=1) + SMALL
    plan = start_v(shapes, dtype)
    for (m, n), s in zip(shapes, plan):
        if min(m, n) >= 256:
            assert s is not None and s["solver"] == SYEV_BATCHED
            assert s["padded_to"] % 128 == 0 and min(m, n) <= s["padded_to"] < min(m, n) + 128
        else:
            assert s is None
    assert all(s is None for s in start_v(shapes[: count - 1] + SMALL, dtype))
    sync_off = torch_jsvd.plan(shapes, dtype=dtype, device="cuda", sync=False)["matrices"]
    assert all("start_v" not in m for m in sync_off)


def _structured(shapes, dtype, seed):
    """Gaussian members, and among the large ones a rank-deficient, a zero, a column-graded (6 decades), a
    tiny-scaled and a huge-scaled one."""
    g = torch.Generator().manual_seed(seed)
    As = [torch.randn(s, generator=g, dtype=torch.float64) for s in shapes]
    big = [i for i, (m, n) in enumerate(shapes) if min(m, n) >= 256]
    As[big[0]] = random_rank(shapes[big[0]], min(shapes[big[0]]) // 3)
    As[big[1]].zero_()
    As[big[2]] *= torch.logspace(0, -6, shapes[big[2]][1], dtype=torch.float64)
    As[big[3]] *= 1e-30 if dtype == torch.float32 else 1e-200
    As[big[4]] *= 1e30 if dtype == torch.float32 else 1e200
    return [A.to(dtype).cuda() for A in As]


@pytest.mark.parametrize("full_matrices", [False, True], ids=["reduced", "full"])
@pytest.mark.parametrize("dtype, count", [(torch.float32, 100), (torch.float64, 40)], ids=["float32", "float64"])
def test_outputs(dtype, count, full_matrices):
    """A list of large structured members and small ones: each member a valid SVD (orthogonal U and V,
    reconstruction, descending S) whose S agrees with float64 LAPACK's; svdvals-style (compute_uv=False)
    gives the same S."""
    shapes = _large_shapes(count, 256, 330, seed=2) + SMALL
    As = _structured(shapes, dtype, seed=3)
    Us, Ss, Vhs = torch_jsvd.svd_varlen(As, full_matrices)
    _, S2, _ = torch_jsvd.svd_varlen(As, compute_uv=False)
    for A, U, S, Vh, s2 in zip(As, Us, Ss, Vhs, S2):
        m, n = A.shape
        if min(m, n) == 0:
            continue
        assert_valid_svd(A, U, S, Vh, full_matrices, check_strides=False)
        ref = reference_svdvals(A)
        scale = ref[0].clamp_min(1e-300)
        assert ((S.double() - ref).abs().max() / scale) <= bound(m, n, dtype), (m, n)
        assert ((s2.double() - ref).abs().max() / scale) <= bound(m, n, dtype), (m, n)


def test_graded_float64_members_keep_small_singular_values():
    """A float64 member graded over 10 decades by columns (beyond the start's column ratio) keeps its
    small singular values to 1e-10 relative (against the CPU engine's Jacobi on it)."""
    shapes = _large_shapes(40, 256, 300, seed=4)
    As = _structured(shapes, torch.float64, seed=5)
    g = torch.Generator().manual_seed(6)
    n = shapes[7][1]
    As[7] = (torch.randn(shapes[7], generator=g, dtype=torch.float64) *
             torch.logspace(0, -10, n, dtype=torch.float64)[torch.randperm(n, generator=g)]).cuda()
    S = torch_jsvd.svd_varlen(As)[1][7].cpu()
    ref = torch_jsvd.svdvals(As[7].cpu())
    assert ((S - ref).abs() / ref).max() <= 1e-10


def test_declined_members_as_without_the_start(tmp_path):
    """float64: members graded by columns beyond the start's ratio (12 decades), with a zero column, or
    whose singular values span 12 decades keep their A, and come out bit for bit as with JSVD_LIST_START=0;
    the Gaussian members take the start (other bits); every S agrees with LAPACK's."""
    g = torch.Generator().manual_seed(7)
    shapes = _large_shapes(40, 256, 300, seed=8)
    A = [torch.randn(s, generator=g, dtype=torch.float64) for s in shapes]
    n0, n2 = shapes[0][0], shapes[2][1]  # (member 0 is wide: the engine's columns are its rows)
    assert n0 < shapes[0][1]
    A[0] *= torch.logspace(0, -12, n0, dtype=torch.float64)[torch.randperm(n0, generator=g)][:, None]
    A[1][:, 5] = 0
    A[2] = random_spectrum(shapes[2][0], n2, 12, g)
    torch.save(A, tmp_path / "A.pt")
    code = f"""
        import os, torch, torch_jsvd
        A = [a.cuda() for a in torch.load({str(tmp_path / "A.pt")!r})]
        torch.save([s.cpu() for s in torch_jsvd.svd_varlen(A)[1]], os.environ["OUT"])
    """
    run_child(code, JSVD_TUNER="0", OUT=str(tmp_path / "S.pt"))
    run_child(code, JSVD_TUNER="0", JSVD_LIST_START="0", OUT=str(tmp_path / "S_off.pt"))
    S, S_off = torch.load(tmp_path / "S.pt"), torch.load(tmp_path / "S_off.pt")
    # (member 1's zero column fails the column ratio: declined before the solver)
    assert [torch.equal(s, t) for s, t in zip(S[:3], S_off[:3])] == [True, True, True]
    assert sum(torch.equal(s, t) for s, t in zip(S[3:], S_off[3:])) == 0
    for s, a in zip(S, A):
        ref = torch.linalg.svdvals(a)
        assert ((s - ref).abs().max() / ref[0]) <= bound(*a.shape, torch.float64)


def test_non_finite_member_reported():
    """A NaN in a member that would take the start declines it alone, and svd_varlen raises like svd."""
    shapes = _large_shapes(100, 256, 300, seed=9)
    As = [torch.randn(s, device="cuda") for s in shapes]
    As[10][3, 4] = float("nan")
    with pytest.raises(torch.linalg.LinAlgError):
        torch_jsvd.svd_varlen(As)
