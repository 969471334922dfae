"""One-sided first-order steps on the start's X (kernels/precondition/start_x_steps.h): float64 squares on the
eigen-solvers' routes (syevd, syevBatched) whose X = M V0 fails the Jacobi's test take up to two steps on X
(X W, V0 W, W = I + E + E^2/2 from C = X^T X) and return U, S and V from X where it then passes, with no
Jacobi kernel. Checked: which kernels a call launches (torch.profiler), every output property, S against
LAPACK's float64 and against the Jacobi on X's (JSVD_START_X_STEPS=0, in a child process), U and V as
orthogonal; svdvals the same S; plan() naming the steps; a rank-deficient member and an ill-conditioned
spectrum still valid (the Jacobi on X after the steps where they do not pass). float32's X on the same routes,
tested at float32's tol, takes the steps where it fails that test; no case here makes it fail (Gaussian float32
squares pass before any step). Skipped without a CUDA device.
"""

import pytest
import torch

import torch_jsvd
from jsvd_testutils import (ANY_LEVEL, assert_valid_svd, check_against_child, jacobi_launches, random_spectrum,
                            run_child, start_v)

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

# Every Jacobi level's kernels, the GEMM level's included.
JACOBI = ANY_LEVEL + ("gemm_level_kernel", "pair_evd_kernel")


def _gaussian(b, m, n, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, m, n, generator=g, dtype=torch.float64)


def _check_against_no_steps(tmp_path, A, U, S, Vh):
    """check_against_child with the steps off (JSVD_START_X_STEPS=0)."""
    check_against_child(tmp_path, A, U, S, Vh, JSVD_START_X_STEPS="0")


def test_plan_names_the_steps():
    """plan() reports the steps on the routes that take them (float64 squares after syevd or syevBatched),
    not on the batched start of small matrices nor on the float32-solved route."""
    assert start_v([(1024, 1024)], torch.float64)[0]["x_steps"] == 2
    assert start_v([(512, 512)] * 100, torch.float64)[0]["x_steps"] == 2
    assert "x_steps" not in start_v([(256, 256)] * 200, torch.float32)[0]  # (float32's solver)
    assert "x_steps" not in start_v([(128, 32)] * 1000, torch.float64)[0]  # (the batched start)
    out = run_child("""
        import torch, torch_jsvd
        print("x_steps" in torch_jsvd.plan([(1024, 1024)], dtype=torch.float64, device="cuda")["matrices"][0]["start_v"])
    """, JSVD_START_X_STEPS="0")
    assert out.strip() == "False"


@pytest.mark.parametrize("shape", [(1, 1024, 1024), (100, 512, 512), (2, 2048, 2048), (1, 1300, 900)], ids=str)
def test_steps_replace_the_jacobi_on_x(tmp_path, shape):
    """Gaussian float64 squares (and a near-square one) on the eigen-solvers' routes: X fails the Jacobi's
    test, one step on X passes it, and no Jacobi kernel runs. Every output property; S within float64's
    bound of LAPACK's and of the Jacobi on X's (JSVD_START_X_STEPS=0); U and V as orthogonal (10 n eps at
    most); svdvals the same S, also without a Jacobi kernel."""
    b, m, n = shape
    A = _gaussian(b, m, n, m + n + b).cuda()
    sv = start_v([(m, n)] * b, torch.float64)[0]
    assert sv is not None and sv.get("x_steps") == 2
    assert jacobi_launches(lambda: torch_jsvd.svd(A, full_matrices=False), JACOBI) == 0
    U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
    _check_against_no_steps(tmp_path, A, U, S, Vh)
    S1 = torch_jsvd.svdvals(A)  # (its first call may calibrate the auto-tuner for svdvals' plan, which runs the levels)
    assert torch.equal(S1, S)
    assert jacobi_launches(lambda: torch_jsvd.svdvals(A), JACOBI) == 0


def test_without_steps_the_jacobi_runs(tmp_path):
    """The control: with JSVD_START_X_STEPS=0 the same float64 square runs the Jacobi on X (in a child)."""
    out = run_child("""
        import torch, torch_jsvd
        from jsvd_testutils import jacobi_launches, ANY_LEVEL
        A = torch.randn(1, 1024, 1024, dtype=torch.float64, generator=torch.Generator().manual_seed(0)).cuda()
        print(jacobi_launches(lambda: torch_jsvd.svd(A, full_matrices=False),
                              ANY_LEVEL + ("gemm_level_kernel", "pair_evd_kernel")))
    """, JSVD_START_X_STEPS="0")
    assert int(out.strip().splitlines()[-1]) > 0


@pytest.mark.parametrize("decades", [3, 6, 9], ids=str)
def test_ill_conditioned_spectra(tmp_path, decades):
    """Singular values log-spaced over 3, 6 and 9 decades (random singular vectors: the route's checks keep
    them): whether the steps pass or hand over to the Jacobi on X, the factors are valid, S agrees with
    LAPACK's to float64's bound relative to S_max and with the Jacobi on X's (JSVD_START_X_STEPS=0), and U,
    V are orthogonal to 10 n eps."""
    n = 512
    g = torch.Generator().manual_seed(decades)
    A = torch.stack([random_spectrum(n, n, decades, g) for _ in range(2)]).cuda()
    U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
    _check_against_no_steps(tmp_path, A, U, S, Vh)


@pytest.mark.parametrize("shape", [(1, 1024, 1024), (100, 512, 512)], ids=str)
def test_rank_deficient_member(shape):
    """A member with two equal columns: its X has a column of rounding noise, which the steps either leave
    to the Jacobi on X or make orthogonal to the others (a valid U column, its S_j at the noise level): the
    factors are valid either way and the zero singular value is found."""
    b, m, n = shape
    A = _gaussian(b, m, n, 7).cuda()
    A[-1, :, 1] = A[-1, :, 0]
    U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
    assert_valid_svd(A, U, S, Vh, False)
    assert S[-1, -1] <= 1e-12 * S[-1, 0]


@pytest.mark.parametrize("spectrum", ["two_clusters", "orthogonal", "spread_1e-10"], ids=str)
@pytest.mark.parametrize("shape", [(1, 600, 600), (1, 1100, 1024)], ids=str)
def test_clustered_spectra(tmp_path, shape, spectrum):
    """Equal and nearly equal singular values, where C_jj - C_ii is rounding and E_ij = C_ij / (C_jj - C_ii)
    rounding over rounding (up to the cap): two clusters (1 and 0.5), an orthogonal matrix, all within 1e-10
    of 1. The steps must keep W orthogonal (E exactly antisymmetric: the CPU engine's steps lost V's
    orthogonality on two clusters before it was made so), whether they pass or hand over to the Jacobi on X:
    valid factors, S against LAPACK's and the Jacobi on X's, U and V as orthogonal."""
    b, m, n = shape
    g = torch.Generator().manual_seed(m + n)
    Q1 = torch.linalg.qr(torch.randn(b, m, n, generator=g, dtype=torch.float64))[0]
    Q2 = torch.linalg.qr(torch.randn(b, n, n, generator=g, dtype=torch.float64))[0]
    s = torch.ones(b, n, dtype=torch.float64)
    if spectrum == "two_clusters":
        s[:, n // 2:] = 0.5
    elif spectrum == "spread_1e-10":
        s += 1e-10 * torch.rand(b, n, generator=g, dtype=torch.float64)
    A = ((Q1 * s.unsqueeze(1)) @ Q2.mT).cuda()
    assert start_v([(m, n)] * b, torch.float64)[0].get("x_steps") == 2
    U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
    _check_against_no_steps(tmp_path, A, U, S, Vh)
