"""QR preconditioning of the CUDA engine (kernels/qr/qr_precondition.*): uniform
batches of at least 256 columns (float64: 32, or 16 when tall) are factored W P = QR and the Jacobi
runs on R^T (float64: on R2^T of a second QR, R^T = Q2 R2); by one launch with the
matrix in shared memory where it fits (qr_whole_smem.cu), else by a blocked
Householder QR (float64 from 128 columns, or 16 from max(512, 8n) rows). Checked
against float64 references on shapes that take the one-launch QR and 32-, 16- and
8-column panels, a block or a warp a panel, square, tall and wide, with full U.
Skipped without a CUDA device."""

import pytest
import torch

import torch_jsvd
from jsvd_testutils import (assert_valid_svd, bound, orthogonality_error, reference_svdvals, rel_reconstruction_error,
                            run_child)

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


def _precondition(shapes, dtype, keep_v=False):
    """The QR of svd_ex's plan, which svd shares but where it starts from the Gram eigenvectors
    (test_eigh_precondition.py); with keep_v, svd's, whose V may be a triangular solve."""
    plan = torch_jsvd.plan(shapes, dtype=dtype, device="cuda", sync=keep_v)
    pre = [m.get("precondition") for m in plan["matrices"]]
    return pre if keep_v else [p and {k: v for k, v in p.items() if k != "v"} for p in pre]


def _svd(A, full_matrices):
    """svd, or svd_ex where svd would start from the Gram eigenvectors instead of the QR this file tests."""
    shapes = [tuple(A.shape[-2:])] * max(1, A[..., 0, 0].numel())
    if torch_jsvd.plan(shapes, dtype=A.dtype, device="cuda")["matrices"][0].get("start_v"):
        U, S, Vh, info = torch_jsvd.svd_ex(A, full_matrices=full_matrices)
        assert (info >= 0).all(), info
        return U, S, Vh
    return torch_jsvd.svd(A, full_matrices=full_matrices)


def test_plan_reports_the_qr():
    pre = _precondition([(512, 512)] * 4, torch.float32)
    assert pre == [{"kernel": "householder_qr", "panel_width": 32, "jacobi_on": [512, 512]}] * 4
    # the levels are those of the Jacobi on R^T (300 x 300, not 600 x 300)
    wide = torch_jsvd.plan([(300, 600)] * 2, dtype=torch.float32, device="cuda")["matrices"][0]
    assert wide["transposed"] and wide["precondition"]["jacobi_on"] == [300, 300]
    assert _precondition([(1600, 256)], torch.float64)[0]["panel_width"] == 16
    assert _precondition([(3000, 256)] * 2, torch.float64)[0]["panel_width"] == 8
    # not for fewer than 256 columns, nor for a list of different shapes
    assert _precondition([(512, 255)] * 2, torch.float32) == [None, None]
    assert _precondition([(512, 512), (512, 500)], torch.float32) == [None, None]
    # ... but a list's shape shared by >= 32 members is solved as a uniform batch: its QR (the rest without)
    # (130 columns: float32's tall batches of 65 to 128 take the Gram eigenvectors' start instead)
    shapes = [(600, 130)] * 32 + [(600, 90), (40, 40)]
    plan = torch_jsvd.plan(shapes, dtype=torch.float32, device="cuda")["matrices"]
    assert [m.get("shape_group") for m in plan] == [32] * 32 + [None, None]
    assert [m.get("precondition", {}).get("jacobi_on") for m in plan] == [[130, 130]] * 32 + [None, None]
    assert "shape_group" not in torch_jsvd.plan([(900, 100)] * 33, device="cuda")["matrices"][0]  # uniform
    # float64: from 32 columns in one launch where the matrix fits in shared memory, else blocked from
    # 128 columns; and from 16 where rows >= max(512, 8 columns)
    # (in registers where rows >= 4 columns <= 32 and the rows fit 256 threads, 512 up to 16 columns,
    # else in shared memory)
    whole = {"kernel": "householder_qr_whole_smem", "panel_width": 0}
    regs = {"kernel": "householder_qr_whole_regs", "panel_width": 0}
    assert _precondition([(64, 32)] * 3, torch.float64) == [dict(whole, jacobi_on=[32, 32])] * 3
    assert _precondition([(128, 32)] * 3, torch.float64) == [dict(regs, jacobi_on=[32, 32])] * 3
    assert _precondition([(32, 32)], torch.float64) == [dict(whole, jacobi_on=[32, 32])]
    assert _precondition([(20, 512)], torch.float64) == [dict(whole, jacobi_on=[20, 20])]
    assert _precondition([(1024, 16)], torch.float64) == [dict(regs, jacobi_on=[16, 16])]
    assert _precondition([(40, 40)], torch.float64) == [dict(whole, jacobi_on=[40, 40])]
    assert _precondition([(31, 31)], torch.float64) == [None]
    assert _precondition([(20, 511)], torch.float64) == [None]
    assert _precondition([(128, 128)], torch.float64)[0] == {"kernel": "householder_qr", "panel_width": 32,
                                                            "jacobi_on": [128, 128]}
    assert _precondition([(123, 123)], torch.float64) == [None]  # too large for one block, too small to block
    assert _precondition([(3000, 20)] * 2, torch.float64)[0]["panel_width"] == 8
    assert _precondition([(64, 15)], torch.float64) == [None]
    assert _precondition([(512, 20)], torch.float32) == [dict(whole, jacobi_on=[20, 20])]
    assert _precondition([(319, 20)], torch.float32) == [None]
    # float32 tall: from 32 columns where rows >= 3 columns, from 16 where rows >= max(256, 16 columns)
    assert _precondition([(900, 100)] * 2, torch.float32)[0] == {"kernel": "householder_qr", "panel_width": 32,
                                                                "jacobi_on": [100, 100]}
    assert _precondition([(128, 32)] * 2, torch.float32)[0] == dict(whole, jacobi_on=[32, 32])
    assert _precondition([(600, 32)] * 2, torch.float32)[0] == dict(whole, jacobi_on=[32, 32])
    assert _precondition([(299, 100)] * 2, torch.float32) == [None, None]
    assert _precondition([(1024, 16)] * 2, torch.float32) == [dict(whole, jacobi_on=[16, 16])] * 2
    assert _precondition([(255, 16)] * 2, torch.float32) == [None, None]
    assert _precondition([(1024, 15)] * 2, torch.float32) == [None, None]


def _check(A, full_matrices):
    U, S, Vh = _svd(A, full_matrices)
    assert_valid_svd(A, U, S, Vh, full_matrices)
    ref = reference_svdvals(A)
    err = (S.double() - ref).abs().amax(-1) / ref[..., 0]
    assert err.max() <= bound(*A.shape[-2:], A.dtype), err.max()
    torch.testing.assert_close(torch_jsvd.svdvals(A), S, rtol=0, atol=bound(*A.shape[-2:], A.dtype) * ref.max().item())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("shape", [(3, 256, 256), (2, 512, 512), (2, 600, 300), (2, 300, 600), (2, 1100, 260),
                                   (1, 1600, 256), (1, 3000, 256), (2, 900, 100), (3, 100, 900), (5, 128, 32)],
                         ids=str)
@pytest.mark.parametrize("full_matrices", [False, True])
def test_preconditioned_shapes(shape, dtype, full_matrices):
    A = torch.randn(*shape, dtype=dtype, device="cuda")
    _check(A, full_matrices)


@pytest.mark.parametrize("shape", [(4, 130, 128), (3, 128, 200), (300, 128, 128), (5, 600, 20), (300, 20, 520)],
                         ids=str)
def test_float64_from_128_columns_and_tall(shape):
    # the second QR, and (batches beyond two panel blocks an SM, panels of <= 128 rows) a warp a panel
    A = torch.randn(*shape, dtype=torch.float64, device="cuda")
    A[0] = A[0] * torch.logspace(0, -10, shape[-1], dtype=torch.float64, device="cuda")  # graded columns
    for full in (False, True):
        _check(A, full)


@pytest.mark.parametrize("shape", [(300, 32, 32), (5, 64, 32), (5, 32, 64), (3, 100, 100), (4, 1024, 16),
                                   (2, 33, 32), (3, 40, 112)], ids=str)
def test_float64_whole_matrix_qr(shape):
    # one launch a batch for the QRs, one for each factor's reflectors (qr_whole_smem.cu)
    g = torch.Generator(device="cuda").manual_seed(17)
    A = torch.randn(*shape, dtype=torch.float64, device="cuda", generator=g)
    A[0] = A[0] * torch.logspace(0, -10, shape[-1], dtype=torch.float64, device="cuda")  # graded columns
    A[-1] = A[-1] * 1e-300  # the QR's own scaling: reflector norms would underflow
    for full in (False, True):
        _check(A, full)


def test_whole_matrix_qr_rank_deficient_graded_and_non_finite():
    g = torch.Generator(device="cuda").manual_seed(5)
    A = torch.randn(6, 64, 8, dtype=torch.float64, device="cuda", generator=g) @ torch.randn(
        6, 8, 48, dtype=torch.float64, device="cuda", generator=g)
    A[1] = 0
    A[2, :, 20:40] = A[2, :, :20]  # repeated columns
    A[3] = A[3][torch.randperm(64, device="cuda", generator=g)] * torch.logspace(
        0, -12, 48, dtype=torch.float64, device="cuda")[torch.randperm(48, device="cuda", generator=g)]
    A[4, 5, 6] = float("nan")
    U, S, Vh, info = torch_jsvd.svd_ex(A, full_matrices=True)
    assert info[4] == -2 and (info[torch.arange(6, device="cuda") != 4] > 0).all(), info
    keep = [0, 1, 2, 3, 5]
    assert_valid_svd(A[keep], U[keep], S[keep], Vh[keep], True)
    assert (S[1] == 0).all() and (S[[0, 2, 5], 8:] <= 1e-13 * S[[0, 2, 5], :1]).all()
    # column-graded (kappa 1e12 by the grading), rank 8: the QR keeps the relative accuracy of
    # every nonzero singular value (reference: the CPU engine on W)
    ref = torch_jsvd.svdvals(A[3].cpu())
    assert ((S[3, :8].cpu() - ref[:8]).abs() / ref[:8]).max() <= 100 * 64 * torch.finfo(torch.float64).eps


def test_whole_matrix_qr_float32_and_once():
    """The one-launch QR's float32 and single-QR paths, which the default rules do not take (float32
    QRs only from 256 columns): forced in a fresh process, as the knobs are read once, without the Gram
    eigenvectors' start (JSVD_EIGH=0), which svd would take on 3 x 96 x 40 instead of the QR."""
    code = (
        "import torch, torch_jsvd, jsvd_testutils as t\n"
        "g = torch.Generator(device='cuda').manual_seed(3)\n"
        "for dt in (torch.float32, torch.float64):\n"
        "    for shape in ((200, 32, 32), (3, 96, 40), (2, 24, 70)):\n"
        "        A = torch.randn(*shape, dtype=dt, device='cuda', generator=g)\n"
        "        pre = torch_jsvd.plan([shape[1:]], dtype=dt, device='cuda')['matrices'][0]['precondition']\n"
        "        assert pre['kernel'] == 'householder_qr_whole_smem', pre\n"
        "        assert torch_jsvd.plan([shape[1:]] * shape[0], dtype=dt, device='cuda')['matrices'][0].get('precondition')\n"
        "        for full in (False, True):\n"
        "            U, S, Vh = torch_jsvd.svd(A, full_matrices=full)\n"
        "            t.assert_valid_svd(A, U, S, Vh, full)\n"
        "print('ok')\n")
    # (and float32 rows sorted as float64's are)
    out = run_child(code, timeout=300, JSVD_QR_MIN_COLS="16", JSVD_QR_TWICE="0", JSVD_QR_ROW_SORT="1", JSVD_EIGH="0")
    assert out.strip().endswith("ok"), out[-2000:]


def _identity_reflector_batch(dtype, shape, seed=23):
    """Reflectors that are the identity (exactly zero columns: zero columns of Y), rank one, graded rows
    in shuffled order (float64 sorts them), rows beyond the rank."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    A = torch.randn(*shape, dtype=dtype, device="cuda", generator=g)
    m, n = shape[-2:]
    A[0, :, n // 2:] = 0
    A[1, :, ::2] = 0
    A[2] = A[2, :, :1] * A[2, :1, :]
    grading = torch.logspace(0, -8, m, dtype=dtype, device="cuda")[torch.randperm(m, device="cuda", generator=g)]
    A[3] = A[3] * grading[:, None]
    A[4, 7:] = 0
    return A


def _check_identity_reflectors(A):
    n = A.shape[-1]
    for full in (False, True):
        U, S, Vh = _svd(A, full)
        assert_valid_svd(A, U, S, Vh, full)
    assert (S[0, n // 2:] == 0).all() and (S[1, n // 2:] == 0).all() and (S[4, 7:] <= 1e-5 * S[4, 0]).all()
    ref = reference_svdvals(A)
    err = ((S.double() - ref).abs().amax(-1) / ref[..., 0].clamp_min(torch.finfo(torch.float64).tiny)).max()
    assert err <= bound(*A.shape[-2:], A.dtype), err


@pytest.mark.parametrize("dtype,shape,kernel", [
    (torch.float32, (6, 200, 32), "smem"), (torch.float32, (6, 600, 16), "smem"),
    (torch.float64, (6, 600, 16), "regs"), (torch.float64, (6, 1024, 16), "regs"),
    (torch.float64, (6, 256, 32), "regs"), (torch.float64, (6, 257, 32), "smem"),
    (torch.float64, (5, 1024, 24), "smem"), (torch.float64, (6, 33, 32), "smem"),
    (torch.float64, (6, 128, 32), "regs")], ids=str)
def test_whole_matrix_qr_identity_reflectors_and_row_order(dtype, shape, kernel):
    """U = P_r^T Q [U_R 0; 0 I] from Q's UT form (apply_wy.cu) after either one-launch QR (registers,
    qr_whole_regs.cu, or shared memory), and full U's completion by Q's trailing columns."""
    assert _precondition([shape[-2:]], dtype)[0]["kernel"] == "householder_qr_whole_" + kernel
    _check_identity_reflectors(_identity_reflector_batch(dtype, shape))


@pytest.mark.parametrize("dtype,shape", [(torch.float64, (5, 600, 16)), (torch.float64, (5, 128, 32)),
                                         (torch.float64, (4, 100, 40)), (torch.float32, (5, 1024, 16)),
                                         (torch.float64, (4, 20, 520))], ids=str)
def test_whole_qr_reads_the_callers_tensor(tmp_path, dtype, shape):
    """The one-launch QRs read the caller's tensor in place, whatever its strides (row-major, column-major,
    a slice of a larger one, a wide matrix read as its transpose), leave it untouched, and agree with each
    other and with the packed path's results to rounding (JSVD_QR_IN_PLACE=0 packs first, in a child)."""
    g = torch.Generator(device="cuda").manual_seed(31)
    m, n = shape[-2:]
    big = torch.randn(shape[0], m + 3, 2 * n, dtype=dtype, device="cuda", generator=g)
    sliced = big[:, 1:m + 1, ::2]
    torch.save(sliced, tmp_path / "A.pt")  # (a view: its strides come back with it)
    run_child(f"""
        import os, torch
        from test_qr_precondition import _svd
        torch.save(_svd(torch.load({str(tmp_path / "A.pt")!r}), False)[1].cpu(), os.environ["OUT"])
    """, JSVD_QR_IN_PLACE="0", OUT=str(tmp_path / "S.pt"))
    packed = torch.load(tmp_path / "S.pt").cuda()
    views = {"row-major": sliced.contiguous(), "column-major": sliced.mT.contiguous().mT, "slice": sliced}
    for name, A in views.items():
        before = A.clone()
        U, S, Vh = _svd(A, False)
        assert torch.equal(A, before), name
        assert_valid_svd(A, U, S, Vh, False)
        torch.testing.assert_close(S, packed, rtol=0, atol=bound(m, n, dtype) * packed.max().item(), msg=name)


def test_register_qr_every_width_and_against_shared_memory():
    """The register QR at every column count 1..32 (its instantiations of 8, 16 and 32 columns, one or
    two rows a thread), float32 and float64, rows sorted or not (JSVD_QR_REGS=2: wherever it fits), and
    the shared-memory kernel on the same shapes (JSVD_QR_REGS=0): both give valid factors and
    float64-accurate singular values. Forced in fresh processes (the knobs are read once)."""
    code = (
        "import torch, torch_jsvd, test_qr_precondition as t\n"
        "import os\n"
        "want = 'householder_qr_whole_' + os.environ['WANT']\n"
        "for dt in (torch.float32, torch.float64):\n"
        "    for m, n in ((9, 1), (40, 5), (64, 8), (300, 9), (1000, 13), (1024, 16), (33, 16), (250, 17), (64, 31), (250, 32)):\n"
        "        pre = t._precondition([(m, n)], dt)[0]\n"
        "        assert pre['kernel'] == want, (m, n, pre)\n"
        "        t._check_identity_reflectors(t._identity_reflector_batch(dt, (6, m, max(n, 1)), seed=m + n))\n"
        "print('ok')\n")
    for want, env in (("regs", {"JSVD_QR_REGS": "2"}),
                      ("regs", {"JSVD_QR_REGS": "2", "JSVD_QR_ROW_SORT": "1", "JSVD_QR_TWICE": "1"}),
                      ("smem", {"JSVD_QR_REGS": "0"})):
        out = run_child(code, timeout=600, JSVD_QR_MIN_COLS="1", WANT=want, **env)
        assert out.strip().endswith("ok"), out[-2000:]


def test_cusolver_qr_beyond_the_panels():
    # Matrices whose 8-column panel does not fit one block's shared memory (float32 beyond about 6960
    # rows, float64 beyond 3480) take cuSOLVER's geqrf and ormqr; before, they took no QR at all (one
    # 11008 x 128 float32 matrix ran the Gram EVD level, 160 ms), and so do single matrices of >= 2000
    # rows and >= 4 rows a column (faster than panels on one SM). Graded float64 rows are sorted first,
    # as on the other paths, and svd_ex never synchronises.
    lapack = {"kernel": "geqrf (cuSOLVER)", "panel_width": 0}
    assert _precondition([(7000, 40)], torch.float32) == [dict(lapack, jacobi_on=[40, 40])]
    assert _precondition([(3800, 20)] * 2, torch.float64) == [dict(lapack, jacobi_on=[20, 20])] * 2
    assert _precondition([(6000, 40)] * 2, torch.float32)[0]["kernel"] == "householder_qr"
    # and a single matrix of >= 2000 rows, whose panels would run on one SM
    assert _precondition([(4096, 256)], torch.float32) == [dict(lapack, jacobi_on=[256, 256])]
    assert _precondition([(1999, 256)], torch.float32)[0]["kernel"] == "householder_qr"
    assert _precondition([(2048, 1024)], torch.float64)[0]["kernel"] == "householder_qr"
    g = torch.Generator(device="cuda").manual_seed(23)
    for shape, dtype, fulls in (((1, 7000, 40), torch.float32, (False, True)), ((2, 40, 7000), torch.float32, (False,)),
                                ((2, 3800, 20), torch.float64, (False, True))):
        A = torch.randn(*shape, dtype=dtype, device="cuda", generator=g)
        if dtype == torch.float64:
            A[0] *= torch.logspace(0, -12, shape[-2], dtype=dtype, device="cuda")[:, None]  # graded rows
            ref = torch_jsvd.svdvals(A[0].cpu())  # the CPU engine's, relatively accurate
            S = torch_jsvd.svd_ex(A[0], compute_uv=False).S  # (the QR; svdvals would take the start)
            assert ((S.cpu() - ref).abs() / ref).max() <= 100 * shape[-2] * torch.finfo(dtype).eps
        for full in fulls:
            _check(A, full)
    A = torch.randn(1, 7000, 40, device="cuda", generator=g)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        U, S, Vh, info = torch_jsvd.svd_ex(A, full_matrices=False)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert (info >= 0).all() and rel_reconstruction_error(A, U, S, Vh).max() <= bound(7000, 40, torch.float32)


def test_cusolver_qr_rank_deficient_zero_and_non_finite():
    # The cuSOLVER path on structured inputs: rank 5 of 40 columns, a zero matrix and repeated columns
    # (float64 beyond 3480 rows), then a NaN, which must come back flagged (info -2), not as converged.
    g = torch.Generator(device="cuda").manual_seed(29)
    A = torch.randn(3, 3800, 5, dtype=torch.float64, device="cuda", generator=g) @ torch.randn(
        5, 40, dtype=torch.float64, device="cuda", generator=g)
    A[1] = 0
    A[2] = torch.randn(3800, 40, dtype=torch.float64, device="cuda", generator=g)
    A[2, :, 20:] = A[2, :, :20]
    assert _precondition([(3800, 40)] * 3, torch.float64)[0]["kernel"] == "geqrf (cuSOLVER)"
    for full in (False, True):
        U, S, Vh = _svd(A, full)  # (svd would start from the Gram matrix)
        assert_valid_svd(A, U, S, Vh, full)
    assert (S[1] == 0).all() and (S[0, 5:] <= 1e-12 * S[0, 0]).all() and (S[2, 20:] <= 1e-12 * S[2, 0]).all()
    A[0, 7, 3] = float("nan")
    info = torch_jsvd.svd_ex(A, full_matrices=False).info
    assert info[0] == -2 and (info[1:] >= 0).all()


# Aspect ratios from 1.1 to 1000 and n from 1 to 512, tall and wide, batch 1 and several: whichever
# QR (registers, one launch, panels, cuSOLVER's) or start a shape takes, its result against float64.
ASPECTS = [(1, 1000), (4, 1000), (16, 1000), (32, 500), (33, 300), (64, 150), (100, 10), (128, 4), (300, 1.1),
           (512, 1.1), (512, 4)]


@pytest.mark.parametrize("wide", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_aspect_ratios_to_1000(dtype, wide):
    g = torch.Generator(device="cuda").manual_seed(20)
    for n, ratio in ASPECTS:
        m, batch = max(n + 1, round(n * ratio)), 1 if n >= 300 else 3
        A = torch.randn(batch, m, n, dtype=dtype, device="cuda", generator=g)
        if wide:
            A = A.mT.contiguous()
        U, S, Vh = _svd(A, full_matrices=False)
        assert_valid_svd(A, U, S, Vh, False)
        ref = reference_svdvals(A)
        err = ((S.double() - ref).abs().amax(-1) / ref[..., 0]).max().item()
        assert err <= bound(m, n, dtype), (m, n, wide, err)


def test_rank_deficient_and_zero():
    A = torch.randn(3, 400, 40, device="cuda", dtype=torch.float64) @ torch.randn(40, 300, device="cuda", dtype=torch.float64)
    A[1] = 0
    A[2, :, 100:200] = A[2, :, :100]  # repeated columns
    for full in (False, True):
        U, S, Vh = torch_jsvd.svd(A, full_matrices=full)
        assert_valid_svd(A, U, S, Vh, full)
    assert (S[1] == 0).all() and (S[0, 40:] <= 1e-12 * S[0, 0]).all()


def test_graded_relative_accuracy():
    """Column-graded float64 (kappa 1e12): Householder QR is columnwise backward
    stable and the Jacobi on R^T rowwise, so every singular value keeps its high
    relative accuracy (Drmac & Veselic 2008). Reference: the CPU engine on W."""
    g = torch.Generator().manual_seed(torch.randint(0, 2**31, ()).item())
    m, n = 520, 300
    B = torch.randn(2, m, n, dtype=torch.float64, generator=g)
    A = B * torch.logspace(0, -12, n, dtype=torch.float64)
    A[1] = A[1][:, torch.randperm(n, generator=g)]  # grading in no particular column order
    ref = torch_jsvd.svdvals(A)
    S = torch_jsvd.svdvals(A.cuda()).cpu()
    rel = ((S - ref).abs() / ref).max()
    assert rel <= 100 * m * torch.finfo(torch.float64).eps, rel


def test_full_precision_under_tf32():
    """The QR's GEMMs ignore allow_tf32: the issue's 512² float32 accuracy
    goals hold with TF32 matmuls switched on."""
    A = torch.randn(2, 512, 512, device="cuda")
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    assert rel_reconstruction_error(A, U, S, Vh).max() <= 5e-6
    assert orthogonality_error(U).max() <= 1e-4 and orthogonality_error(Vh, rows=True).max() <= 1e-4


def test_graph_capture_and_side_stream():
    """svd_ex through the QR stays on the current stream and never synchronises."""
    A = torch.randn(3, 300, 280, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        U, S, Vh, info = torch_jsvd.svd_ex(A, full_matrices=True)
    torch.cuda.current_stream().wait_stream(side)
    assert (info > 0).all()
    assert_valid_svd(A, U, S, Vh, True)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        U, S, Vh, info = torch_jsvd.svd_ex(A, full_matrices=False)
    A.copy_(torch.randn_like(A))
    g.replay()
    torch.cuda.synchronize()
    assert (info > 0).all()
    assert_valid_svd(A, U, S, Vh, False)


def _mixed_float64_batch(m, n):
    """Gaussian (0, 5), graded columns (1), graded rows (2), rank n/2 (3), singular values graded to
    1e-8 with random singular vectors (4)."""
    g = torch.Generator(device="cuda").manual_seed(41)
    kw = dict(dtype=torch.float64, device="cuda")
    A = torch.randn(6, m, n, generator=g, **kw)
    A[1] = A[1] * torch.logspace(0, -12, n, **kw)
    A[2] = A[2] * torch.logspace(0, -12, m, **kw)[:, None]
    A[3] = A[3, :, : n // 2] @ torch.randn(n // 2, n, generator=g, **kw)
    q1 = torch.linalg.qr(torch.randn(m, n, generator=g, **kw)).Q
    q2 = torch.linalg.qr(torch.randn(n, n, generator=g, **kw)).Q
    A[4] = q1 @ torch.diag(torch.logspace(0, -8, n, **kw)) @ q2.mT
    return A


_V_SHAPES = ((128, 128, False), (600, 128, True), (512, 512, False))


def test_float64_v_by_triangular_solve(tmp_path):
    """svd's float64 QR path where V would move the Jacobi off one block, and from 512 columns: the
    Jacobi on X = R2^T carries no V; V_x = X^{-1} U_x S by a triangular solve, kept where orthogonal to 10 q eps, and the other
    matrices (the rank-deficient one) run the Jacobi again with V. That one gets exactly the accumulated
    path's results (JSVD_V_SOLVE=0, in a fresh process); the Gaussian ones agree with it to rounding,
    not exactly (so the solve ran); every result is a valid SVD whose S agree with float64 LAPACK's."""
    assert _precondition([(128, 128)] * 4, torch.float64, keep_v=True)[0]["v"] == "triangular_solve"
    assert _precondition([(240, 128)] * 4, torch.float64, keep_v=True)[0]["v"] == "triangular_solve"
    assert _precondition([(512, 512)] * 2, torch.float64, keep_v=True)[0]["v"] == "triangular_solve"
    # (V fits beside A, or both Jacobis take block pairs of fewer than 512 columns: it carries V)
    assert _precondition([(520, 40)] * 5, torch.float64, keep_v=True)[0]["v"] == "rotations"
    assert _precondition([(200, 200)] * 4, torch.float64, keep_v=True)[0]["v"] == "rotations"
    assert _precondition([(64, 32)] * 3, torch.float64, keep_v=True)[0]["v"] == "rotations"
    assert _precondition([(512, 512)] * 2, torch.float32, keep_v=True)[0]["v"] == "rotations"
    plan = torch_jsvd.plan([(128, 128)] * 4, dtype=torch.float64, device="cuda", compute_uv=False)
    assert "v" not in plan["matrices"][0]["precondition"]
    code = ("import os, torch, torch_jsvd\n"
            "from test_qr_precondition import _mixed_float64_batch, _V_SHAPES\n"
            "out = [torch_jsvd.svd(_mixed_float64_batch(m, n), full_matrices=full) for m, n, full in _V_SHAPES]\n"
            "torch.save([[t.cpu() for t in r] for r in out], os.environ['JSVD_TEST_OUT'])\n")
    # (both sides in fresh processes without the auto-tuner, whose timings could plan them differently)
    run_child(code, timeout=300, JSVD_TUNER="0", JSVD_TEST_OUT=str(tmp_path / "solved.pt"))
    run_child(code, timeout=300, JSVD_TUNER="0", JSVD_V_SOLVE="0", JSVD_TEST_OUT=str(tmp_path / "accumulated.pt"))
    outs, refs = torch.load(tmp_path / "solved.pt"), torch.load(tmp_path / "accumulated.pt")
    for (m, n, full), (U, S, Vh), ref in zip(_V_SHAPES, outs, refs):
        A = _mixed_float64_batch(m, n).cpu()
        assert_valid_svd(A, U, S, Vh, full)
        exact = torch.linalg.svdvals(A)
        assert ((S - exact).abs().amax(-1) / exact[:, 0]).max() <= bound(m, n, A.dtype)
        # the rank-deficient one, run again with V: the accumulated path's results
        assert torch.equal(S[3], ref[1][3]) and torch.equal(U[3], ref[0][3]) and torch.equal(Vh[3], ref[2][3]), (m, n)
        for k in (0, 5):  # the Gaussian ones, solved for: other rounding
            assert not torch.equal(Vh[k], ref[2][k]), (m, n, k)


def test_v_by_triangular_solve_on_every_blocked_level():
    """The Jacobi without V (U and S only) on block pairs (float32 512², the solve forced on) and on the
    GEMM level (float64 512², the level forced), in fresh processes: valid SVDs of the mixed batch."""
    code = (
        "import torch, torch_jsvd, jsvd_testutils as t\n"
        "from test_qr_precondition import _mixed_float64_batch\n"
        "A = _mixed_float64_batch(512, 512).to(torch.{dt})\n"
        "p = torch_jsvd.plan([(512, 512)], dtype=A.dtype, device='cuda')['matrices'][0]\n"
        "assert p['precondition']['v'] == 'triangular_solve' and p['levels'][-1]['kernel'] == '{kernel}', p\n"
        "U, S, Vh = torch_jsvd.svd(A)\n"
        "t.assert_valid_svd(A, U, S, Vh, False)\n"
        "print('ok')\n")
    # (JSVD_EIGH=0: one 512² matrix would otherwise start from the Gram eigenvectors, without the QR)
    out = run_child(code.format(dt="float32", kernel="pair_svd_smem"), timeout=300, JSVD_V_SOLVE="1", JSVD_TUNER="0",
                    JSVD_EIGH="0")
    assert out.strip().endswith("ok"), out[-2000:]
    out = run_child(code.format(dt="float64", kernel="gemm_gram_evd"), timeout=300, JSVD_LEVEL="gemm", JSVD_EIGH="0")
    assert out.strip().endswith("ok"), out[-2000:]


# One shape for each QR kernel float64 takes (plan()'s name), with the batch that takes it.
GRADED_QR_SHAPES = [("householder_qr_whole_regs", (3, 600, 16)), ("householder_qr_whole_smem", (3, 257, 32)),
                    ("householder_qr", (2, 1100, 128)), ("geqrf (cuSOLVER)", (2, 3800, 20))]


@pytest.mark.parametrize("kernel,shape", GRADED_QR_SHAPES, ids=[k for k, _ in GRADED_QR_SHAPES])
@pytest.mark.parametrize("wide", [False, True], ids=["tall", "wide"])
def test_graded_float64_small_singular_values_on_every_qr_kernel(kernel, shape, wide):
    """Issue 20's accuracy goal: column-graded float64 matrices keep their small singular values to
    1e-12 relative through each QR kernel. A = Q D with Q's columns orthonormal has exactly the
    singular values |d| (A^T A = D^2, up to Q's orthonormality, 1e-15), so the reference needs no
    solver; the grading spans 1e-12 in a random column order. Wide: the transpose, whose rows are
    graded. Also row-graded tall matrices D Q, against the CPU engine (relatively accurate, test_graded)."""
    batch, m, n = shape
    assert _precondition([(n, m) if wide else (m, n)] * batch, torch.float64)[0]["kernel"] == kernel
    g = torch.Generator().manual_seed(m + n)
    Q = torch.linalg.qr(torch.randn(batch, m, n, dtype=torch.float64, generator=g)).Q
    d = torch.stack([torch.logspace(0, -12, n, dtype=torch.float64)[torch.randperm(n, generator=g)]
                     for _ in range(batch)])
    A = Q * d[:, None, :]
    ref = d.sort(dim=-1, descending=True).values
    if wide:
        A = A.mT.contiguous()
    A = A.cuda()
    U, S, Vh = _svd(A, True)  # and full U (or, wide, full V)
    assert_valid_svd(A, U, S, Vh, True)
    for S in (torch_jsvd.svdvals(A), S):
        rel = ((S.cpu() - ref).abs() / ref).max().item()
        assert rel <= 1e-12, (kernel, wide, rel)
    if wide:
        return
    rows = torch.logspace(0, -12, m, dtype=torch.float64)[torch.randperm(m, generator=g)]
    A = rows[:, None] * Q
    ref = torch_jsvd.svdvals(A)
    S = torch_jsvd.svd_ex(A.cuda(), compute_uv=False).S.cpu()  # (svdvals would start from the Gram matrix)
    rel = ((S - ref).abs() / ref).max().item()
    assert rel <= 1e-12, (kernel, "rows", rel)
