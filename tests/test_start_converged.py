"""The Gram eigenvectors' start already converged (kernels/precondition/start_converged.h): float32 svd
(reduced U) and svdvals (float64's too, by the Jacobi's own test on X) skip the Jacobi on X = M V0 where X's columns are already orthogonal to the
Jacobi's tolerance, on the batched start (V0^T G V0 tested a block a matrix) and on the eigen-solvers'
routes (syevd, syevBatched: X^T X tested, then converged_outputs_kernel writes U, S and V). Checked: which
Jacobi kernels a call launches (torch.profiler), every output property, S against float64's, U and V
orthogonal at least as well as with the Jacobi on X (JSVD_START_CONVERGED=0, in a child process), and
members that must still take the Jacobi (rank-deficient, a singular value far below the others).
Skipped without a CUDA device.
"""

import pytest
import torch

import torch_jsvd
from jsvd_testutils import (ANY_LEVEL, assert_valid_svd, bound, jacobi_launches, orthogonality_error, reference_svdvals,
                            run_child, start_v)

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


@pytest.mark.parametrize("shape", [(200, 2048, 16), (800, 128, 32), (100, 256, 64)], ids=str)
def test_start_already_converged_skips_the_jacobi_on_x(tmp_path, shape):
    """float32 svd (reduced U) of a Gaussian batch on the batched start: M V0 is already orthogonal to the
    Jacobi's tolerance in every matrix (start_converged.h), so U, S and V come from one product and the
    Jacobi on X does not run (one Jacobi launch, the Gram matrices', instead of two). Against the Jacobi
    on X (JSVD_START_CONVERGED=0, in a child process): the same S, and U and V as orthogonal.
    svdvals takes it too (S alone). A batch with one structured member (two equal columns) does not pass
    and takes the Jacobi on X; full_matrices=True never takes it."""
    g = torch.Generator().manual_seed(sum(shape))
    A = torch.randn(*shape, generator=g)
    torch.save(A, tmp_path / "A.pt")
    A = A.cuda()
    assert start_v([shape[1:]] * shape[0])[0] is not None
    assert jacobi_launches(lambda: torch_jsvd.svd(A, full_matrices=False)) == 1
    U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
    assert_valid_svd(A, U, S, Vh, False)
    code = f"""
        import os, torch, torch_jsvd
        A = torch.load({str(tmp_path / "A.pt")!r}).cuda()
        torch.save([t.cpu() for t in torch_jsvd.svd(A, full_matrices=False)], os.environ["OUT"])
    """
    run_child(code, JSVD_START_CONVERGED="0", OUT=str(tmp_path / "ref.pt"))
    U0, S0, Vh0 = (t.cuda() for t in torch.load(tmp_path / "ref.pt"))
    m, n = shape[1:]
    torch.testing.assert_close(S, S0, rtol=0, atol=bound(m, n, torch.float32) * S0[..., :1].max().item())
    orth = lambda Q: orthogonality_error(Q).max().item()
    assert orth(U) <= max(2 * orth(U0), 10 * n * torch.finfo(torch.float32).eps), (orth(U), orth(U0))
    assert orth(Vh.mT) <= max(2 * orth(Vh0.mT), 10 * n * torch.finfo(torch.float32).eps)
    # one member with two equal columns: the whole batch through the Jacobi on X, still exact
    gaussian = A.clone()
    A[3, :, 1] = A[3, :, 0]
    assert jacobi_launches(lambda: torch_jsvd.svd(A, full_matrices=False)) == 2
    U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
    assert_valid_svd(A, U, S, Vh, False)
    assert S[3, -1] <= 1e-5 * S[3, 0]
    assert jacobi_launches(lambda: torch_jsvd.svdvals(A)) == 2
    # svdvals of the Gaussian batch: S alone, from the same check, as svd's
    A = gaussian
    assert jacobi_launches(lambda: torch_jsvd.svdvals(A)) == 1
    torch.testing.assert_close(torch_jsvd.svdvals(A), S0, rtol=0, atol=bound(m, n, torch.float32) * S0[..., :1].max().item())
    assert jacobi_launches(lambda: torch_jsvd.svd(A, full_matrices=True)) == 2


@pytest.mark.parametrize("shape", [(1, 1200, 300), (1, 300, 1200), (100, 300, 272), (20, 600, 100), (12, 80, 400)],
                         ids=str)
def test_eigen_solver_start_already_converged(shape):
    """float32 svd (reduced U) and svdvals of well-conditioned matrices on the eigen-solvers' routes
    (syevd: one matrix, tall or wide; syevBatched: a batch of near-square ones, or of tall or wide ones of
    65 to 128 columns; converged_outputs_kernel writes the outputs of both): M V0 is already
    orthogonal to the Jacobi's tolerance (converged_fails on X^T X), so no Jacobi runs, and S comes to
    float32's rounding of the float64 singular values. full_matrices=True and a rank-deficient member take
    the Jacobi; a singular value at 1e-4 of the others may pass X's test (kX32) or not, exact either way."""
    b, m, n = shape
    k = min(m, n)
    g = torch.Generator().manual_seed(m + n + b)
    Q1 = torch.linalg.qr(torch.randn(b, m, k, generator=g, dtype=torch.float64))[0]
    Q2 = torch.linalg.qr(torch.randn(b, n, k, generator=g, dtype=torch.float64))[0]
    s = torch.linspace(3, 1, k, dtype=torch.float64)
    A = ((Q1 * s) @ Q2.mT).float().cuda()
    assert start_v([(m, n)] * b)[0] is not None
    eps = torch.finfo(torch.float32).eps
    ref = reference_svdvals(A)
    assert jacobi_launches(lambda: torch_jsvd.svd(A, full_matrices=False), ANY_LEVEL) == 0
    U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
    assert_valid_svd(A, U, S, Vh, False)
    assert ((S.double() - ref).abs() <= 2 * eps * ref).all()
    assert orthogonality_error(U).max().item() <= k * eps
    assert orthogonality_error(Vh.mT).max().item() <= k * eps
    assert jacobi_launches(lambda: torch_jsvd.svdvals(A), ANY_LEVEL) == 0
    assert torch.equal(torch_jsvd.svdvals(A), S)
    assert jacobi_launches(lambda: torch_jsvd.svd(A, full_matrices=True), ANY_LEVEL) > 0
    # a rank-deficient member (two equal columns, or rows where wide): the Jacobi on X; one singular value
    # at 1e-4 of the others: either route; both exact
    deficient = A.clone()
    if m >= n:
        deficient[-1, :, 1] = deficient[-1, :, 0]
    else:
        deficient[-1, 1] = deficient[-1, 0]
    assert jacobi_launches(lambda: torch_jsvd.svd(deficient, full_matrices=False), ANY_LEVEL) > 0
    s[-1] = 1e-4
    graded = ((Q1 * s) @ Q2.mT).float().cuda()
    for A in (graded, deficient):
        U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
        assert_valid_svd(A, U, S, Vh, False)
        ref = reference_svdvals(A)
        assert ((S.double() - ref).abs() <= 4 * eps * ref[..., :1]).all()
        assert S[-1, -1] <= 1e-3 * S[-1, 0]


@pytest.mark.parametrize("shape", [(200, 1024, 16), (100, 512, 64), (40, 300, 100), (1, 1200, 300)], ids=str)
def test_float64_start_already_converged(tmp_path, shape):
    """float64 svd (reduced U) and svdvals of well-conditioned matrices on the start (the batched one, up
    to 64 columns, and the eigen-solvers' routes): where X = M V0 passes the Jacobi's own test (on X^T X,
    converged_start_f64), U = X D^-1, S and V come from converged_outputs_kernel and the Jacobi on X does
    not run (the batched start: only the Gram matrices' Jacobi). S agrees with LAPACK's and with the
    Jacobi on X's (JSVD_START_CONVERGED_F64=0, in a child process) to float64's bound, U and V are as
    orthogonal. A rank-deficient member (two equal columns) takes the Jacobi on X, still exact."""
    b, m, n = shape
    g = torch.Generator().manual_seed(m + n + b)
    Q1 = torch.linalg.qr(torch.randn(b, m, n, generator=g, dtype=torch.float64))[0]
    Q2 = torch.linalg.qr(torch.randn(b, n, n, generator=g, dtype=torch.float64))[0]
    A = (Q1 * torch.linspace(3, 1, n, dtype=torch.float64)) @ Q2.mT
    torch.save(A, tmp_path / "A.pt")
    A = A.cuda()
    assert start_v([(m, n)] * b, torch.float64)[0] is not None
    gram_jacobi = 1 if n <= 64 else 0  # (the batched start's V0 comes from this engine's Jacobi)
    assert jacobi_launches(lambda: torch_jsvd.svd(A, full_matrices=False), ANY_LEVEL) == gram_jacobi
    U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
    assert_valid_svd(A, U, S, Vh, False)
    ref = reference_svdvals(A)
    assert ((S - ref).abs().amax(-1) / ref[..., 0]).max() <= bound(m, n, torch.float64)
    code = f"""
        import os, torch, torch_jsvd
        A = torch.load({str(tmp_path / "A.pt")!r}).cuda()
        torch.save([t.cpu() for t in torch_jsvd.svd(A, full_matrices=False)], os.environ["OUT"])
    """
    run_child(code, JSVD_START_CONVERGED_F64="0", OUT=str(tmp_path / "ref.pt"))
    U0, S0, Vh0 = (t.cuda() for t in torch.load(tmp_path / "ref.pt"))
    eps = torch.finfo(torch.float64).eps
    torch.testing.assert_close(S, S0, rtol=0, atol=bound(m, n, torch.float64) * S0[..., :1].max().item())
    orth = lambda Q: orthogonality_error(Q).max().item()
    assert orth(U) <= max(2 * orth(U0), 10 * n * eps) and orth(Vh.mT) <= max(2 * orth(Vh0.mT), 10 * n * eps)
    assert jacobi_launches(lambda: torch_jsvd.svdvals(A), ANY_LEVEL) == gram_jacobi
    assert torch.equal(torch_jsvd.svdvals(A), S)
    A[-1, :, 1] = A[-1, :, 0]
    assert jacobi_launches(lambda: torch_jsvd.svd(A, full_matrices=False), ANY_LEVEL) > gram_jacobi
    U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
    assert_valid_svd(A, U, S, Vh, False)
    assert S[-1, -1] <= 1e-12 * S[-1, 0]


# (shape, spectrum, whether G's bound turns it away): "gaussian", or "graded": random orthogonal factors
# and singular values geometric from 1 to 1e-2.
_X32_CASES = [((1, 600, 600), "graded", True), ((100, 300, 272), "gaussian", True),
              ((1, 1200, 300), "gaussian", False), ((1, 300, 1200), "gaussian", False)]


@pytest.mark.parametrize("shape,spectrum,g32_declines", _X32_CASES, ids=str)
def test_eigen_solver_x32(shape, spectrum, g32_declines):
    """float32 on the eigen-solvers' routes tests X^T X by float64's test at float32's tol (converged_start_x32,
    as the CPU engine's near-square matrices; a child process each way): matrices whose singular values
    stand apart pass it where the bound on G's rounding (JSVD_START_CONVERGED_X32=0) turned the squares away:
    no Jacobi launch, every output property, S to float32's rounding of float64's, U and V orthogonal to a
    k eps (as the route's other test). A rank-deficient member and full_matrices=True take the Jacobi either way
    (but a square's full_matrices=True, which changes nothing for it: no Jacobi either)."""
    b, m, n = shape
    assert start_v([(m, n)] * b)[0] is not None
    code = f"""
        import torch, torch_jsvd
        from jsvd_testutils import ANY_LEVEL, assert_valid_svd, jacobi_launches, orthogonality_error, reference_svdvals
        g = torch.Generator().manual_seed({m + n + b})
        k = min({m}, {n})
        if "{spectrum}" == "graded":
            P = torch.linalg.qr(torch.randn({b}, {m}, k, generator=g, dtype=torch.float64))[0]
            Q = torch.linalg.qr(torch.randn({b}, {n}, k, generator=g, dtype=torch.float64))[0]
            s = torch.logspace(0, -2, k, dtype=torch.float64)
            A = ((P * s) @ Q.mT).float().cuda()
        else:
            A = torch.randn({b}, {m}, {n}, generator=g).cuda()
        U, S, Vh = torch_jsvd.svd(A, full_matrices=False)  # (first: the tuner's calibration from 512 columns)
        launches = jacobi_launches(lambda: torch_jsvd.svd(A, full_matrices=False), ANY_LEVEL)
        assert_valid_svd(A, U, S, Vh, False)
        eps = torch.finfo(torch.float32).eps
        ref = reference_svdvals(A)
        assert ((S.double() - ref).abs() <= 4 * eps * ref[..., :1]).all()
        orth = max(orthogonality_error(U).max().item(), orthogonality_error(Vh.mT).max().item())
        full = jacobi_launches(lambda: torch_jsvd.svd(A, full_matrices=True), ANY_LEVEL)
        D = A.clone()
        if {m} >= {n}:
            D[-1, :, 1] = D[-1, :, 0]
        else:
            D[-1, 1] = D[-1, 0]
        deficient = jacobi_launches(lambda: torch_jsvd.svd(D, full_matrices=False), ANY_LEVEL)
        print(launches, full, deficient, orth / (k * eps))
    """
    on = run_child(code).split()
    off = run_child(code, JSVD_START_CONVERGED_X32="0").split()
    assert int(on[0]) == 0, on
    assert (int(off[0]) > 0) == g32_declines, off
    # (full_matrices: the Jacobi, but for a square, whose full U is its reduced one)
    assert (int(on[1]) > 0) == (m != n) and int(on[2]) > 0, on
    assert float(on[3]) <= 1.0, on


@pytest.mark.parametrize("shape,dtype", [((800, 128, 32), torch.float32), ((20, 600, 100), torch.float32),
                                         ((100, 512, 64), torch.float64)], ids=str)
def test_converged_start_needs_no_second_info_read(shape, dtype):
    """Where the start's outputs are converged (the batched start, the eigen-solvers' routes; float64's by
    converged_outputs), the engine has read on the host that every matrix converged with finite outputs
    (CoreResult::info_read), so svd and svdvals return without reading info again: no info_min_kernel.
    svd_varlen alike where its one part is such a batch. A batch with a rank-deficient member goes through
    the Jacobi on X and reads it; a NaN or an Inf member still raises, and svd_ex's info says which."""
    b, m, n = shape
    g = torch.Generator().manual_seed(m + n + b)
    Q1 = torch.linalg.qr(torch.randn(b, m, n, generator=g, dtype=torch.float64))[0]
    Q2 = torch.linalg.qr(torch.randn(b, n, n, generator=g, dtype=torch.float64))[0]
    A = ((Q1 * torch.linspace(3, 1, n, dtype=torch.float64)) @ Q2.mT).to(dtype).cuda()
    info_reads = lambda fn: jacobi_launches(fn, ("info_min_kernel",))
    assert info_reads(lambda: torch_jsvd.svd(A, full_matrices=False)) == 0
    assert info_reads(lambda: torch_jsvd.svdvals(A)) == 0
    # svd_varlen: a list of one shape is that uniform batch (read: none again); with a rank-deficient member
    # of another shape, which takes the Jacobi, info is read once (a uniform part of 32 members or more
    # needs no read of its own)
    assert info_reads(lambda: torch_jsvd.svd_varlen(list(A))) == 0
    odd = A[0, :-1].clone()
    odd[:, 1] = odd[:, 0]
    assert info_reads(lambda: torch_jsvd.svd_varlen(list(A) + [odd])) == 1
    U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
    assert_valid_svd(A, U, S, Vh, False)
    assert torch.isfinite(U).all() and torch.isfinite(S).all() and torch.isfinite(Vh).all()
    deficient = A.clone()
    deficient[-1, :, 1] = deficient[-1, :, 0]
    assert info_reads(lambda: torch_jsvd.svd(deficient, full_matrices=False)) == 1
    assert_valid_svd(deficient, *torch_jsvd.svd(deficient, full_matrices=False), False)
    assert info_reads(lambda: torch_jsvd.svd(A, full_matrices=True)) == 1
    for bad in (float("nan"), float("inf")):
        B = A.clone()
        B[b // 2, 3, 5] = bad
        with pytest.raises(torch.linalg.LinAlgError, match="NaN or Inf"):
            torch_jsvd.svd(B, full_matrices=False)
        with pytest.raises(torch.linalg.LinAlgError, match="NaN or Inf"):
            torch_jsvd.svdvals(B)
        info = torch_jsvd.svd_ex(B, full_matrices=False).info
        assert info[b // 2] < 0 and (info[torch.arange(b) != b // 2] >= 0).all()
