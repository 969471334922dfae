"""The CPU engine's Gram eigenvectors' start (csrc/cpu/gram_start_cpu.h): svd and svdvals of uniform batches
of >= 128 columns (float64 also batches of >= 16 from 64; tall ones from 16; up to 4 matrices of any shape
from 64 and one from 40, whose Jacobi on X runs on the calling thread) run the Jacobi on M V0, V0 the
eigenvectors of M^T M;
svd_ex never does, and float64 matrices whose columns are graded beyond sqrt(n eps), or with a zero column,
and non-finite inputs go without it. Checked: every output property on structured inputs, S against
LAPACK, the relative accuracy of float64 graded matrices' small singular values (against svd_ex, the
Jacobi on M), declined matrices solved bit for bit as svd_ex solves them, accepted ones not, and the switch
(JSVD_EIGH=0, a child process); the converged shortcut (float32 from X^T X, float64 tall ones from
X^T X) against the Jacobi on X; where X fails its test, tall ones' Jacobi on the R of CholeskyQR2 of X."""

import math

import pytest
import torch

import torch_jsvd
from jsvd_testutils import (assert_valid_svd, bound, check_against_child, orthogonality_error, random_rank,
                            random_spectrum, reference_svdvals, run_child, svd_in_child)

DTYPES = [torch.float32, torch.float64]


def _matrix(kind, dtype, g):
    if kind == "gaussian":
        A = torch.randn(2, 200, 160, generator=g, dtype=torch.float64)
    elif kind == "tall":
        A = torch.randn(1, 600, 70, generator=g, dtype=torch.float64)
    elif kind == "wide":
        A = torch.randn(1, 170, 300, generator=g, dtype=torch.float64)
    elif kind == "rank_deficient":
        A = random_rank((2, 180, 180), 40)
    elif kind == "cols_graded_3":
        A = torch.randn(1, 220, 160, generator=g, dtype=torch.float64) * torch.logspace(0, -3, 160, dtype=torch.float64)
    elif kind == "rows_graded_8":
        A = torch.randn(1, 220, 160, generator=g, dtype=torch.float64) * torch.logspace(0, -8, 220,
                                                                                          dtype=torch.float64)[:, None]
    elif kind == "scaled":
        A = torch.randn(2, 200, 170, generator=g, dtype=torch.float64)
        A[0] *= 1e-30
        A[1] *= 1e30
    return A.to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("kind", ["gaussian", "tall", "wide", "rank_deficient", "cols_graded_3", "rows_graded_8",
                                  "scaled"])
@pytest.mark.parametrize("full", [False, True])
def test_outputs(dtype, kind, full):
    A = _matrix(kind, dtype, torch.Generator().manual_seed(7))
    U, S, Vh = torch_jsvd.svd(A, full_matrices=full)
    assert_valid_svd(A, U, S, Vh, full)
    ref = reference_svdvals(A)
    err = ((S.double() - ref).abs().amax(-1) / ref[..., 0]).max()
    assert err <= bound(*A.shape[-2:], dtype)
    S2 = torch_jsvd.svdvals(A)
    assert ((S2.double() - ref).abs().amax(-1) / ref[..., 0]).max() <= bound(*A.shape[-2:], dtype)
    S_ex = torch_jsvd.svd_ex(A, compute_uv=False).S  # (the Jacobi on M: svd_ex never takes the start)
    assert not torch.equal(S, S_ex)  # (the start ran)
    if kind == "cols_graded_3" and dtype == torch.float64:
        # the small singular values of a column-graded matrix, relatively, against the Jacobi on M
        assert ((S - S_ex).abs() / S_ex).max() <= 1e-10


def test_float64_declined_as_svd_ex_solves_them():
    """Columns graded over 12 decades, or a zero column: the Jacobi on M itself, the bits svd_ex gives;
    within the ratio: the start, other bits."""
    g = torch.Generator().manual_seed(3)
    A = torch.randn(3, 200, 170, generator=g, dtype=torch.float64)
    A[0] *= torch.logspace(0, -12, 170, dtype=torch.float64)[torch.randperm(170, generator=g)]
    A[1, :, 17] = 0
    A[2] *= torch.logspace(0, -3, 170, dtype=torch.float64)
    for k in range(3):
        S = torch_jsvd.svdvals(A[k])
        S_ex = torch_jsvd.svd_ex(A[k], compute_uv=False).S
        assert torch.equal(S, S_ex) == (k < 2), k


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_non_finite_input_is_reported(dtype):
    A = torch.randn(1, 200, 170, dtype=dtype)
    A[0, 5, 7] = float("inf")
    with pytest.raises(torch.linalg.LinAlgError):
        torch_jsvd.svd(A)
    assert int(torch_jsvd.svd_ex(A).info) == -2


def test_float64_batches_from_64_columns():
    """float64 batches of >= 16 matrices take the start from 64 columns (batches of 5 to 15 from 128)."""
    g = torch.Generator().manual_seed(9)
    A = random_rank((16, 100, 64), 50)
    A[1:] = torch.randn(15, 100, 64, generator=g, dtype=torch.float64)
    U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
    assert_valid_svd(A, U, S, Vh, False)
    ref = torch.linalg.svdvals(A)
    assert ((S - ref).abs().amax(-1) / ref[..., 0]).max() <= bound(100, 64, torch.float64)
    assert not torch.equal(S, torch_jsvd.svd_ex(A, compute_uv=False).S)
    narrow, five = torch.randn(16, 100, 63, generator=g, dtype=torch.float64), torch.randn(5, 300, 127, generator=g,
                                                                                             dtype=torch.float64)
    for B in (A[:15], narrow, five):  # (15 matrices; 63 columns; 5 of 127)
        assert torch.equal(torch_jsvd.svdvals(B), torch_jsvd.svd_ex(B, compute_uv=False).S)


def test_below_the_threshold_and_switched_off():
    """float32 batches of 127 columns, single matrices of 39, a batch of 5 float64 matrices of 64 columns and
    fewer than 200 rows, or float32 ones, run the Jacobi on M (svd's bits are svd_ex's); JSVD_EIGH=0 switches
    the start off."""
    g = torch.Generator().manual_seed(1)
    for A in (torch.randn(5, 300, 127, generator=g), torch.randn(90, 39, generator=g, dtype=torch.float64),
              torch.randn(5, 190, 64, generator=g, dtype=torch.float64),
              torch.randn(50, 199, 48, generator=g), torch.randn(50, 400, 15, generator=g)):
        assert torch.equal(torch_jsvd.svdvals(A), torch_jsvd.svd_ex(A, compute_uv=False).S)
    run_child("""
        import torch, torch_jsvd
        A = torch.randn(300, 200, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
        assert torch.equal(torch_jsvd.svdvals(A), torch_jsvd.svd_ex(A, compute_uv=False).S)
    """, JSVD_EIGH="0")


@pytest.mark.parametrize("dtype,shape", [(torch.float32, (6, 600, 40)), (torch.float32, (20, 256, 16)),
                                         (torch.float32, (1, 2000, 64)), (torch.float32, (2, 800, 160)),
                                         (torch.float32, (1, 256, 256)), (torch.float32, (4, 128, 128)),
                                         (torch.float64, (1, 600, 128)), (torch.float64, (16, 200, 64)),
                                         (torch.float64, (2, 700, 160))], ids=str)
def test_already_converged(tmp_path, dtype, shape):
    """svd (reduced U) and svdvals whose M V0 is already orthogonal to the tolerance in every matrix
    (ConvergedStart, core.h: the Jacobi's own test on C = X^T X of the formed float64 X; float32 at its
    tol less U's rounding, converged_start_x32, which Gaussian squares pass; float64's tall matrices,
    converged_start_f64) take S, U and V without the Jacobi on X: valid factors,
    S against LAPACK and against the Jacobi on X's (JSVD_START_CONVERGED=0, float64 _F64=0, a child
    process, whose bits differ), U and V as orthogonal. A batch with a rank-deficient member, and
    full_matrices=True, take the Jacobi on X: the child's bits exactly; but a square's full_matrices=True,
    which asks for nothing more, takes the shortcut: svd's bits without it."""
    g = torch.Generator().manual_seed(sum(shape))
    A = torch.randn(*shape, generator=g, dtype=dtype)
    D = A.clone()
    D[-1, :, 1] = D[-1, :, 0]
    torch.save([A, D], tmp_path / "A.pt")
    knob = "JSVD_START_CONVERGED" if dtype == torch.float32 else "JSVD_START_CONVERGED_F64"
    run_child(f"""
        import os, torch, torch_jsvd
        A, D = torch.load({str(tmp_path / "A.pt")!r})
        torch.save([list(torch_jsvd.svd(A, False)), torch_jsvd.svdvals(A), list(torch_jsvd.svd(D, False)),
                    list(torch_jsvd.svd(A, True))], os.environ["OUT"])
    """, **{knob: "0"}, OUT=str(tmp_path / "off.pt"))
    (U0, S0, Vh0), S0v, off_d, off_full = torch.load(tmp_path / "off.pt")
    U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
    assert_valid_svd(A, U, S, Vh, False)
    m, n = shape[-2:]
    ref = reference_svdvals(A)
    assert ((S.double() - ref).abs().amax(-1) / ref[..., 0]).max() <= bound(m, n, dtype)
    assert not torch.equal(S, S0) and not torch.equal(torch_jsvd.svdvals(A), S0v)  # (the shortcut ran)
    torch.testing.assert_close(S, S0, rtol=0, atol=bound(m, n, dtype) * S0[..., :1].max().item())
    torch.testing.assert_close(torch_jsvd.svdvals(A), S, rtol=0, atol=0)
    eps = torch.finfo(dtype).eps
    orth = lambda Q: orthogonality_error(Q).max().item()
    assert orth(U) <= max(2 * orth(U0), 10 * n * eps) and orth(Vh.mT) <= max(2 * orth(Vh0.mT), 10 * n * eps)
    # (a square's full_matrices=True asks for nothing more: the shortcut's bits, as without it)
    for got, want in ((torch_jsvd.svd(D, False), off_d), (torch_jsvd.svd(A, True), off_full if m != n else (U, S, Vh))):
        for a, b in zip(got, want):
            assert torch.equal(a, b)


@pytest.mark.parametrize("small", [1e-5, 1e-4])
def test_converged_with_a_small_singular_value(tmp_path, small):
    """float32's test on X (converged_start_x32, core.h) asks of a column only that S_j = ||x_j|| be within tol
    of itself (since stop 74): a 300² of singular values 1 and one small one (1e-5: below float64's col_min,
    16 (m + n) eps64 ||A||_F^2, which sent it to the Jacobi on X before; 1e-4: above it), whose X is
    orthogonal to ~1e-11, takes S, U and V without the Jacobi on X: its bits differ from
    JSVD_START_CONVERGED=0's, its smallest singular value within 10 tol of LAPACK's relative to itself,
    U and V orthogonal."""
    n = 300
    g = torch.Generator().manual_seed(n)
    Q1 = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=torch.float64))[0]
    Q2 = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=torch.float64))[0]
    s = torch.ones(n, dtype=torch.float64)
    s[-1] = small
    A = ((Q1 * s) @ Q2.mT).float().unsqueeze(0)
    U0, S0, Vh0 = svd_in_child(tmp_path, A, JSVD_START_CONVERGED="0")
    U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
    assert_valid_svd(A, U, S, Vh, False)
    # (the shortcut ran: its outputs' bits are not the Jacobi's on X. S may be, to the last bit: both IEEE square
    # roots of C_jj since stop 88, rounded to float32; U's columns of the equal singular values are not)
    assert not (torch.equal(S, S0) and torch.equal(U, U0))
    ref = reference_svdvals(A)
    tol = math.sqrt(n) * torch.finfo(torch.float32).eps
    assert abs(S[0, -1].item() - ref[0, -1].item()) <= 10 * tol * ref[0, -1].item()
    assert ((S.double() - ref).abs().max() / ref[..., 0]).item() <= bound(n, n, torch.float32)
    eps = torch.finfo(torch.float32).eps
    assert orthogonality_error(U).max().item() <= 10 * n * eps
    assert orthogonality_error(Vh.mT).max().item() <= 10 * n * eps


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(1, 48, 48), (1, 100, 40), (1, 64, 64), (1, 96, 96), (4, 128, 128), (2, 100, 256),
                                   (3, 256, 256), (1, 300, 257)], ids=str)
def test_few_matrices_from_64_columns(dtype, shape):
    """Up to 4 matrices of any shape from 64 columns, and one from 40, take the start (their Jacobi on X on the
    calling thread to 256 columns, beyond it on the pool's): every output property, S against LAPACK, not
    svd_ex's bits."""
    g = torch.Generator().manual_seed(sum(shape))
    A = torch.randn(*shape, generator=g, dtype=torch.float64)
    A[0] *= torch.logspace(0, -2, shape[-1], dtype=torch.float64)  # (graded within float64's ratio)
    if shape[0] > 1:
        A[-1] = random_rank(shape[1:], min(shape[1:]) // 3)
    A = A.to(dtype)
    for full in (False, True):
        U, S, Vh = torch_jsvd.svd(A, full_matrices=full)
        assert_valid_svd(A, U, S, Vh, full)
    ref = reference_svdvals(A)
    assert ((S.double() - ref).abs().amax(-1) / ref[..., 0]).max() <= bound(*shape[-2:], dtype)
    assert not torch.equal(torch_jsvd.svdvals(A), torch_jsvd.svd_ex(A, compute_uv=False).S)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("full", [False, True])
def test_list_members_take_the_start(dtype, full):
    """svd_varlen on the CPU groups a list's members by shape, and each group the start takes as a uniform
    batch is solved so (S bit for bit torch_jsvd.svd's of the group stacked), the rest by the Jacobi on M;
    every member's outputs valid, S against LAPACK. The few matrices' rules (up to 4 from 64 columns) hold
    only for a list of as few members: the 96² group of a long list runs the Jacobi on M, of a short one
    the start."""
    g = torch.Generator().manual_seed(5)
    shapes = [(128, 128)] * 6 + [(300, 70)] * 2 + [(64, 300)] + [(8, 5), (1, 7), (40, 30), (0, 4)] * 3 + [(96, 96)] * 2
    As = [torch.randn(m, n, generator=g, dtype=torch.float64) for m, n in shapes]
    As[5], As[7] = random_rank((128, 128), 20), random_rank((300, 70), 9)  # (rank-deficient members)
    As = [A.to(dtype) for A in As]
    U, S, Vh = torch_jsvd.svd_varlen(As, full_matrices=full)
    for A, u, s, vh in zip(As, U, S, Vh):
        assert_valid_svd(A, u, s, vh, full)
        if A.numel():
            ref = reference_svdvals(A)
            assert ((s.double() - ref).abs().max() / ref[0]).item() <= bound(*A.shape, dtype)
    for first, count in ((0, 6), (6, 2), (8, 1)):  # (the groups the start takes)
        want = torch_jsvd.svd(torch.stack(As[first:first + count]), full_matrices=full)[1]
        assert torch.equal(torch.stack(S[first:first + count]), want)
        assert not torch.equal(want, torch_jsvd.svd_ex(torch.stack(As[first:first + count]), compute_uv=False).S)
    pair = torch.stack(As[-2:])
    assert not torch.equal(torch.stack(S[-2:]), torch_jsvd.svd(pair, full_matrices=full)[1])  # (a long list's)
    short = torch_jsvd.svd_varlen([As[-2], As[-1], As[9]], full_matrices=full)[1]
    assert torch.equal(torch.stack(short[:2]), torch_jsvd.svd(pair, full_matrices=full)[1])


@pytest.mark.parametrize("shape", [(1, 4000, 16), (4, 1000, 40), (8, 300, 24), (30, 200, 50)], ids=str)
def test_float64_tall_batches(shape):
    """float64 tall batches (rows >= max(4 cols, 200), from 16 columns) take the start as float32's do:
    every output property, S against LAPACK, not svd_ex's bits (a rank-deficient last member where there
    are several); a member graded beyond the ratio sends its batch to the Jacobi on M (svd_ex's bits)."""
    g = torch.Generator().manual_seed(sum(shape))
    A = torch.randn(*shape, generator=g, dtype=torch.float64)
    if shape[0] > 1:
        A[-1] = random_rank(shape[1:], shape[-1] // 2)
    for full in (False, True):
        U, S, Vh = torch_jsvd.svd(A, full_matrices=full)
        assert_valid_svd(A, U, S, Vh, full)
    ref = torch.linalg.svdvals(A)
    assert ((S - ref).abs().amax(-1) / ref[..., 0]).max() <= bound(*shape[-2:], torch.float64)
    assert not torch.equal(torch_jsvd.svdvals(A), torch_jsvd.svd_ex(A, compute_uv=False).S)
    A[0] *= torch.logspace(0, -12, shape[-1], dtype=torch.float64)
    assert torch.equal(torch_jsvd.svdvals(A), torch_jsvd.svd_ex(A, compute_uv=False).S)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(6, 600, 64), (2, 4000, 16), (1, 700, 100)], ids=str)
def test_x_by_cholesky_qr(tmp_path, dtype, shape):
    """Where M V0 fails its test (singular values over 6 decades; members scaled by 1e-30 and 1e30), tall
    matrices' Jacobi on X runs on the R of a float64 CholeskyQR2 of X (gram_start_cpu.h; float64 by the
    rule, float32 with JSVD_X_CHOLQR=1): every output property, S against LAPACK, bits other than the Jacobi
    on X's (JSVD_X_CHOLQR=0, a child process: the route ran), U and V as orthogonal. A batch with a zero and
    a rank-deficient member is declined (the child's bits); full_matrices never takes it."""
    g = torch.Generator().manual_seed(sum(shape))
    b, m, n = shape
    A = torch.stack([random_spectrum(m, n, 6, g) * [1.0, 1e-30, 1e30][k % 3] for k in range(b)]).to(dtype)
    D = torch.cat([A, torch.zeros(1, m, n, dtype=dtype), random_rank((1, m, n), n // 2).to(dtype)])
    torch.save([A, D], tmp_path / "A.pt")
    code = f"""
        import os, torch, torch_jsvd
        A, D = torch.load({str(tmp_path / "A.pt")!r})
        torch.save([list(torch_jsvd.svd(A, False)), torch_jsvd.svdvals(A), list(torch_jsvd.svd(D, False)),
                    list(torch_jsvd.svd(A, True))], os.environ["OUT"])
    """
    # (float64's steps on X, which come first and pass on some of these, off in both: this is CholeskyQR2's test)
    run_child(code, JSVD_X_CHOLQR="0", JSVD_START_X_STEPS="0", OUT=str(tmp_path / "off.pt"))
    run_child(code, JSVD_X_CHOLQR="1" if dtype == torch.float32 else "-1", JSVD_START_X_STEPS="0",
              OUT=str(tmp_path / "on.pt"))
    (U0, S0, Vh0), S0v, off_d, off_full = torch.load(tmp_path / "off.pt")
    (U, S, Vh), Sv, on_d, on_full = torch.load(tmp_path / "on.pt")
    assert_valid_svd(A, U, S, Vh, False)
    ref = reference_svdvals(A)
    err = lambda S: ((S.double() - ref).abs().amax(-1) / ref[..., 0]).max()
    assert err(S) <= bound(m, n, dtype) and err(Sv) <= bound(m, n, dtype)
    assert not torch.equal(S, S0) and not torch.equal(Sv, S0v)  # (CholeskyQR2 ran)
    eps = torch.finfo(dtype).eps
    orth = lambda Q: orthogonality_error(Q).max().item()
    assert orth(U) <= max(2 * orth(U0), 10 * n * eps) and orth(Vh.mT) <= max(2 * orth(Vh0.mT), 10 * n * eps)
    for got, want in ((on_d, off_d), (on_full, off_full)):
        for a, c in zip(got, want):
            assert torch.equal(a, c)


@pytest.mark.parametrize("shape,decades", [((1, 300, 300), 0), ((4, 256, 256), 0), ((1, 400, 240), 0),
                                           ((2, 256, 256), 3), ((2, 256, 256), 6)], ids=str)
def test_float64_steps_on_x(tmp_path, shape, decades):
    """float64's start where X = M V0 fails the Jacobi's test or is not tested (squares): up to two one-sided
    first-order steps on X itself (x_step, gram_start_cpu.cpp; the CUDA engine's start_x_steps.h), tested by
    kX64Steps (core.h), before the Jacobi on X. Gaussian matrices (decades 0) and singular values over 3 and 6
    decades (random singular vectors; over 10 decades G's least eigenvalues are its rounding, some negative,
    and the steps are not tried): valid factors whose bits differ from JSVD_START_X_STEPS=0's (a child
    process), S within float64's bound of LAPACK's and of the child's, U and V at least as orthogonal (within
    10 n eps); svdvals within the same bound of svd's S."""
    b, m, n = shape
    g = torch.Generator().manual_seed(m + n + decades)
    A = (torch.randn(*shape, generator=g, dtype=torch.float64) if decades == 0
         else torch.stack([random_spectrum(m, n, decades, g) for _ in range(b)]))
    U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
    U0, _, _ = check_against_child(tmp_path, A, U, S, Vh, JSVD_START_X_STEPS="0")
    assert not torch.equal(U, U0)  # (the steps ran)
    torch.testing.assert_close(torch_jsvd.svdvals(A), S, rtol=0, atol=bound(m, n, torch.float64) * S[..., :1].max().item())
