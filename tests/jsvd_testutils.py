"""Checks shared by the tests: the accuracy bounds of issue 2 (10 * max(m, n) * eps), and parameters for
tests whose cases differ by device, and a child process for the engine's switches."""

import os
import subprocess
import sys
import textwrap

import pytest
import torch

import torch_jsvd


def eps_of(dtype):
    return torch.finfo(dtype).eps


def bound(m, n, dtype, factor=10.0):
    return factor * max(m, n, 1) * eps_of(dtype)


def rel_reconstruction_error(A, U, S, Vh):
    """||A - U diag(S) Vh||_F / ||A||_F per matrix, in float64 (so the check itself adds no error)."""
    k = S.shape[-1]
    A, U, S, Vh = (t.double() for t in (A, U, S, Vh))
    # scaled by max|a_ij| first (a power of two, exact), so that entries near float64's limits
    # neither overflow nor underflow in the norms
    amax = (A.abs().amax((-2, -1), keepdim=True) if A.numel()
            else torch.ones(A.shape[:-2] + (1, 1), dtype=A.dtype, device=A.device))
    scale = torch.where(amax > 0, torch.exp2(torch.floor(torch.log2(amax))), torch.ones_like(amax))
    A, S = A / scale, S / scale.squeeze(-1)
    R = (U[..., :k] * S.unsqueeze(-2)) @ Vh[..., :k, :]
    num = torch.linalg.matrix_norm(A - R)
    den = torch.linalg.matrix_norm(A).clamp_min(torch.finfo(torch.float64).tiny)
    return torch.where(torch.linalg.matrix_norm(A) > 0, num / den, num)


def orthogonality_error(Q, rows=False):
    """||Q^T Q - I||_F (columns) or ||Q Q^T - I||_F (rows), per matrix, in float64."""
    Q = Q.double()
    G = Q @ Q.mT if rows else Q.mT @ Q
    return torch.linalg.matrix_norm(G - torch.eye(G.shape[-1], dtype=G.dtype, device=G.device))


def assert_valid_svd(A, U, S, Vh, full_matrices, factor=10.0, check_strides=True):
    """Shapes, contiguity, order and sign of S, reconstruction and orthogonality."""
    *batch, m, n = A.shape
    k = min(m, n)
    assert U.shape == (*batch, m, m if full_matrices else k)
    assert S.shape == (*batch, k)
    assert Vh.shape == (*batch, n if full_matrices else k, n)
    for t in (U, S, Vh):
        assert t.dtype == A.dtype and t.device == A.device
    # torch.linalg.svd's strides on CUDA: U column-major, S and Vh row-major
    # (not for the pieces of a nested tensor, which has its own layout)
    if check_strides:
        assert U.mT.is_contiguous() and S.is_contiguous() and Vh.is_contiguous()
    assert torch.isfinite(S).all(), "S not finite"
    assert (S >= 0).all(), "S negative"
    assert (S[..., :-1] >= S[..., 1:]).all(), "S not descending"
    tol = bound(m, n, A.dtype, factor)
    rec, ou, ov = (rel_reconstruction_error(A, U, S, Vh).max().item(), orthogonality_error(U).max().item(),
                   orthogonality_error(Vh, rows=True).max().item())
    assert rec <= tol, f"reconstruction {rec:.3g} > {tol:.3g}"
    assert ou <= tol, f"U orthogonality {ou:.3g} > {tol:.3g}"
    assert ov <= tol, f"V orthogonality {ov:.3g} > {tol:.3g}"


def check_svd(A, full_matrices, factor=10.0):
    """torch_jsvd.svd of A: a valid SVD (assert_valid_svd) whose singular values are within
    bound(m, n) * S_max of float64 reference ones (reference_svdvals). Returns U, S, Vh."""
    U, S, Vh = torch_jsvd.svd(A, full_matrices=full_matrices)
    assert_valid_svd(A, U, S, Vh, full_matrices, factor)
    ref = reference_svdvals(A)
    err = (S.double() - ref).abs().amax(-1) / ref[..., :1].clamp_min(1e-300).squeeze(-1)
    assert err.max() <= bound(*A.shape[-2:], A.dtype), err.max()
    return U, S, Vh


def on_devices(argnames, cases, cuda_only=()):
    """Arguments for pytest.mark.parametrize over `device` and argnames, for a property tested on both
    devices whose cases differ by device: every case of `cases` on the CPU and CUDA, and those of
    `cuda_only` (large shapes that reach the CUDA engine's blocked levels, too slow for CI's CPU) on CUDA
    alone. A case is a value for one argname, else a tuple of values. The CUDA parameters carry the cuda
    mark, so they skip without a device (conftest.py), like the `device` fixture's."""
    names = [a.strip() for a in argnames.split(",")]

    def param(device, case):
        values = (case,) if len(names) == 1 else tuple(case)
        marks = [pytest.mark.cuda] if device == "cuda" else []
        return pytest.param(device, *values, marks=marks, id="-".join([device, *map(str, values)]))

    return (",".join(["device", *names]),
            [param("cpu", c) for c in cases] + [param("cuda", c) for c in (*cases, *cuda_only)])


def subnormal_factor(A, factor=10.0):
    """factor, raised by what rounding S to A's subnormal grid alone costs (the grid's spacing, tiny * eps,
    against ||A||_F, in units of max(m, n) eps): where S is subnormal the grid, not the engine, limits
    the accuracy. Unchanged for matrices of normal scale."""
    m, n = A.shape[-2:]
    fi = torch.finfo(A.dtype)
    X = A.double().cpu()
    amax = X.abs().max().item() if X.numel() else 0.0
    if amax == 0:
        return factor
    fro = amax * torch.linalg.matrix_norm(X / amax).min().item()  # (scaled: the squares underflow)
    return factor + min(m, n) ** 0.5 * fi.tiny * fi.eps / fro / (max(m, n) * fi.eps)


def reference_svdvals(A):
    """Singular values of A in float64, on A's device: LAPACK's on the CPU for CUDA float64 matrices of at
    least 64 rows and columns, cuSOLVER's (or the CPU's) otherwise. torch.linalg.svdvals of a CUDA float64
    matrix is not always accurate to float64's bounds: on 900x800 matrices of rank 100 it was off by up to
    3.4e-12 s_1 (H200, stop 71, 20 seeds; test_float64[rank100] failed on it at 2.04e-12 against 2.0e-12),
    where LAPACK and torch_jsvd agree to 1.6e-15 s_1. Float32's bounds leave cuSOLVER's float64 room."""
    if A.is_cuda and A.dtype == torch.float64 and min(A.shape[-2:]) >= 64:
        return torch.linalg.svdvals(A.detach().cpu()).to(A.device)
    return torch.linalg.svdvals(A.detach().double())


def random_rank(shape, rank, dtype=torch.float64, device="cpu"):
    *batch, m, n = shape
    return (torch.randn(*batch, m, rank, dtype=dtype, device=device)
            @ torch.randn(*batch, rank, n, dtype=dtype, device=device))


def random_spectrum(m, n, decades, generator=None):
    """An m x n float64 matrix (m >= n) with random singular vectors and singular values log-spaced from 1
    down to 10^-decades (ill-conditioned without graded columns or rows, which a start's checks would see)."""
    Q1, Q2 = (torch.linalg.qr(torch.randn(r, n, generator=generator, dtype=torch.float64))[0] for r in (m, n))
    return (Q1 * torch.logspace(0, -decades, n, dtype=torch.float64)) @ Q2.mT


# The solvers of syevBatched's route, as the plan names them: cuSOLVER's, or for its float32 Gram matrices of at
# most 128 columns from 32 matrices the engine's own (kernels/eigen/evd_small.h).
SYEV_BATCHED = "cusolverDnXsyevBatched"
OWN_EVD = "jsvd (tridiagonal reduction, bisection, inverse iteration)"
SYEV_ROUTE = (SYEV_BATCHED, OWN_EVD)


def start_v(shapes, dtype=torch.float32):
    """Each matrix's "start_v" entry of the CUDA plan (the Gram eigenvectors' start), None where it has none."""
    return [m.get("start_v") for m in torch_jsvd.plan(shapes, dtype=dtype, device="cuda")["matrices"]]


# The kernels of every Jacobi level: registers, shared memory (whole matrices and block pairs), the
# blocked level's sweeps, the Gram EVD.
ANY_LEVEL = ("svd_thread_kernel", "svd_warp_kernel", "svd_smem_kernel", "end_sweep_kernel", "gram_evd_kernel")


def jacobi_launches(fn, names=("svd_warp_kernel", "svd_smem_kernel")):
    """How many Jacobi kernels (by default the warp and shared-memory levels') one call of fn launched."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if any(n in e.name for n in names))


def run_child(code, timeout=600, **env):
    """Runs `code` in a fresh Python with the engine's switches in `env` (the engine reads them once per
    process), these helpers importable; asserts it succeeded and returns its stdout."""
    here = os.path.dirname(os.path.abspath(__file__))
    full_env = dict(os.environ, PYTHONPATH=os.pathsep.join([here, os.environ.get("PYTHONPATH", "")]), **env)
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env, capture_output=True, text=True,
                       timeout=timeout)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-4000:]
    return p.stdout


def svd_in_child(tmp_path, A, **env):
    """torch_jsvd.svd(A, full_matrices=False) in a child process with the engine's switches in `env` (A on its
    own device there too): [U, S, Vh] on A's device."""
    torch.save(A.cpu(), tmp_path / "child_in.pt")
    run_child(f"""
        import os, torch, torch_jsvd
        A = torch.load({str(tmp_path / "child_in.pt")!r}).to({str(A.device)!r})
        torch.save([t.cpu() for t in torch_jsvd.svd(A, full_matrices=False)], os.environ["OUT"])
    """, OUT=str(tmp_path / "child_out.pt"), **env)
    return [t.to(A.device) for t in torch.load(tmp_path / "child_out.pt")]


def check_against_child(tmp_path, A, U, S, Vh, **env):
    """svd(A, full_matrices=False)'s U, S, Vh against the same call in a child process with the engine's switches
    in `env` (svd_in_child): every output property, S within the bound of LAPACK's and of the child's, U and V
    at least as orthogonal as the child's (within 2x, or 10 n eps). Returns the child's [U, S, Vh]."""
    m, n = A.shape[-2:]
    assert_valid_svd(A, U, S, Vh, False)
    ref = reference_svdvals(A)
    assert ((S.double() - ref).abs().amax(-1) / ref[..., 0]).max() <= bound(m, n, A.dtype)
    U0, S0, Vh0 = svd_in_child(tmp_path, A, **env)
    torch.testing.assert_close(S, S0, rtol=0, atol=bound(m, n, A.dtype) * S0[..., :1].max().item())
    eps = torch.finfo(A.dtype).eps
    orth = lambda Q: orthogonality_error(Q).max().item()
    assert orth(U) <= max(2 * orth(U0), 10 * n * eps) and orth(Vh.mT) <= max(2 * orth(Vh0.mT), 10 * n * eps)
    return U0, S0, Vh0
