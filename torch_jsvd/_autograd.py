"""Backward formulas: torch's svd_backward (torch/csrc/autograd/FunctionsManual.cpp),
real case, registered on the jsvd ops with torch.library.register_autograd.

As torch.linalg.svd: with full_matrices=True only the first min(m, n) columns of
U / rows of Vh carry gradient (the rest are an arbitrary basis); gradients
through U or Vh are only defined for distinct singular values (and, for
rectangular inputs, non-zero ones). Losses depending on S only need the
reduced U and V, so svdvals (and compute_uv=False) recompute them.
"""

from typing import Optional

import torch
from torch import Tensor


def svd_backward(gU: Optional[Tensor], gS: Optional[Tensor], gVh: Optional[Tensor], U: Tensor, S: Tensor,
                 Vh: Tensor) -> Optional[Tensor]:
    """gA for the reduced SVD A = U diag(S) Vh; None grads are treated as absent."""
    if gU is None and gS is None and gVh is None:
        return None
    m, n = U.shape[-2], Vh.shape[-1]
    if gU is None and gVh is None:
        # svdvals: gA = U diag(gS) Vh
        return U @ (gS.unsqueeze(-1) * Vh) if m >= n else (U * gS.unsqueeze(-2)) @ Vh

    UhgU = None if gU is None else _skew(U.mT @ gU)
    VhgV = None if gVh is None else _skew(Vh @ gVh.mT)
    S2 = S * S
    # E_ij = S_j^2 - S_i^2 with a non-zero diagonal (only 0 / E_ii is ever formed there).
    k = S.shape[-1]
    E = S2.unsqueeze(-2) - S2.unsqueeze(-1) + torch.eye(k, dtype=S.dtype, device=S.device)
    if gU is not None and gVh is not None:
        gA = (UhgU * S.unsqueeze(-2) + S.unsqueeze(-1) * VhgV) / E
    elif gU is not None:
        gA = UhgU * (S.unsqueeze(-2) / E)
    else:
        gA = S.unsqueeze(-1) * (VhgV / E)
    if gS is not None:
        gA = gA + torch.diag_embed(gS)

    if m > n and gU is not None:
        # gA = [U gA + (I_m - U U^T) gU S^-1] Vh
        gA = U @ gA
        gUSinv = gU / S.unsqueeze(-2)
        gA = gA + gUSinv - U @ (U.mT @ gUSinv)
        gA = gA @ Vh
    elif m < n and gVh is not None:
        # gA = U [gA Vh + S^-1 gVh (I_n - V V^T)]
        gA = gA @ Vh
        SinvgVh = gVh / S.unsqueeze(-1)
        gA = gA + SinvgVh - (SinvgVh @ Vh.mT) @ Vh
        gA = U @ gA
    else:
        gA = U @ (gA @ Vh) if m >= n else (U @ gA) @ Vh
    return gA


def _skew(X: Tensor) -> Tensor:
    return X - X.mT


def _narrow_grads(ctx, gU, gVh, U, Vh, k):
    # full_matrices=True: the trailing columns of U / rows of Vh are an arbitrary
    # basis, so (as torch) their gradients are ignored.
    if ctx.full_matrices:
        U, Vh = U[..., :k], Vh[..., :k, :]
        gU = None if gU is None else gU[..., :k]
        gVh = None if gVh is None else gVh[..., :k, :]
    return gU, gVh, U, Vh


def _setup_svd(ctx, inputs, output):
    A, full_matrices, compute_uv, tol, max_sweeps = inputs
    U, S, Vh = output[0], output[1], output[2]
    ctx.full_matrices, ctx.compute_uv = full_matrices, compute_uv
    ctx.tol, ctx.max_sweeps = tol, max_sweeps
    # Unused outputs then arrive as None, not zeros: a zero gU would still form
    # 0 / (S_j^2 - S_i^2), which is NaN for repeated singular values.
    ctx.set_materialize_grads(False)
    if len(output) == 4:
        ctx.mark_non_differentiable(output[3])
    if compute_uv:
        ctx.save_for_backward(U, S, Vh)
    else:
        ctx.save_for_backward(A)


def _recompute_uv(A, tol, max_sweeps):
    with torch.no_grad():
        return torch.ops.jsvd.svd.default(A, False, True, tol, max_sweeps)


def _no_grads(ctx):
    # One None per non-tensor argument the op was called with (the dispatcher
    # drops trailing arguments equal to their defaults).
    return (None,) * (len(ctx.needs_input_grad) - 1)


def _backward_svd(ctx, gU, gS, gVh, *ginfo):
    if not ctx.needs_input_grad[0]:
        return (None,) + _no_grads(ctx)
    if ctx.compute_uv:
        U, S, Vh = ctx.saved_tensors
        gU, gVh, U, Vh = _narrow_grads(ctx, gU, gVh, U, Vh, S.shape[-1])
    else:
        # Only S is an output; U, Vh are empty placeholders without gradient.
        (A,) = ctx.saved_tensors
        U, S, Vh = _recompute_uv(A, ctx.tol, ctx.max_sweeps)
        gU = gVh = None
    return (svd_backward(gU, gS, gVh, U, S, Vh),) + _no_grads(ctx)


def _setup_svdvals(ctx, inputs, output):
    A, tol, max_sweeps = inputs
    ctx.tol, ctx.max_sweeps = tol, max_sweeps
    ctx.save_for_backward(A)


def _backward_svdvals(ctx, gS):
    (A,) = ctx.saved_tensors
    U, S, Vh = _recompute_uv(A, ctx.tol, ctx.max_sweeps)
    return (svd_backward(None, gS, None, U, S, Vh),) + _no_grads(ctx)


def _setup_varlen(ctx, inputs, output):
    As, full_matrices, compute_uv, tol, max_sweeps = inputs
    ctx.full_matrices, ctx.compute_uv = full_matrices, compute_uv
    ctx.tol, ctx.max_sweeps = tol, max_sweeps
    ctx.set_materialize_grads(False)
    Us, Ss, Vhs = output
    ctx.n = len(As)
    if compute_uv:
        ctx.save_for_backward(*Us, *Ss, *Vhs)
    else:
        ctx.save_for_backward(*As)


def _backward_varlen(ctx, gUs, gSs, gVhs):
    n = ctx.n
    saved = ctx.saved_tensors
    gUs = gUs if gUs is not None else [None] * n
    gSs = gSs if gSs is not None else [None] * n
    gVhs = gVhs if gVhs is not None else [None] * n
    gAs = []
    for i in range(n):
        if not ctx.needs_input_grad[0][i]:
            gAs.append(None)
            continue
        if ctx.compute_uv:
            U, S, Vh = saved[i], saved[n + i], saved[2 * n + i]
            gU, gVh, U, Vh = _narrow_grads(ctx, gUs[i], gVhs[i], U, Vh, S.shape[-1])
        else:
            U, S, Vh = _recompute_uv(saved[i], ctx.tol, ctx.max_sweeps)
            gU = gVh = None
        gAs.append(svd_backward(gU, gSs[i], gVh, U, S, Vh))
    return (gAs,) + _no_grads(ctx)


torch.library.register_autograd("jsvd::svd", _backward_svd, setup_context=_setup_svd)
torch.library.register_autograd("jsvd::svd_ex", _backward_svd, setup_context=_setup_svd)
torch.library.register_autograd("jsvd::svdvals", _backward_svdvals, setup_context=_setup_svdvals)
torch.library.register_autograd("jsvd::svd_varlen", _backward_varlen, setup_context=_setup_varlen)
