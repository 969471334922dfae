"""Randomized, adaptive-rank and truncated SVD of batches (issue 22).

svd_lowrank follows torch.svd_lowrank's contract (Halko, Martinsson, Tropp 2011, Algorithms 4.4 and 5.1,
as torch/_lowrank.py) but runs every step batched: the sketch and the power iterations are batched GEMMs,
each orthonormal basis of the range a batched shifted CholeskyQR3 (checked per matrix, _cholqr3), and the
small SVDs of the whole batch one Jacobi engine call (where torch's loops over the batch's small SVDs on the
GPU). svd_lowrank_adaptive finds each
matrix's rank for a tolerance (the adaptive approximation of the batched H-matrix compression paper,
../shared/papers/batched-qr-svd-hmatrix-compression.txt): the error of a rank-k truncation of Q B is known
exactly, ‖A − Q B_k‖²_F = ‖A − Q B‖²_F + Σ_{j>k} s_j(B)² (the first term from one batched GEMM), so the rank is the smallest that meets the
tolerance, and matrices whose sketch was too small are sketched again, wider, as one smaller batch.
svd_truncated returns the leading triplets of the exact (Jacobi) SVD.
"""

import functools
import numbers
from typing import List, NamedTuple, Optional, Tuple

import torch
from torch import Tensor

from . import _lowrank_graphs
from ._ops import svd, svd_ex
from ._plan import plan


def _check_matrix(name: str, A: Tensor, fn: str) -> None:
    if not isinstance(A, Tensor):
        raise TypeError(f"torch_jsvd.{fn}: expected {name} to be a Tensor, but got {type(A).__name__}")
    if A.dim() < 2:
        raise ValueError(f"torch_jsvd.{fn}: expected {name} to have at least 2 dimensions (..., m, n), "
                         f"but got a {A.dim()}-D tensor")
    if not A.is_floating_point():
        raise TypeError(f"torch_jsvd.{fn}: expected {name} to be a floating point tensor, but got {A.dtype}")


def _int_in(value, lo: int, hi: Optional[int]) -> bool:
    """Whether value is an integer (not a bool; numpy integers too) in [lo, hi] (hi None: no bound)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        return False
    return lo <= value and (hi is None or value <= hi)


def _cholqr(Y: Tensor, shift: bool) -> Tuple[Tensor, Tensor, Tensor]:
    """One CholeskyQR step, Y = Q R with RᴴR = YᴴY (+ s I), batched: Q, R and the Cholesky's info."""
    G = Y.mH @ Y
    if shift:
        # s = 11 (m q + q (q + 1)) u ‖Y‖²₂ (Fukaya et al., SIAM J. Sci. Comput. 42 (2020), eq. (4.1)), with
        # ‖Y‖_F for ‖Y‖₂: YᴴY + s I is then positive definite in floating point.
        m, q = Y.shape[-2:]
        u = torch.finfo(Y.dtype).eps / 2
        d = G.diagonal(dim1=-2, dim2=-1)
        d.add_((11 * (m * q + q * (q + 1)) * u) * d.real.sum(-1, keepdim=True).detach())
    L, info = torch.linalg.cholesky_ex(G)
    R = L.mH
    return torch.linalg.solve_triangular(R, Y, upper=True, left=False), R, info


def _cholqr3(Y: Tensor, want_r: bool = False) -> Tuple[Tensor, Optional[Tensor], Tensor]:
    """Y = Q R for tall Y (..., m, q): Q with orthonormal columns, R upper triangular (want_r), and the
    check's measure (batch shape), with no synchronisation: ‖QᴴQ − I‖_F / (10 q eps), made inf where a
    Cholesky failed; > 1 (or NaN) is a failure.

    Shifted CholeskyQR3 (Fukaya, Kannan, Nakatsukasa, Yamamoto, Yanagisawa 2020): a CholeskyQR of Y with
    a shift, then CholeskyQR2, which makes Q orthonormal to working precision for cond(Y) up to about
    1e12 in float64 and 1e4 in float32 (measured on 300 x 24 and 3072 x 64 matrices; CholeskyQR2 alone:
    1e8, 3e3): batched GEMMs, q x q Choleskys and triangular solves, where torch.linalg.qr runs cuSOLVER's
    Householder QR a matrix at a time (1000 x 256 x 16 float32, H100: 46 ms against 0.4; docs/
    experiments.md, stop 35). A matrix fails where a Cholesky did or ‖QᴴQ − I‖_F > 10 q eps (Y
    numerically rank-deficient, as for an exactly low-rank A, or not finite).
    """
    Q, R1, i1 = _cholqr(Y, shift=True)
    Q, R2, i2 = _cholqr(Q, shift=False)
    Q, R3, i3 = _cholqr(Q, shift=False)
    q = Y.shape[-1]
    with torch.no_grad():
        E = Q.mH @ Q
        E.diagonal(dim1=-2, dim2=-1).sub_(1)
        err = torch.linalg.matrix_norm(E).real.div_(10 * q * torch.finfo(Y.dtype).eps)
    return Q, (R3 @ R2 @ R1 if want_r else None), err.masked_fill_((i1 | i2 | i3) != 0, float("inf"))


def _orth_householder(Y: Tensor) -> Tensor:
    """Q of a QR of each Y (N, m, q) that never fails: Householder (torch.linalg.qr) for fewer than 4
    matrices or under autograd (its derivative), the Jacobi SVD's U for many (1000 x 256 x 16 float32,
    H100: 0.5 ms against 46; docs/experiments.md, stop 35)."""
    if Y.shape[0] < 4 or (torch.is_grad_enabled() and Y.requires_grad):
        return torch.linalg.qr(Y).Q
    return svd(Y, full_matrices=False)[0]


def _sketch(A: Tensor, M: Optional[Tensor], R: Tensor, niter: int, fast: bool) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """Algorithms 4.4 and 5.1 of Halko, Martinsson, Tropp on tall A − M from the sketch matrix R: U, S, V
    and which matrices failed (fast: the bases by _cholqr3, whose checks say so; else by
    _orth_householder and the engine's SVD of B, which never fail)."""
    def mul(X):  # (A − M) X
        return A @ X if M is None else A @ X - M @ X

    def mul_h(X):  # (A − M)ᴴ X
        return A.mH @ X if M is None else A.mH @ X - M.mH @ X

    errs = []  # each basis's check (_cholqr3), compared once at the end: fewer small launches

    def orth(Y):
        if not fast:
            return _orth_householder(Y)
        Q, _, err = _cholqr3(Y)
        errs.append(err)
        return Q

    Q = orth(mul(R))
    for _ in range(niter):
        Q = orth(mul_h(Q))
        Q = orth(mul(Q))
    B = Q.mH @ A if M is None else Q.mH @ A - Q.mH @ M
    if not fast:
        Ub, S, Vh = svd(B, full_matrices=False)
        return Q @ Ub, S, Vh.mH, torch.zeros(A.shape[:-2], dtype=torch.bool, device=A.device)
    # The SVD of the q x n B through Bᴴ = Q_b R_b: B = R_bᴴ Q_bᴴ, so the Jacobi runs on the q x q R_bᴴ
    # (one batched launch of small matrices, where B itself would take the QR path a matrix at a time).
    Qb, Rb, err = _cholqr3(B.mH, want_r=True)
    errs.append(err)
    bad = ~(torch.stack(errs).amax(0) <= 1)  # (NaN: bad)
    eye = torch.eye(Rb.shape[-1], dtype=Rb.dtype, device=Rb.device)
    X = torch.where(bad[..., None, None], eye, Rb.mH)  # (failed: redone)
    if _one_launch(X.shape[-1], X.dtype, X.device):  # svd_ex: no synchronisation, info < 0 redone too
        Ur, S, Vrh, info = svd_ex(X, full_matrices=False)
        bad = bad | (info < 0)
    else:
        Ur, S, Vrh = svd(X, full_matrices=False)
    return Q @ Ur, S, Qb @ Vrh.mH, bad


@functools.lru_cache(maxsize=None)
def _one_launch(q: int, dtype: torch.dtype, device: torch.device) -> bool:
    """Whether the engine solves q x q matrices whole, in one launch that runs until they converge (on
    CUDA: a register or shared-memory level); the blocked levels' svd_ex would queue every sweep."""
    if device.type != "cuda":
        return True
    first = plan([(q, q)], dtype=dtype, device=device)["matrices"][0]["levels"][0]["kernel"]
    return first in ("whole_svd_warp", "whole_svd_smem")


def svd_lowrank(A: Tensor, q: Optional[int] = 6, niter: int = 2, M: Optional[Tensor] = None) -> Tuple[Tensor, Tensor, Tensor]:
    """Randomized SVD of a batch, like torch.svd_lowrank(A, q, niter, M): U (*, m, q), S (*, q), V (*, n, q)
    with A − M ≈ U diag(S) Vᴴ (M broadcast to A's shape).

    The same algorithm as torch's (a Gaussian sketch, niter power iterations with an orthonormal basis
    of every product, then the SVD of the q x n matrix B = Qᴴ(A − M)), batched and without a
    synchronisation until the end: each basis by a shifted CholeskyQR3 instead of a QR a matrix, B's
    SVD by a CholeskyQR of Bᴴ and one Jacobi call on the q x q factors of the whole batch. Matrices whose
    CholeskyQR failed (an exactly low-rank A) are computed again, from the same sketch, with Householder
    bases and the engine's SVD of B. q must be at most min(m, n). Differentiable where torch's is
    (through the Choleskys, triangular solves and torch_jsvd.svd: distinct singular values). Random:
    torch.manual_seed makes it repeatable.
    """
    _check_matrix("A", A, "svd_lowrank")
    m, n = A.shape[-2:]
    q = 6 if q is None else q
    if not _int_in(q, 1, min(m, n)):
        raise ValueError(f"torch_jsvd.svd_lowrank: expected q to be an integer in [1, min(m, n)] = [1, {min(m, n)}], "
                         f"but got {q!r}")
    if not _int_in(niter, 0, None):
        raise ValueError(f"torch_jsvd.svd_lowrank: expected niter to be a non-negative integer, but got {niter!r}")
    q, niter = int(q), int(niter)
    if M is not None:
        _check_matrix("M", M, "svd_lowrank")
        try:
            M = M.broadcast_to(A.shape)
        except RuntimeError:
            raise ValueError(f"torch_jsvd.svd_lowrank: M of shape {tuple(M.shape)} does not broadcast to A's "
                             f"shape {tuple(A.shape)}") from None
    wide = m < n
    if wide:  # (the sketch works on the tall orientation, as torch's)
        A = A.mH
        M = None if M is None else M.mH
    R = torch.randn(A.shape[-1], q, dtype=A.dtype, device=A.device)
    # Under torch.compile the fallback's data-dependent branch cannot be traced, nor taken under vmap:
    # Householder throughout.
    fast = not (torch.compiler.is_compiling() or torch._C._are_functorch_transforms_active())
    out = None
    if fast and _lowrank_graphs.eligible(A, M) and _one_launch(q, A.dtype, A.device):
        out = _lowrank_graphs.replay(_sketch, A, R, niter)  # (None: eager this time)
    U, S, V, bad = out if out is not None else _sketch(A, M, R, niter, fast)
    if fast and bad.any():
        if bad.dim() == 0:
            U, S, V, _ = _sketch(A, M, R, niter, fast=False)
        else:
            at = tuple(bad.nonzero().T)
            Uf, Sf, Vf, _ = _sketch(A[at], None if M is None else M[at], R, niter, fast=False)
            U, S, V = U.index_put(at, Uf), S.index_put(at, Sf), V.index_put(at, Vf)
    return (V, S, U) if wide else (U, S, V)


class AdaptiveResult(NamedTuple):
    """Per matrix of the batch (flattened batch order): U_i (m, k_i), S_i (k_i,), V_i (n, k_i), and the ranks."""
    U: List[Tensor]
    S: List[Tensor]
    V: List[Tensor]
    ranks: Tensor


def svd_lowrank_adaptive(A: Tensor, tol: float, niter: int = 2, q0: int = 16,
                         max_rank: Optional[int] = None) -> AdaptiveResult:
    """For each matrix of a batch, the smallest rank k whose randomized approximation has
    ‖A − U_k diag(S_k) V_kᴴ‖_F <= tol ‖A‖_F, in one batched computation.

    Sketches q0 columns (doubling, up to max_rank, default min(m, n), for the matrices not yet within
    tol), then keeps the k_i leading triplets: the error of a truncation of the sketch's approximation is
    known exactly (module docstring), so each k_i meets tol by construction (up to rounding), never by
    an estimate. A matrix that needs more than max_rank gets max_rank (its ranks entry says so: the
    error is then above tol). Returns lists (batch flattened) and the ranks (batch shape, int64).
    """
    _check_matrix("A", A, "svd_lowrank_adaptive")
    if not isinstance(tol, (int, float)) or isinstance(tol, bool) or not tol > 0:
        raise ValueError(f"torch_jsvd.svd_lowrank_adaptive: expected tol > 0, but got {tol!r}")
    m, n = A.shape[-2:]
    kmax = min(m, n) if max_rank is None else max_rank
    if not _int_in(kmax, 1, min(m, n)):
        raise ValueError(f"torch_jsvd.svd_lowrank_adaptive: expected max_rank in [1, min(m, n)] = "
                         f"[1, {min(m, n)}], but got {max_rank!r}")
    if not _int_in(q0, 1, None):
        raise ValueError(f"torch_jsvd.svd_lowrank_adaptive: expected q0 >= 1, but got {q0!r}")
    kmax, q0 = int(kmax), int(q0)
    batch = A.shape[:-2]
    X = A.reshape(-1, m, n)
    count = X.shape[0]
    norm2 = X.double().square().sum((-2, -1))
    Us: List[Optional[Tensor]] = [None] * count
    Ss: List[Optional[Tensor]] = [None] * count
    Vs: List[Optional[Tensor]] = [None] * count
    ranks = torch.zeros(count, dtype=torch.int64)
    todo = torch.arange(count)
    q = min(q0, kmax)
    while todo.numel():
        idx = todo.to(X.device)  # (norm2 lives there too)
        Xt = X[idx]
        U, S, V = svd_lowrank(Xt, q=q, niter=niter)
        # err²(k) = ‖A − Q B‖²_F + Σ_{j>k} s_j²: the first term computed, not as ‖A‖² − Σ s_j², which
        # cancels to nothing at small tolerances.
        nt = norm2[idx]
        resid2 = ((U * S.unsqueeze(-2)) @ V.mH - Xt).double().square().sum((-2, -1))
        tail = S.double().square().flip(-1).cumsum(-1).flip(-1)  # tail[:, j] = Σ_{i>=j} s_i²
        err2 = resid2[:, None] + torch.cat([tail[:, 1:], torch.zeros_like(tail[:, :1])], -1)  # rank j + 1
        ok = err2 <= (tol * tol) * nt[:, None]
        within = ok[:, -1] | (nt == 0)
        last = q == kmax
        k = torch.where(ok.any(-1), ok.int().argmax(-1) + 1, torch.full_like(nt, q, dtype=torch.int64))
        k = torch.where(nt == 0, torch.zeros_like(k), k).cpu()
        done = (within | last).cpu()
        for j in torch.nonzero(done).flatten().tolist():
            i, r = int(todo[j]), int(k[j])
            Us[i], Ss[i], Vs[i] = U[j, :, :r], S[j, :r], V[j, :, :r]
            ranks[i] = r
        todo = todo[~done]
        q = min(2 * q, kmax)
    return AdaptiveResult(Us, Ss, Vs, ranks.reshape(batch))


def svd_truncated(A: Tensor, rank: int, *, tol: Optional[float] = None,
                  max_sweeps: Optional[int] = None) -> Tuple[Tensor, Tensor, Tensor]:
    """The leading `rank` singular triplets of the exact SVD (the Jacobi engine's): U (*, m, rank),
    S (*, rank), Vh (*, rank, n), as torch_jsvd.svd(A, full_matrices=False) sliced.

    Use it for exact leading vectors (to the engine's accuracy) at any rank; svd_lowrank is cheaper for
    a small rank of a large matrix, and its vectors are as good as its sketch (power iterations help).
    """
    _check_matrix("A", A, "svd_truncated")
    m, n = A.shape[-2:]
    if not _int_in(rank, 0, min(m, n)):
        raise ValueError(f"torch_jsvd.svd_truncated: expected rank to be an integer in [0, min(m, n)] = "
                         f"[0, {min(m, n)}], but got {rank!r}")
    rank = int(rank)
    U, S, Vh = svd(A, full_matrices=False, tol=tol, max_sweeps=max_sweeps)
    return U[..., :rank], S[..., :rank], Vh[..., :rank, :]
