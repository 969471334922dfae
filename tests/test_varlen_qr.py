"""svd_varlen's QR preconditioning (issue 20; kernels/qr/qr_list.cpp), on with JSVD_LIST_QR=1 (off by
default: slower on most lists measured): a list's tall members, and its wide ones transposed, that a
uniform batch of their shape would QR-precondition in one launch take that QR too, in one launch for the
list, and their Jacobi on R^T (float64: R2^T) runs beside the other members' own. Checked against float64
references, with full U, rank-deficient, zero, graded and non-finite members, and against the uniform
batch of each member alone. The engine reads the switch once per process: test_with_list_qr_on runs this
file in a child with it set. Skipped without a CUDA device."""

import os

import pytest
import torch

import torch_jsvd
from jsvd_testutils import assert_valid_svd, bound, reference_svdvals, run_child

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]
LIST_QR = os.environ.get("JSVD_LIST_QR") == "1"
with_list_qr = pytest.mark.skipif(not LIST_QR, reason="run with JSVD_LIST_QR=1 by test_with_list_qr_on")


def test_with_list_qr_on():
    if LIST_QR:
        pytest.skip("(the child itself)")
    run_child(f"import sys, pytest; sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', {__file__!r}]))",
              JSVD_LIST_QR="1")


def test_off_by_default():
    shapes = [(200, 50), (3, 3)]
    assert ("precondition" in torch_jsvd.plan(shapes, device="cuda")["matrices"][0]) == LIST_QR


# Tall and wide members the one-launch QR takes (float32: from 32 columns where rows >= 3 cols, from 16
# where rows >= max(256, 16 cols); float64 from 32 columns, and from 16 where rows >= max(512, 8 cols)),
# beside members of every other level: thread, warp, whole matrices, block pairs, a tall one too large
# for the one-launch QR, size 0, 1 x n and n x 1.
QR = {torch.float32: [(200, 50), (50, 200), (900, 20), (96, 32), (700, 48), (130, 40), (400, 16)],
      torch.float64: [(64, 40), (40, 64), (600, 20), (300, 60), (700, 24), (33, 33), (90, 80)]}
OTHERS = [(3, 3), (1, 7), (7, 1), (0, 5), (5, 0), (40, 30), (30, 90), (90, 24), (120, 120), (260, 250),
          (3000, 40)] + [(k % 13 + 2, k % 7 + 2) for k in range(40)]


def _takes_qr(shapes, dtype):
    return ["precondition" in m for m in torch_jsvd.plan(shapes, dtype=dtype, device="cuda")["matrices"]]


def _whole_qr_alone(shape, dtype):
    """Whether a uniform batch of this shape takes the one-launch QR (its plan)."""
    pre = torch_jsvd.plan([shape] * 2, dtype=dtype, device="cuda", sync=False)["matrices"][0].get("precondition")
    return bool(pre) and pre["kernel"].startswith("householder_qr_whole")


@with_list_qr
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_plan_shows_the_members_that_take_the_qr(dtype):
    # Exactly where a uniform batch of the member's shape takes the one-launch QR.
    shapes = QR[dtype] + OTHERS
    takes = _takes_qr(shapes, dtype)
    assert takes == [_whole_qr_alone(s, dtype) if min(s) else False for s in shapes]
    assert all(takes[:len(QR[dtype])]) and not all(takes)
    plan = torch_jsvd.plan(shapes, dtype=dtype, device="cuda")["matrices"]
    for s, m in zip(shapes, plan):
        if "precondition" in m:
            assert m["precondition"]["kernel"] == "householder_qr_whole_smem"
            assert m["precondition"]["jacobi_on"] == [min(s)] * 2


@with_list_qr
@pytest.mark.parametrize("full_matrices", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_list_with_qr_members_accurate(dtype, full_matrices):
    g = torch.Generator(device="cuda").manual_seed(0)
    shapes = QR[dtype] + OTHERS
    As = [torch.randn(s, dtype=dtype, device="cuda", generator=g) for s in shapes]
    U, S, Vh = torch_jsvd.svd_varlen(As, full_matrices)
    for A, u, s, vh in zip(As, U, S, Vh):
        assert_valid_svd(A, u, s, vh, full_matrices)
        if A.numel():
            ref = reference_svdvals(A)
            assert (s.double() - ref).abs().max() <= bound(*A.shape, dtype) * ref[0], A.shape
    # The same singular values as each member alone in a uniform batch (which takes the same QR).
    for A, s in zip(As[:len(QR[dtype])], S):
        s1 = torch_jsvd.svd_ex(A, full_matrices=False).S
        torch.testing.assert_close(s, s1, rtol=0, atol=10 * torch.finfo(dtype).eps * s1[0].item())
    # svdvals of the list: S only, the same values
    S2 = torch_jsvd.svd_varlen(As, compute_uv=False).S
    for s, s2 in zip(S, S2):
        if s.numel():
            torch.testing.assert_close(s, s2, rtol=0, atol=10 * torch.finfo(dtype).eps * s[0].item())


@with_list_qr
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_rank_deficient_zero_and_non_finite_members(dtype):
    g = torch.Generator(device="cuda").manual_seed(1)
    mk = lambda m, n: torch.randn(m, n, dtype=dtype, device="cuda", generator=g)
    low = mk(300, 4) @ mk(4, 40)                 # rank 4
    rep = mk(200, 50)
    rep[:, 25:] = rep[:, :25]                    # repeated columns
    zero = torch.zeros(400, 40, dtype=dtype, device="cuda")
    wide_low = mk(40, 3) @ mk(3, 500)           # wide, rank 3
    As = [low, rep, zero, wide_low, mk(60, 60), mk(7, 3)]
    assert all(_takes_qr([tuple(a.shape) for a in As], dtype)[:4])
    for full in (False, True):
        U, S, Vh = torch_jsvd.svd_varlen(As, full)
        for A, u, s, vh in zip(As, U, S, Vh):
            assert_valid_svd(A, u, s, vh, full)
        assert (S[2] == 0).all()
        assert (S[0][4:] <= 1e-5 * S[0][0]).all() and (S[1][25:] <= 1e-5 * S[1][0]).all()
    # A NaN in a member that takes the QR: svd_varlen raises, as for any member.
    bad = [a.clone() for a in As]
    bad[1][3, 4] = float("nan")
    with pytest.raises(torch.linalg.LinAlgError, match="NaN or Inf"):
        torch_jsvd.svd_varlen(bad)


@with_list_qr
def test_graded_float64_member_keeps_relative_accuracy():
    """A column-graded float64 member (kappa 1e12) keeps the relative accuracy of every singular
    value on the list's QR as on the uniform one (rows sorted, two QRs; reference: the CPU engine)."""
    g = torch.Generator().manual_seed(2)
    m, n = 60, 300  # wide: its rows graded in the engine's tall orientation (the QR sorts them)
    B = torch.randn(m, n, dtype=torch.float64, generator=g)
    A = (B * torch.logspace(0, -12, n, dtype=torch.float64))[:, torch.randperm(n, generator=g)]
    As = [A, torch.randn(50, 20, dtype=torch.float64), torch.randn(70, 70, dtype=torch.float64)]
    assert _takes_qr([tuple(a.shape) for a in As], torch.float64)[0]
    ref = torch_jsvd.svdvals(A)
    S = torch_jsvd.svd_varlen([a.cuda() for a in As], compute_uv=False).S[0].cpu()
    rel = ((S - ref).abs() / ref).max()
    assert rel <= 100 * n * torch.finfo(torch.float64).eps, rel


@with_list_qr
def test_nested_tensor_and_jsvd_qr_off():
    # The nested form takes the same path; JSVD_QR=0 (a child process reads it) still solves the list.
    out = run_child("""
import torch, torch_jsvd
g = torch.Generator(device="cuda").manual_seed(3)
As = [torch.randn(s, device="cuda", generator=g) for s in [(200, 50), (50, 200), (30, 30)]]
print(max(float((s.double() - torch.linalg.svdvals(a.double())).abs().max() / s[0]) for a, s in
          zip(As, torch_jsvd.svd_varlen(As).S)))
print("precondition" in torch_jsvd.plan([(200, 50), (30, 30)], device="cuda")["matrices"][0])
""", JSVD_QR="0")
    err, pre = out.split()
    assert float(err) <= 1e-5 and pre == "False"
    g = torch.Generator(device="cuda").manual_seed(4)
    As = [torch.randn(s, device="cuda", generator=g) for s in [(200, 50), (50, 200), (30, 30), (96, 32)]]
    nt = torch.nested.nested_tensor(As, layout=torch.strided)
    U, S, Vh = torch_jsvd.svd_varlen(nt)
    for A, u, s, vh in zip(As, U.unbind(), S.unbind(), Vh.unbind()):
        assert_valid_svd(A, u, s, vh, False, check_strides=False)
