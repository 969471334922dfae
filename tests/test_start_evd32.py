"""The Gram eigenvectors' start with the Gram matrices solved in float32 (kernels/precondition/
eigh_precondition.h, evd32_route_on): near-square batches of 129 (float64 128) to 256 columns on cuSOLVER's syevBatched,
V0 made orthogonal in float64 (Newton-Schulz), the batch's Cholesky pivots' pre-test, and the optional
first-order refinement of V0 (on by default; JSVD_START_REFINE=0 off); float32's batches of 65 to 128
columns there too (JSVD_START_EVD32_TALL=0: not), their X tested: tall ones from 32 matrices (from N with
JSVD_START_EVD32_TALL_MIN=N), square ones from 200,
those of 1.4 to 2 rows a column from 40 (JSVD_START_EVD32_SQUARE). Skipped without a CUDA device.
"""

import pytest
import torch

import torch_jsvd
from jsvd_testutils import (OWN_EVD, SYEV_BATCHED, SYEV_ROUTE, assert_valid_svd, bound, orthogonality_error,
                            random_rank, reference_svdvals, run_child, start_v)

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

F32, F64 = torch.float32, torch.float64


@pytest.mark.parametrize("dtype,m,n,member", [(F32, 256, 256, "none"), (F32, 300, 256, "none"), (F32, 256, 300, "none"),
                                              (F32, 160, 160, "none"), (F64, 200, 200, "none"), (F64, 256, 256, "none"),
                                              (F64, 128, 128, "none"), (F64, 128, 128, "ill_conditioned"),
                                              (F32, 256, 256, "ill_conditioned"), (F32, 300, 256, "rank_deficient"),
                                              (F32, 256, 256, "graded_columns"), (F32, 200, 200, "ill_conditioned"),
                                              (F64, 160, 160, "ill_conditioned"), (F64, 200, 200, "graded_columns")],
                         ids=str)
def test_gram_eigenvectors_in_float32(tmp_path, dtype, m, n, member):
    """Batches on syevBatched's route of 129 (float64 128) to 256 columns solve their Gram matrices in float32
    (evd32_route_on), V0 then made orthogonal in float64 by Newton-Schulz steps (one for float32, two for
    float64). A batch of Gaussian members with a zero one, two equal columns and members at 1e-30 and 1e30
    (whose float32 Gram matrix would overflow unscaled) takes it: every output property, S against
    LAPACK, float32's V0 V_x orthogonal to 3 sqrt(n) eps32 (the float32 eigenvectors alone leave ~16 sqrt(n)
    eps32), S not the float64 route's or the QR path's to the bit (JSVD_START_EVD32=0, in a child process).
    A member whose singular values span 6 decades, or of quarter rank, or with columns graded over 3, has
    too many small Cholesky pivots (kEvd32PivotRatio) and sends the batch where JSVD_START_EVD32=0 does
    (float32 at 256 columns: float64's solver; the rest: the QR path): S equal to its to the bit."""
    g = torch.Generator().manual_seed(n)
    A = torch.randn(100, m, n, generator=g, dtype=torch.float64)
    A[2] = 0
    A[4, :, 1] = A[4, :, 0]
    A[5] *= 1e-30
    A[6] *= 1e30
    if member == "ill_conditioned":
        Q1, Q2 = (torch.linalg.qr(torch.randn(r, n, generator=g, dtype=torch.float64))[0] for r in (m, n))
        A[3] = (Q1 * torch.logspace(0, -6, n, dtype=torch.float64)) @ Q2.mT
    elif member == "rank_deficient":
        A[3] = random_rank((m, n), n // 4)
    elif member == "graded_columns":
        A[3] *= torch.logspace(0, -3, n, dtype=torch.float64)
    A = A.to(dtype).cuda()
    sv = start_v([(m, n)] * 100, dtype)[0]
    assert sv["solver"] in SYEV_ROUTE and sv["gram_dtype"] == "float32"
    assert start_v([(m + 160, n + 160)] * 100, dtype)[0]["gram_dtype"] == "float64"
    U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
    assert_valid_svd(A, U, S, Vh, False)
    ref = reference_svdvals(A)
    err = ((S.double() - ref).abs().amax(-1) / ref[..., 0].clamp_min(1e-300)).max()
    assert err <= bound(m, n, dtype)
    torch.save(A.cpu(), tmp_path / "A.pt")
    code = f"""
        import os, torch, torch_jsvd
        A = torch.load({str(tmp_path / "A.pt")!r}).cuda()
        torch.save(torch_jsvd.svd(A, full_matrices=False)[1].cpu(), os.environ["OUT"])
    """
    run_child(code, JSVD_START_EVD32="0", OUT=str(tmp_path / "S64.pt"))
    S64 = torch.load(tmp_path / "S64.pt")
    assert torch.equal(S.cpu(), S64) == (member != "none")
    if member == "none" and dtype == F32:  # (the factor V0 V_x: V, or a wide matrix's U)
        ov = orthogonality_error(Vh, rows=True) if m >= n else orthogonality_error(U)
        assert ov.max().item() <= 3 * min(m, n)**0.5 * torch.finfo(torch.float32).eps


def _clustered(kind, n, g):
    """An n x n float64 matrix with random singular vectors and singular values of one kind."""
    Q1, Q2 = (torch.linalg.qr(torch.randn(n, n, generator=g, dtype=torch.float64))[0] for _ in range(2))
    s = torch.rand(n, generator=g, dtype=torch.float64) + 0.5
    if kind == "orthogonal":
        s[:] = 1
    elif kind == "two_clusters":
        s[: n // 2], s[n // 2:] = 1, 0.5
    elif kind == "near_identity":
        s = 1 + 1e-7 * torch.rand(n, generator=g, dtype=torch.float64)
    return (Q1 * s) @ Q2.mT


@pytest.mark.parametrize("refine", ["0", "1"])
@pytest.mark.parametrize("dtype,batch,n", [(F32, 32, 200), (F32, 100, 256), (F64, 16, 200), (F64, 16, 128)], ids=str)
def test_start_on_clustered_spectra(tmp_path, dtype, batch, n, refine):
    """The route on members of equal singular values, of two clusters and of singular values equal to
    within 1e-7, beside Gaussian ones (in a child process, JSVD_START_REFINE as given): every output
    property and S against LAPACK on every member. With the refinement (refine_eigenvectors) its ratios
    there are rounding over rounding, and its norm's cap keeps V0 orthogonal; float32's Gaussian members
    (from the 4th) then have U and V orthogonal to 3 sqrt(n) eps32 (about 16 sqrt(n) eps32 for U without
    the step)."""
    g = torch.Generator().manual_seed(batch + n)
    A = torch.randn(batch, n, n, generator=g, dtype=torch.float64)
    for k, kind in enumerate(("orthogonal", "two_clusters", "near_identity")):
        A[k] = _clustered(kind, n, g)
    A = A.to(dtype)
    assert start_v([(n, n)] * batch, dtype)[0]["gram_dtype"] == "float32"
    torch.save(A, tmp_path / "A.pt")
    code = f"""
        import os, torch, torch_jsvd
        A = torch.load({str(tmp_path / "A.pt")!r}).cuda()
        torch.save([t.cpu() for t in torch_jsvd.svd(A, full_matrices=False)], os.environ["OUT"])
    """
    run_child(code, JSVD_START_REFINE=refine, OUT=str(tmp_path / "usv.pt"))
    U, S, Vh = torch.load(tmp_path / "usv.pt")
    assert_valid_svd(A, U, S, Vh, False)
    ref = reference_svdvals(A)
    assert ((S.double() - ref).abs().amax(-1) / ref[..., 0]).max() <= bound(n, n, dtype)
    if dtype == F32 and refine == "1":
        lim = 3 * n**0.5 * torch.finfo(torch.float32).eps
        assert orthogonality_error(U)[3:].max().item() <= lim
        assert orthogonality_error(Vh, rows=True)[3:].max().item() <= lim


@pytest.mark.parametrize("member", ["nan", "huge"])
@pytest.mark.parametrize("dtype,n", [(F64, 128), (F32, 160)], ids=str)
def test_start_declined_by_its_checks(tmp_path, dtype, n, member):
    """A batch on the float32 solver's route whose start_checks fail (a member holding NaN, or one whose
    ||M||_F is beyond the start's range: 1e200 in float64, 1e36 in float32) is solved without the start.
    Its checks are read with the pivots' test, so the batch leaves before syevBatched whichever
    JSVD_START_LATE_CHECK says (the knob moves only the later read of syevBatched's info and V0's
    orthogonality, which these batches never reach); in child processes with the knob 0 and 1: svd's U, S
    and Vh equal to the bit to those without the start (JSVD_EIGH=0) and valid, S against LAPACK; the NaN
    member raises with each. (svd, not svd_ex, which never takes the start.)"""
    g = torch.Generator().manual_seed(n)
    A = torch.randn(32, n, n, generator=g, dtype=torch.float64)
    if member == "nan":
        A[3, 5, 7] = float("nan")
    else:
        A[3] *= 1e200 if dtype == F64 else 1e36
    A = A.to(dtype)
    assert start_v([(n, n)] * 32, dtype)[0]["gram_dtype"] == "float32"
    torch.save(A, tmp_path / "A.pt")
    code = f"""
        import os, torch, torch_jsvd
        A = torch.load({str(tmp_path / "A.pt")!r}).cuda()
        try:
            out = [t.cpu() for t in torch_jsvd.svd(A, full_matrices=False)]
        except torch.linalg.LinAlgError:
            out = "raised"
        torch.save(out, os.environ["OUT"])
    """
    out = {}
    for knob, env in (("0", {"JSVD_START_LATE_CHECK": "0"}), ("1", {"JSVD_START_LATE_CHECK": "1"}),
                      ("no start", {"JSVD_EIGH": "0"})):
        run_child(code, OUT=str(tmp_path / "r.pt"), **env)
        out[knob] = torch.load(tmp_path / "r.pt")
    if member == "nan":
        assert out["0"] == out["1"] == out["no start"] == "raised"
        return
    for knob in ("0", "1"):
        for a, b in zip(out[knob], out["no start"]):
            assert torch.equal(a, b)
    U, S, Vh = out["1"]
    assert_valid_svd(A, U, S, Vh, False)
    ref = reference_svdvals(A)
    assert ((S.double() - ref).abs().amax(-1) / ref[..., 0]).max() <= bound(n, n, dtype)


@pytest.mark.parametrize("member", ["none", "ill_conditioned", "moderately_conditioned", "clustered"])
@pytest.mark.parametrize("m,n", [(300, 77), (260, 128), (1000, 65), (128, 128), (100, 100), (150, 100)], ids=str)
def test_tall_float32_on_the_float32_solver(tmp_path, m, n, member):
    """float32 batches of 65 to 128 columns, from 200 matrices (tall ones from 32), solve their Gram matrices in
    float32 where svd (reduced U) or svdvals tests X = M V0 for convergence (evd32_route_on's x_tested), V0
    refined twice; JSVD_START_EVD32_TALL=0: tall ones (rows >= 2 cols) on the float64 solver, near-square ones
    without the start, as they are with full_matrices (S equal to JSVD_EIGH=0's to the bit), but for squares,
    whose full_matrices changes nothing and which take the route with it too (S equal to svd's). A batch of
    Gaussian members with a zero one, two equal columns and members at 1e-30 and 1e30: the plan's Gram dtype
    float32 from 200 matrices by default, float64 with the knob at 0; every output property, S and svdvals' S
    against LAPACK, U and V orthogonal to 3 sqrt(n) eps32; S not the float64 solver's to the bit. A member whose
    singular values span 6 decades fails the pivots' test and sends the batch where the knob's 0 does (S equal
    to the bit), one over 2 decades may pass it (kEvd32TallPivotRatio, near-square kEvd32PivotRatio, counts
    pivots) and gets valid outputs either way; members of equal or two clustered singular values take the route
    with the Gaussian ones, to its end: V0 orthogonal enough that the batch is not solved again without the
    start (S not JSVD_EIGH=0's to the bit)."""
    g = torch.Generator().manual_seed(m + n)
    A = torch.randn(200, m, n, generator=g, dtype=torch.float64)
    A[2] = 0
    A[4, :, 1] = A[4, :, 0]
    A[5] *= 1e-30
    A[6] *= 1e30
    Q1, Q2 = (torch.linalg.qr(torch.randn(r, n, generator=g, dtype=torch.float64))[0] for r in (m, n))
    if member in ("ill_conditioned", "moderately_conditioned"):
        A[3] = (Q1 * torch.logspace(0, -6 if member == "ill_conditioned" else -2, n, dtype=torch.float64)) @ Q2.mT
    elif member == "clustered":
        A[3] = Q1 @ Q2.mT
        A[7] = (Q1 * torch.where(torch.arange(n) < n // 2, 1.0, 0.5).double()) @ Q2.mT
    A = A.float()
    torch.save(A, tmp_path / "A.pt")
    long_enough = 1.4 * n <= m or (n >= 112 and 1.15 * n <= m)  # (kEvd32SquareLongRatio, kEvd32SquareMid*)
    # (one short of the route's minimum count: kEvd32TallMinBatch, JSVD_START_EVD32_SQUARE, kEvd32SquareMinBatch)
    few = 31 if m >= 2 * n else 39 if long_enough else 199
    code = f"""
        import os, torch, torch_jsvd
        A = torch.load({str(tmp_path / "A.pt")!r}).cuda()
        gram = lambda count, dtype: [torch_jsvd.plan([A.shape[1:]] * count, dtype=dtype, device="cuda")[
            "matrices"][0].get("start_v", {{}}).get(k) for k in ("gram_dtype", "gram_dtype_full_matrices")]
        out = [t.cpu() for t in torch_jsvd.svd(A, full_matrices=False)] + [torch_jsvd.svdvals(A).cpu()]
        out.append(torch_jsvd.svd(A, full_matrices=True).S.cpu())
        torch.save((out, [gram(200, torch.float32), gram({few}, torch.float32), gram(200, torch.float64)]),
                   os.environ["OUT"])
    """
    res = {}
    runs = (("0", {"JSVD_START_EVD32_TALL": "0"}), ("default", {}), ("no start", {"JSVD_EIGH": "0"}))
    for i, (knob, env) in enumerate(runs):
        run_child(code, OUT=str(tmp_path / f"r{i}.pt"), **env)
        res[knob] = torch.load(tmp_path / f"r{i}.pt")
    ref = reference_svdvals(A)
    # (kEvd32TallMinBatch; float32 only; svd(full_matrices=True) on the float64 solver, or without the start)
    if m >= 2 * n:
        assert res["0"][1] == [["float64", None]] * 3
        assert res["default"][1] == [["float32", "float64"], ["float64", None], ["float64", None]]
    else:
        assert res["0"][1][:2] == [[None, None]] * 2
        assert res["default"][1][:2] == [["float32", None], [None, None]]
        # (full_matrices: a square batch as without it, the route; a longer one without the start)
        assert torch.equal(res["default"][0][4], res["default"][0][1] if m == n else res["no start"][0][4])
    U, S, Vh, S_values, _ = res["default"][0]
    assert_valid_svd(A, U, S, Vh, False)
    for s in (S, S_values):
        assert ((s.double() - ref).abs().amax(-1) / ref[..., 0].clamp_min(1e-300)).max() <= bound(m, n, F32)
    if member != "moderately_conditioned":  # (2 decades: the pivots' test may pass it; valid either way)
        assert torch.equal(S, res["0"][0][1]) == (member == "ill_conditioned")
    if member in ("none", "clustered"):  # (the route kept to its end: not solved again without the start)
        assert not torch.equal(S, res["no start"][0][1])
    if member == "none":
        lim = 3 * n**0.5 * torch.finfo(torch.float32).eps
        assert orthogonality_error(U).max().item() <= lim
        assert orthogonality_error(Vh, rows=True).max().item() <= lim


def test_square_route_knob():
    """JSVD_START_EVD32_SQUARE=N (in a child): float32's near-square batches of 65 to 128 columns, of at least
    1.4 rows a column (or 1.15 from 112 columns), on the float32 solver's tested route from N matrices (40 by
    default; 0: never, the Jacobi on M), squarer ones from max(N, 200), tall ones from 32 whatever N is;
    JSVD_START_EVD32_SQUARE_RATIO=R makes R/100 rows a column the one test (128² counts as long at R = 100,
    150 x 120 as square at R = 140, 160 x 112 too at R = 150)."""
    code = """
        import torch
        from jsvd_testutils import SYEV_ROUTE, start_v
        for shape in ((128, 128), (160, 112), (150, 120), (120, 100), (300, 100)):
            for count in (39, 40, 199, 200):
                s = start_v([shape] * count, torch.float32)[0]
                print(s["gram_dtype"] if s and s["solver"] in SYEV_ROUTE else None)
    """
    late, on, off = ["None"] * 3 + ["float32"], ["None"] + ["float32"] * 3, ["None"] * 4
    tall = ["float32"] * 4  # (from kEvd32TallMinBatch, 32)
    assert run_child(code).split() == late + on + on + late + tall
    assert run_child(code, JSVD_START_EVD32_SQUARE="0").split() == off + off + off + off + tall
    assert run_child(code, JSVD_START_EVD32_SQUARE="200").split() == late * 4 + tall
    assert run_child(code, JSVD_START_EVD32_SQUARE_RATIO="100").split() == on * 4 + tall
    assert run_child(code, JSVD_START_EVD32_SQUARE_RATIO="140").split() == late + on + late + late + tall
    assert run_child(code, JSVD_START_EVD32_SQUARE_RATIO="150").split() == late * 4 + tall


def test_tall_route_min_knob(tmp_path):
    """JSVD_START_EVD32_TALL_MIN=N (in a child): float32's tall batches of 65 to 128 columns on the float32
    solver's tested route from N matrices instead of kEvd32TallMinBatch (32). The plan says so at N and not
    below it; 32 x 300 x 77 (the default's smallest batch on the route) with a zero member, two equal columns,
    a member at 1e-30 and one whose singular values span 6 decades (the pivots' test sends the batch to the
    float64 solver: S equal to JSVD_START_EVD32_TALL=0's to the bit) or 2 (it may pass): valid outputs, S
    against LAPACK; the Gaussian batch on the route, U and V orthogonal to 3 sqrt(n) eps32."""
    code = """
        import torch
        from jsvd_testutils import SYEV_ROUTE, start_v
        for count in (31, 32, 63, 64, 200):
            s = start_v([(300, 77)] * count, torch.float32)[0]
            print(s["gram_dtype"] if s and s["solver"] in SYEV_ROUTE else None)
    """
    assert run_child(code).split() == ["float64"] + ["float32"] * 4
    assert run_child(code, JSVD_START_EVD32_TALL_MIN="64").split() == ["float64"] * 3 + ["float32"] * 2
    g = torch.Generator().manual_seed(88)
    n = 77
    Q1, Q2 = (torch.linalg.qr(torch.randn(r, n, generator=g, dtype=torch.float64))[0] for r in (300, n))
    for member in ("none", "ill_conditioned", "moderately_conditioned"):
        A = torch.randn(32, 300, n, generator=g, dtype=torch.float64)
        if member != "none":
            A[2] = 0
            A[4, :, 1] = A[4, :, 0]
            A[5] *= 1e-30
            A[3] = (Q1 * torch.logspace(0, -6 if member == "ill_conditioned" else -2, n, dtype=torch.float64)) @ Q2.mT
        A = A.float()
        torch.save(A, tmp_path / "A.pt")
        code = f"""
            import os, torch, torch_jsvd
            A = torch.load({str(tmp_path / "A.pt")!r}).cuda()
            torch.save([t.cpu() for t in torch_jsvd.svd(A, full_matrices=False)] + [torch_jsvd.svdvals(A).cpu()],
                       os.environ["OUT"])
        """
        run_child(code, OUT=str(tmp_path / "r.pt"))
        U, S, Vh, S_values = torch.load(tmp_path / "r.pt")
        # 6 decades: declined to the float64 solver, its S to the bit
        if member == "ill_conditioned":
            run_child(code, OUT=str(tmp_path / "d.pt"), JSVD_START_EVD32_TALL="0")
            assert torch.equal(S, torch.load(tmp_path / "d.pt")[1])
        assert_valid_svd(A, U, S, Vh, False)
        ref = reference_svdvals(A)
        for s in (S, S_values):
            assert ((s.double() - ref).abs().amax(-1) / ref[..., 0].clamp_min(1e-300)).max() <= bound(300, n, F32)
        if member == "none":
            lim = 3 * n**0.5 * torch.finfo(torch.float32).eps
            assert orthogonality_error(U).max().item() <= lim
            assert orthogonality_error(Vh, rows=True).max().item() <= lim


@pytest.mark.parametrize("shape", [(37, 300, 77), (40, 160, 112)], ids=str)
def test_one_read_as_two(tmp_path, shape):
    """The tested route reads its checks, its pivots' test, its late checks and X's test at once, after the
    solver (JSVD_START_EVD32_ONE_READ=0: the pivots and checks before it), the own solver skipping a batch the
    pivots declined. Same outputs to the bit, in children,
    for a Gaussian batch (the route to its end), one with a member whose singular values span 6 decades (the
    pivots decline it: the float64 solver's route, or no start, from G again), one with a NaN (G reaches the
    solver as zeros; svd raises, svd_ex's info is -2 for it alone, the others converged) and with svdvals."""
    g = torch.Generator().manual_seed(shape[2])
    B, m, n = shape
    Q1, Q2 = (torch.linalg.qr(torch.randn(r, n, generator=g, dtype=torch.float64))[0] for r in (m, n))
    for member in ("none", "ill_conditioned", "nan"):
        A = torch.randn(B, m, n, generator=g, dtype=torch.float64)
        A[2] = 0
        A[5] *= 1e-30
        if member == "ill_conditioned":
            A[3] = (Q1 * torch.logspace(0, -6, n, dtype=torch.float64)) @ Q2.mT
        A = A.float()
        if member == "nan":
            A[3, 5, 7] = float("nan")
        torch.save(A, tmp_path / "A.pt")
        code = f"""
            import os, torch, torch_jsvd
            A = torch.load({str(tmp_path / "A.pt")!r}).cuda()
            out = [t.cpu() for t in torch_jsvd.svd_ex(A, full_matrices=False)]
            try:
                out += [t.cpu() for t in torch_jsvd.svd(A, full_matrices=False)] + [torch_jsvd.svdvals(A).cpu()]
            except torch.linalg.LinAlgError as e:
                out.append(str(e))
            torch.save(out, os.environ["OUT"])
        """
        outs = []
        for knob in ("1", "0"):
            run_child(code, OUT=str(tmp_path / f"r{knob}.pt"), JSVD_START_EVD32_ONE_READ=knob)
            outs.append(torch.load(tmp_path / f"r{knob}.pt"))
        assert len(outs[0]) == len(outs[1]) == (5 if member == "nan" else 8)
        for a, b in zip(*outs):
            assert a == b if isinstance(a, str) else torch.equal(a.nan_to_num(), b.nan_to_num())
        info = outs[0][3]
        assert bool((info[torch.arange(B) != 3] > 0).all())
        if member == "nan":  # (svd raised, after the route's one read declined the batch)
            assert int(info[3]) == -2 and "NaN or Inf" in outs[0][4]
            continue
        U, S, Vh, S_values = outs[0][4:]
        assert_valid_svd(A, U, S, Vh, False)
        ref = reference_svdvals(A)
        for s in (S, S_values):
            assert ((s.double() - ref).abs().amax(-1) / ref[..., 0].clamp_min(1e-300)).max() <= bound(m, n, F32)


@pytest.mark.parametrize("shape", [(40, 112, 160), (40, 120, 200), (200, 100, 100), (40, 150, 120), (40, 116, 135)], ids=str)
def test_near_square_route_wide_and_few(tmp_path, shape):
    """The near-square route on its transpose (wide members) and from 40 matrices (at 1.4 rows a column, or
    1.15 from 112 columns: 150 x 120, 135 x 116 on its transpose): a float32 batch of Gaussian
    members with a zero one, one with two equal columns and one at 1e-30 takes it (the plan's Gram dtype
    float32; a member of low rank would decline it, as in test_gram_eigenvectors_in_float32) and gives every
    output property, S and svdvals' S against LAPACK's, U and V orthogonal to
    3 sqrt(k) eps32, and S not JSVD_START_EVD32_SQUARE=0's to the bit (the route ran)."""
    b, m, n = shape
    k = min(m, n)
    g = torch.Generator().manual_seed(b + m + n)
    A = torch.randn(b, m, n, generator=g, dtype=torch.float64)
    A[1] = 0
    A[2, :, 1] = A[2, :, 0]
    A[3] *= 1e-30
    A = A.float()
    plan = torch_jsvd.plan([(m, n)] * b, dtype=torch.float32, device="cuda")["matrices"][0]
    assert plan["start_v"]["gram_dtype"] == "float32"
    U, S, Vh = (t.cpu() for t in torch_jsvd.svd(A.cuda(), full_matrices=False))
    assert_valid_svd(A, U, S, Vh, False)
    ref = reference_svdvals(A)
    for s in (S, torch_jsvd.svdvals(A.cuda()).cpu()):
        assert ((s.double() - ref).abs().amax(-1) / ref[..., 0].clamp_min(1e-300)).max() <= bound(m, n, F32)
    lim = 3 * k**0.5 * torch.finfo(torch.float32).eps
    assert orthogonality_error(U).max().item() <= lim
    assert orthogonality_error(Vh, rows=True).max().item() <= lim
    torch.save(A, tmp_path / "A.pt")
    run_child(f"""
        import os, torch, torch_jsvd
        A = torch.load({str(tmp_path / "A.pt")!r}).cuda()
        torch.save(torch_jsvd.svd(A, full_matrices=False).S.cpu(), os.environ["OUT"])
    """, JSVD_START_EVD32_SQUARE="0", OUT=str(tmp_path / "S0.pt"))
    assert not torch.equal(S, torch.load(tmp_path / "S0.pt"))


@pytest.mark.parametrize("dtype,batch,m,n", [(F32, 200, 128, 128), (F32, 200, 300, 100), (F32, 40, 200, 120),
                                             (F32, 1100, 70, 70), (F64, 16, 128, 128)], ids=str)
def test_own_eigensolver(tmp_path, dtype, batch, m, n):
    """The route's Gram matrices of at most 128 columns solved by the engine's own eigen-solver
    (kernels/eigen/evd_small.h: tridiagonal reduction, bisection, inverse iteration with its clusters
    orthonormalised) in place of syevBatched: by default from 32 matrices (the plan names it), always with
    JSVD_START_OWN_EVD=1, never with 0. With 1 (in a child process), members beside Gaussian ones: a zero one,
    two equal columns, one at 1e-30, one of equal singular values (one cluster of every eigenvalue), one of two
    clusters and one of singular values equal to within 1e-7: every output property, S against LAPACK, and
    float32's Gaussian members' V orthogonal to 3 sqrt(n) eps32, as after syevBatched. 1100 matrices go through
    the solver's tail in two launches (kEvdSmallChunk)."""
    g = torch.Generator().manual_seed(batch + m + n)
    A = torch.randn(batch, m, n, generator=g, dtype=torch.float64)
    A[0] = 0
    A[1, :, 1] = A[1, :, 0]
    A[2] *= 1e-30
    for k, kind in enumerate(("orthogonal", "two_clusters", "near_identity")):
        Q1 = torch.linalg.qr(torch.randn(m, n, generator=g, dtype=torch.float64))[0]
        A[3 + k] = Q1 @ _clustered(kind, n, g)
    A = A.to(dtype)
    assert start_v([(m, n)] * batch, dtype)[0]["solver"] == (OWN_EVD if batch >= 32 else SYEV_BATCHED)
    torch.save(A, tmp_path / "A.pt")
    code = f"""
        import os, torch, torch_jsvd
        from jsvd_testutils import start_v
        print(start_v([({m}, {n})] * {batch}, {dtype})[0]["solver"])
        A = torch.load({str(tmp_path / "A.pt")!r}).cuda()
        torch.save([t.cpu() for t in torch_jsvd.svd(A, full_matrices=False)], os.environ["OUT"])
    """
    assert run_child(code, JSVD_START_OWN_EVD="1", OUT=str(tmp_path / "usv.pt")).strip().splitlines()[-1] == OWN_EVD
    assert run_child(code.split("A = torch.load")[0], JSVD_START_OWN_EVD="0").strip() == SYEV_BATCHED
    U, S, Vh = torch.load(tmp_path / "usv.pt")
    assert_valid_svd(A, U, S, Vh, False)
    ref = reference_svdvals(A)
    assert ((S.double() - ref).abs().amax(-1) / ref[..., 0].clamp_min(1e-300)).max() <= bound(m, n, dtype)
    if dtype == F32:
        lim = 3 * n**0.5 * torch.finfo(torch.float32).eps
        assert orthogonality_error(Vh, rows=True)[6:].max().item() <= lim
