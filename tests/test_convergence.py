"""Convergence: svd_ex's info counts the sweeps (or reports -1 where max_sweeps ran out), svd and svdvals
raise where svd_ex reports, both stop at the same sweep with the same bits, and tol trades sweeps for
accuracy. On both devices; the CUDA cases add shapes for its levels (shared memory, warp, blocked). The CPU
engine's stop by xGESVJ's bound against the sweep that rotates nothing."""

import pytest
import torch

import torch_jsvd
from jsvd_testutils import assert_valid_svd, bound, on_devices, orthogonality_error, run_child

DTYPES = [torch.float32, torch.float64]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 2, 20, 12), (4, 64, 64), (4, 24, 24)], ids=str)
def test_info_counts_the_sweeps(device, dtype, shape):
    # int32, one per matrix of the batch, on A's device; a random matrix takes more than one sweep.
    A = torch.randn(shape, dtype=dtype, device=device)
    info = torch_jsvd.svd_ex(A).info
    assert info.shape == shape[:-2] and info.dtype == torch.int32 and info.device == A.device
    assert (info > 1).all() and (info <= torch_jsvd._ops.DEFAULT_MAX_SWEEPS).all()


# (CUDA: shared-memory and warp levels, and the blocked level at 512 x 512)
@pytest.mark.parametrize(*on_devices("shape,dtype", [((2, 48, 48), torch.float64), ((5, 64, 64), torch.float32),
                                                     ((4, 24, 24), torch.float32)],
                                     cuda_only=[((2, 512, 512), torch.float32)]))
def test_too_few_sweeps_reported_by_svd_ex_and_raised_by_svd(device, shape, dtype):
    # One sweep cannot diagonalise a random matrix: the last iterate comes back with info = -1. (5 matrices of
    # 64 columns: on the CPU up to 4 take the Gram eigenvectors' start, whose X one sweep may finish.)
    A = torch.randn(shape, dtype=dtype, device=device)
    U, S, Vh, info = torch_jsvd.svd_ex(A, max_sweeps=1)
    assert (info == torch_jsvd.INFO_NOT_CONVERGED).all()
    assert torch.isfinite(S).all()
    with pytest.raises(torch.linalg.LinAlgError, match="max_sweeps"):
        torch_jsvd.svd(A, max_sweeps=1)
    with pytest.raises(torch.linalg.LinAlgError, match="max_sweeps"):
        torch_jsvd.svdvals(A, max_sweeps=1)
    # Enough sweeps: converged.
    assert (torch_jsvd.svd_ex(A, max_sweeps=60).info >= 0).all()


# A list, and (CUDA) the blocked levels: pair SVD, Gram EVD, the QR-preconditioned Jacobi (6 x 2048 x 40:
# more matrices than the few tall ones that take the CUDA engine's Gram eigenvectors' start, and too little
# work for a batch's, which svd would take and svd_ex does not; the CPU engine takes it for float32 from 200
# rows, so there 6 x 190 x 40).
@pytest.mark.parametrize(*on_devices("shape", [(6, 190, 40), "list"],
                                     cuda_only=[(6, 2048, 40), (6, 200, 200), (4, 300, 300)]))
def test_svd_stops_where_svd_ex_converges(device, shape):
    """svd stops sweeping once no matrix rotates (CUDA: it reads each sweep's count
    on the host, pipelined a sweep behind); svd_ex queues max_sweeps sweeps, which
    converged matrices sit out. So both must give the same bits and sweeps,
    while a max_sweeps short of convergence is reported by both."""
    if shape == "list":
        As = [torch.randn(m, n, device=device) for m, n in [(300, 40), (64, 200), (257, 257), (16, 16)]]
        # (svd_varlen has no _ex to compare with: its results are checked.)
        for A, U, S, Vh in zip(As, *torch_jsvd.svd_varlen(As, full_matrices=False)):
            assert_valid_svd(A, U, S, Vh, False, 10.0)
        return
    A = torch.randn(*shape, device=device)
    # Graded columns spread the sweeps the matrices take.
    A[0] *= torch.logspace(0, 6, shape[-1], device=device)
    U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
    U1, S1, Vh1, info = torch_jsvd.svd_ex(A, full_matrices=False)
    assert (info > 0).all()
    assert torch.equal(S, S1)
    # Same bits for every singular pair the Jacobi sweeps found. (Graded by 1e6, float32 matrix 0 is
    # numerically rank-deficient: svd completes its last vectors from its rank by a QR, svd_ex, which
    # never reads the rank, greedily; both must still be valid.)
    for k in range(A.shape[0]):
        found = S[k] > S[k, 0] * 1e-3
        assert torch.equal(U[k][:, found], U1[k][:, found]) and torch.equal(Vh[k][found], Vh1[k][found])
    for X in ((U, S, Vh), (U1, S1, Vh1)):
        for k in range(A.shape[0]):
            assert_valid_svd(A[k], X[0][k], X[1][k], X[2][k], False, 10.0)
    short = int(info.max()) - 1
    _, _, _, info_short = torch_jsvd.svd_ex(A, full_matrices=False, max_sweeps=short)
    assert (info_short == torch_jsvd.INFO_NOT_CONVERGED).any()
    with pytest.raises(RuntimeError):
        torch_jsvd.svd(A, full_matrices=False, max_sweeps=short)


@pytest.mark.parametrize("shape,tol", [((30, 30), 1e-3), ((8, 96, 96), 1e-4)], ids=str)
def test_looser_tol_takes_fewer_sweeps(device, shape, tol):
    A = torch.randn(shape, dtype=torch.float64, device=device)
    loose = torch_jsvd.svd_ex(A, tol=tol)
    tight = torch_jsvd.svd_ex(A)
    assert (loose.info >= 0).all() and (loose.info <= tight.info).all() and (loose.info < tight.info).any()
    assert_valid_svd(A, *tight[:3], True)


@pytest.mark.parametrize("dtype,shape,compute_uv", [(torch.float64, (1, 512, 512), True),
                                                    (torch.float64, (40, 100, 64), True),
                                                    (torch.float32, (100, 64, 64), False)], ids=str)
def test_cpu_stop_by_bound(tmp_path, dtype, shape, compute_uv):
    """The CPU engine stops after a sweep whose largest cosine and sine bound every pair below tol
    (converged_by_bound, LAPACK xGESVJ's test; float64, and svdvals, from 64 columns) instead of running
    the sweep that rotates nothing: against JSVD_CPU_STOP_BOUND=0 (a child process), no more sweeps (fewer
    on some matrices), S within two ulps, U and V as orthogonal, on Gaussian and column-graded (8 decades)
    members."""
    g = torch.Generator().manual_seed(sum(shape))
    A = torch.randn(*shape, generator=g, dtype=torch.float64)
    if shape[0] > 1:
        A[0] *= torch.logspace(0, -8, shape[-1], dtype=torch.float64)
    A = A.to(dtype)
    torch.save(A, tmp_path / "A.pt")
    run_child(f"""
        import os, torch, torch_jsvd
        A = torch.load({str(tmp_path / "A.pt")!r})
        torch.save(list(torch_jsvd.svd_ex(A, full_matrices=False, compute_uv={compute_uv})), os.environ["OUT"])
    """, JSVD_CPU_STOP_BOUND="0", OUT=str(tmp_path / "off.pt"))
    U0, S0, Vh0, info0 = torch.load(tmp_path / "off.pt")
    U, S, Vh, info = torch_jsvd.svd_ex(A, full_matrices=False, compute_uv=compute_uv)
    assert (info >= 1).all() and (info <= info0).all() and (info < info0).any()
    assert ((S - S0).abs() <= 2 * torch.finfo(dtype).eps * S0).all()
    if compute_uv:
        assert_valid_svd(A, U, S, Vh, False)
        for Q, Q0 in ((U, U0), (Vh.mT, Vh0.mT)):
            assert orthogonality_error(Q).max() <= 2 * orthogonality_error(Q0).max()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA")
@pytest.mark.parametrize("level,shape,compute_uv", [("gemm", (1, 1024, 1024), True), ("gemm", (2, 700, 300), False),
                                                    ("gram", (3, 300, 256), True), ("pair", (2, 400, 200), True),
                                                    ("pair", (1, 768, 768), True)], ids=str)
def test_cuda_stop_by_bound(tmp_path, level, shape, compute_uv):
    """The CUDA engine's blocked levels (forced by JSVD_LEVEL) stop float64 matrices by xGESVJ's bound
    too: block pairs, the Gram EVD and GEMM levels (there the sine is the most J moves a cosine,
    gram_evd.cuh), in end_sweep_kernel. Against JSVD_GPU_STOP_BOUND=0, no more sweeps (fewer on some
    matrices), S within two ulps, U and V as orthogonal. Gaussian members; where `shape` has several, the
    first column-graded over 8 decades, and one member of half rank appended, whose zero singular values
    (rounding noise on both sides) are held to the accuracy bound instead. svd_ex: no Gram-eigenvector
    start."""
    g = torch.Generator().manual_seed(sum(shape))
    A = torch.randn(*shape, generator=g, dtype=torch.float64)
    b, m, n = shape
    if b > 1:
        A[0] *= torch.logspace(0, -8, n, dtype=torch.float64)
        half = torch.randn(m, n // 2, generator=g, dtype=torch.float64) @ torch.randn(n // 2, n, generator=g,
                                                                                     dtype=torch.float64)
        A, b = torch.cat([A, half[None]]), b + 1
    torch.save(A, tmp_path / "A.pt")
    code = f"""
        import os, torch, torch_jsvd
        A = torch.load({str(tmp_path / "A.pt")!r}).cuda()
        out = torch_jsvd.svd_ex(A, full_matrices=False, compute_uv={compute_uv})
        torch.save([t.cpu() for t in out], os.environ["OUT"])
    """
    for on in ("0", "1"):
        run_child(code, timeout=300, JSVD_LEVEL=level, JSVD_GPU_STOP_BOUND=on, OUT=str(tmp_path / f"{on}.pt"))
    U0, S0, Vh0, info0 = torch.load(tmp_path / "0.pt")
    U, S, Vh, info = torch.load(tmp_path / "1.pt")
    assert (info >= 1).all() and (info <= info0).all() and (info < info0).any(), (info, info0)
    full = slice(0, b - 1) if b > 1 else slice(0, b)  # (the members of full rank)
    assert ((S[full] - S0[full]).abs() <= 2 * torch.finfo(A.dtype).eps * S0[full]).all()
    if b > 1:
        assert ((S[-1] - S0[-1]).abs() <= bound(m, n, A.dtype) * S0[-1, 0]).all()
        assert (S[-1, n // 2:] <= bound(m, n, A.dtype) * S[-1, 0]).all()  # (its rank)
    if compute_uv:
        assert_valid_svd(A, U, S, Vh, False)
        for Q, Q0 in ((U, U0), (Vh.mT, Vh0.mT)):
            assert orthogonality_error(Q).max() <= 2 * orthogonality_error(Q0).max()
