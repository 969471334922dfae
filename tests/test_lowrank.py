"""Randomized (svd_lowrank), adaptive-rank and truncated SVD of batches."""

import pytest
import torch

import torch_jsvd
from jsvd_testutils import bound, orthogonality_error, random_rank, reference_svdvals


def _rel_err(A, U, S, V, M=None):
    X = A if M is None else A - M
    return (torch.linalg.matrix_norm(X - (U * S.unsqueeze(-2)) @ V.mT) / torch.linalg.matrix_norm(X)).max().item()


@pytest.mark.parametrize("shape", [(5, 60, 40), (3, 40, 60), (2, 2, 30, 20), (1, 100, 100), (70, 50)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_contract_like_torch(device, shape, dtype):
    # Shapes as torch.svd_lowrank's; an exactly rank-r input (r <= q) is recovered to rounding; on a
    # random input the error is within 5% of torch's for the same q and niter (same seed for both).
    *batch, m, n = shape
    q, r = 10, 6
    A = random_rank(shape, r, dtype, device)
    U, S, V = torch_jsvd.svd_lowrank(A, q=q, niter=2)
    assert U.shape == (*batch, m, q) and S.shape == (*batch, q) and V.shape == (*batch, n, q)
    assert U.dtype == S.dtype == V.dtype == dtype
    assert _rel_err(A, U, S, V) <= 100 * bound(m, n, dtype)
    assert orthogonality_error(U).max() <= bound(m, n, dtype) and orthogonality_error(V).max() <= bound(m, n, dtype)
    assert (S[..., :-1] >= S[..., 1:]).all() and (S >= 0).all()
    ref = reference_svdvals(A)[..., :r]
    torch.testing.assert_close(S[..., :r].double(), ref, rtol=100 * bound(m, n, dtype), atol=0)
    G = torch.randn(shape, dtype=dtype, device=device)
    torch.manual_seed(3)
    ours = _rel_err(G, *torch_jsvd.svd_lowrank(G, q=q, niter=2))
    torch.manual_seed(3)
    theirs = _rel_err(G, *torch.svd_lowrank(G, q=q, niter=2))
    assert ours <= 1.05 * theirs, (ours, theirs)


def _ill_conditioned(b, m, q, cond, dtype, device):
    # X diag(d) W: singular values graded from 1 to 1/cond, mixed by a random orthogonal W (graded
    # columns alone would be easy: Cholesky does not mind column scaling).
    d = torch.logspace(0, -torch.log10(torch.tensor(cond)).item(), q, dtype=torch.float64)
    W = torch.linalg.qr(torch.randn(b, q, q, dtype=torch.float64)).Q
    return ((torch.randn(b, m, q, dtype=torch.float64) * d) @ W).to(dtype=dtype, device=device)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("kind", ["gaussian", "ill_conditioned"])
def test_cholesky_qr(device, dtype, kind):
    # The range finder's QR: shifted CholeskyQR3 holds orthogonality to working precision well past
    # plain CholeskyQR2's limit of about 1/sqrt(eps) (cond 1e4 in float32, where CholeskyQR2 failed 7 of
    # 20 such 300 x 24 matrices; 1e12 in float64, where it failed all), reports no failure, and Y = Q R.
    from torch_jsvd import _lowrank
    cond = 1.0 if kind == "gaussian" else (1e4 if dtype == torch.float32 else 1e12)
    Y = _ill_conditioned(7, 300, 24, cond, dtype, device)
    Q, R, err = _lowrank._cholqr3(Y, want_r=True)
    assert (err <= 1).all()
    assert orthogonality_error(Q).max() <= bound(300, 24, dtype)
    assert (torch.linalg.matrix_norm(Y - Q @ R) / torch.linalg.matrix_norm(Y)).max() <= bound(300, 24, dtype)
    assert (R.tril(-1) == 0).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("count", [2, 6])  # (fewer than 4 failed matrices: Householder; more: the Jacobi's U)
def test_rank_deficient_sketches_are_redone(device, dtype, count, monkeypatch):
    # A zero matrix fails the CholeskyQR (so do exactly low-rank ones in float32; in float64 their Q
    # passes the orthogonality check, and any orthonormal Q with Y = Q R serves) and is computed again
    # with Householder bases; full-rank matrices beside it keep the fast result. All come out
    # orthonormal, exact where the rank is below q, and agree with an all-Householder run.
    from torch_jsvd import _lowrank
    A = torch.randn(count + 2, 60, 40, dtype=dtype, device=device)
    A[:count - 1] = random_rank((count - 1, 60, 40), 5, dtype, device)
    A[count - 1] = 0
    _, _, err = _lowrank._cholqr3(A @ torch.randn(40, 10, dtype=dtype, device=device))
    bad = ~(err <= 1)
    assert bad[count - 1] and not bad[count:].any()
    assert bad[:count].all() or dtype == torch.float64
    torch.manual_seed(5)
    U, S, V = torch_jsvd.svd_lowrank(A, q=10, niter=1)
    tol = bound(60, 40, dtype)
    assert orthogonality_error(U).max() <= tol and orthogonality_error(V).max() <= tol
    assert _rel_err(A[:count - 1], U[:count - 1], S[:count - 1], V[:count - 1]) <= 100 * tol
    assert (S[count - 1] == 0).all()
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)  # the Householder path for all
    torch.manual_seed(5)
    ref = torch_jsvd.svd_lowrank(A, q=10, niter=1)[1]
    torch.testing.assert_close(S[:count - 1, :5], ref[:count - 1, :5], rtol=100 * tol, atol=0)
    torch.testing.assert_close(S[count:], ref[count:], rtol=100 * tol, atol=0)


def test_numpy_integers_accepted():
    import numpy as np
    A = torch.randn(2, 20, 10, dtype=torch.float64)
    U, S, V = torch_jsvd.svd_lowrank(A, q=np.int64(4), niter=np.int32(1))
    assert U.shape == (2, 20, 4)
    assert torch_jsvd.svd_truncated(A, np.int64(3))[1].shape == (2, 3)


def test_centering_M(device):
    A = torch.randn(4, 50, 30, dtype=torch.float64, device=device)
    M = A.mean(-2, keepdim=True)  # broadcast, as torch.pca_lowrank passes it
    U, S, V = torch_jsvd.svd_lowrank(A, q=30, niter=1, M=M)
    assert _rel_err(A, U, S, V, M.expand_as(A)) <= 1e-12


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_centering_M_with_low_rank_redo(device, dtype):
    # A − M of rank 6 < q: in float32 the CholeskyQR fails and the redo takes M's rows of the failed
    # matrices (M broadcast over the batch, indexed without expanding it).
    A = random_rank((4, 50, 30), 5, dtype, device)
    M = A.mean(-2, keepdim=True)
    U, S, V = torch_jsvd.svd_lowrank(A, q=10, niter=1, M=M)
    assert _rel_err(A, U, S, V, M.expand_as(A)) <= 100 * bound(50, 30, dtype)
    assert orthogonality_error(U).max() <= bound(50, 30, dtype)


def test_gradients(device):
    A = torch.randn(2, 12, 8, dtype=torch.float64, device=device)

    def f(X):
        torch.manual_seed(0)
        U, S, V = torch_jsvd.svd_lowrank(X, q=8, niter=1)  # q = n: exact, distinct values
        return S, (U * S.unsqueeze(-2)) @ V.mT

    assert torch.autograd.gradcheck(f, (A.requires_grad_(),))


def test_compiles(device):
    A = torch.randn(3, 40, 20, device=device)
    torch.manual_seed(1)
    eager = torch_jsvd.svd_lowrank(A, q=5)
    torch.manual_seed(1)
    compiled = torch.compile(torch_jsvd.svd_lowrank, fullgraph=True)(A, q=5)
    for e, c in zip(eager, compiled):
        assert e.shape == c.shape
    assert _rel_err(A, *compiled) <= 1.05 * _rel_err(A, *eager) + 1e-6


@pytest.mark.parametrize("kwargs, match", [
    (dict(q=21), "q to be an integer in"), (dict(q=0), "q to be an integer in"), (dict(q=2.5), "q to be"),
    (dict(niter=-1), "niter"), (dict(M=torch.zeros(3, 7)), "does not broadcast"),
])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        torch_jsvd.svd_lowrank(torch.randn(2, 30, 20), **kwargs)
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        torch_jsvd.svd_lowrank(torch.randn(5))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_adaptive_ranks_meet_tol(device, dtype):
    # Matrices of ranks 3, 10, 25 plus small noise: each rank found is the smallest whose error is within
    # tol (checked against the exact SVD's optimal error for that rank: the randomized one can only be larger).
    torch.manual_seed(0)
    A = torch.stack([random_rank((80, 60), r, dtype, device) for r in (3, 10, 25)])
    A = A / torch.linalg.matrix_norm(A)[:, None, None] + 1e-5 * torch.randn_like(A)
    tol = 1e-3
    res = torch_jsvd.svd_lowrank_adaptive(A, tol=tol, q0=4)
    assert res.ranks.shape == (3,) and res.ranks.tolist() == [3, 10, 25]
    for a, u, s, v, k in zip(A, res.U, res.S, res.V, res.ranks.tolist()):
        assert u.shape == (80, k) and s.shape == (k,) and v.shape == (60, k)
        assert _rel_err(a, u, s, v) <= tol
        # rank k - 1 cannot meet tol: even the optimal (exact SVD) truncation misses it
        sv = torch.linalg.svdvals(a.double())
        assert (sv[k - 1:].square().sum() / sv.square().sum()).sqrt() > tol


def test_adaptive_zero_and_full_rank(device):
    A = torch.zeros(2, 10, 8, dtype=torch.float64, device=device)
    A[1] = torch.randn(10, 8, dtype=torch.float64, device=device)
    res = torch_jsvd.svd_lowrank_adaptive(A, tol=1e-10, q0=2)
    assert res.ranks.tolist() == [0, 8]
    assert _rel_err(A[1], res.U[1], res.S[1], res.V[1]) <= 1e-10
    capped = torch_jsvd.svd_lowrank_adaptive(A, tol=1e-10, max_rank=5)
    assert capped.ranks.tolist() == [0, 5]  # (above tol: max_rank reached)


@pytest.mark.parametrize("kwargs, match", [(dict(tol=0.0), "tol > 0"), (dict(tol=-1.0), "tol > 0"),
                                           (dict(tol=0.1, max_rank=9), "max_rank"), (dict(tol=0.1, q0=0), "q0")])
def test_adaptive_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        torch_jsvd.svd_lowrank_adaptive(torch.randn(2, 10, 8), **kwargs)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_truncated_is_the_exact_leading_part(device, dtype):
    A = torch.randn(4, 30, 20, dtype=dtype, device=device)
    U, S, Vh = torch_jsvd.svd_truncated(A, 5)
    Uf, Sf, Vhf = torch_jsvd.svd(A, full_matrices=False)
    assert U.shape == (4, 30, 5) and S.shape == (4, 5) and Vh.shape == (4, 5, 20)
    torch.testing.assert_close(S, Sf[..., :5], rtol=0, atol=0)
    torch.testing.assert_close(U, Uf[..., :5], rtol=0, atol=0)
    ref = reference_svdvals(A)[..., :5]
    assert (S.double() - ref).abs().max() <= bound(30, 20, dtype) * ref.max()
    with pytest.raises(ValueError, match="rank to be an integer"):
        torch_jsvd.svd_truncated(A, -1)
    with pytest.raises(ValueError, match="rank to be an integer"):
        torch_jsvd.svd_truncated(A, 21)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_replayed_graph_is_the_eager_computation(dtype, monkeypatch):
    # _lowrank_graphs: the second call of a key captures the sketch, later ones replay it. Each call's
    # result equals the eager one from the same seed, a new A is copied in (not the captured one reused),
    # rank-deficient matrices are still redone, and JSVD_LOWRANK_GRAPHS=0 runs eagerly.
    from torch_jsvd import _lowrank_graphs
    _lowrank_graphs.clear()
    A = torch.randn(5, 300, 200, dtype=dtype, device="cuda")
    A[1] = random_rank((300, 200), 6, dtype, "cuda")
    A[2] = 0

    def call(X):
        torch.manual_seed(7)
        return torch_jsvd.svd_lowrank(X, q=12, niter=2)

    monkeypatch.setenv("JSVD_LOWRANK_GRAPHS", "0")
    eager = call(A)
    eager2 = call(2 * A)
    monkeypatch.setenv("JSVD_LOWRANK_GRAPHS", "1")
    runs = [call(A), call(A), call(A), call(2 * A)]  # eager, capture + replay, replay, replay
    assert len(_lowrank_graphs._graphs) == 1
    tol = bound(300, 200, dtype)
    full = [0, 2, 3, 4]  # (matrix 1's vectors beyond its rank span rounding noise: its S only)
    for got, ref in zip(runs, [eager, eager, eager, eager2]):
        for g, r in zip(got, ref):
            g, r = (g, r) if g.dim() == 2 else (g[full], r[full])
            torch.testing.assert_close(g, r, rtol=10 * tol, atol=10 * tol * A.abs().max().item())
    U, S, V = runs[2]
    assert (S[2] == 0).all() and orthogonality_error(U).max() <= tol and orthogonality_error(V).max() <= tol
    assert _rel_err(A[1:2], U[1:2], S[1:2], V[1:2]) <= 100 * tol
    _lowrank_graphs.clear()
    monkeypatch.setattr(_lowrank_graphs, "_MAX_A_BYTES", A.numel() * A.element_size() - 1)  # A too large: eager
    call(A), call(A)
    assert not _lowrank_graphs._graphs
