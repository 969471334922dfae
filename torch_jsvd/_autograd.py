"""Derivatives of the jsvd ops: torch's svd_backward and its forward-mode formula
(torch/csrc/autograd/FunctionsManual.cpp), real case, as the ops' Autograd kernels (svd, svd_ex and
svdvals through autograd.Functions that torch.func's transforms accept; svd_varlen through
torch.library's, reverse mode only) and vmap rules.

As torch.linalg.svd: with full_matrices=True only the first min(m, n) columns of
U / rows of Vh carry gradient (the rest are an arbitrary basis); gradients
through U or Vh are only defined for distinct singular values (and, for
rectangular inputs, non-zero ones). Losses depending on S only need the
reduced U and V, so svdvals (and compute_uv=False) recompute them.
"""

from typing import Optional

import torch
import torch.autograd.forward_ad as fwAD
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


def svd_jvp(dA: Tensor, U: Tensor, S: Tensor, Vh: Tensor, full_matrices: bool, uv: bool = True):
    """Tangents (dU, dS, dVh) of A = U diag(S) Vh along dA (forward mode, real case; the same formula as
    torch.linalg.svd's). With dP = U^T dA V, dS = diag(dP), X = dP off its diagonal and E_jk = S_k^2 - S_j^2:
      dU  =  U ((X S + (X S)^T) / E) + (I - U U^T) dA V S^-1
      dVh = -((S X + (S X)^T) / E) Vh + S^-1 U^T dA (I - V V^T)
    (the quotients are skew; the complements vanish for square A). With full_matrices the columns of U and
    rows of Vh beyond min(m, n), an arbitrary basis, get zero tangents, as torch gives them. uv=False: dS
    only (dU, dVh None)."""
    m, n, k = dA.shape[-2], dA.shape[-1], S.shape[-1]
    if full_matrices:
        U, Vh = U[..., :k], Vh[..., :k, :]
    V = Vh.mT
    dP = U.mT @ dA @ V if m >= n else U.mT @ (dA @ V)
    dS = dP.diagonal(dim1=-2, dim2=-1)
    if not uv:
        return None, dS, None
    X = dP - torch.diag_embed(dS)
    S2 = S * S
    E = S2.unsqueeze(-2) - S2.unsqueeze(-1) + torch.eye(k, dtype=S.dtype, device=S.device)
    XS = X * S.unsqueeze(-2)
    SX = S.unsqueeze(-1) * X
    dU = U @ ((XS + XS.mT) / E)
    dVh = -((SX + SX.mT) / E) @ Vh
    if m > k:
        dAVSinv = dA @ (V / S.unsqueeze(-2))
        dU = dU + dAVSinv - U @ (U.mT @ dAVSinv)
        if full_matrices:
            dU = torch.cat([dU, dU.new_zeros(*dU.shape[:-1], m - k)], -1)
    if n > k:
        SinvUtdA = (U / S.unsqueeze(-2)).mT @ dA
        dVh = dVh + SinvUtdA - (SinvUtdA @ V) @ Vh
        if full_matrices:
            dVh = torch.cat([dVh, dVh.new_zeros(*dVh.shape[:-2], n - k, n)], -2)
    return dU, dS, dVh


def _recompute_uv(A, tol, max_sweeps):
    # In grad mode where backward runs it (create_graph=True): the factors then carry A's graph, and a
    # second derivative through them is right (under no_grad it silently missed their terms before stop 77).
    # Under torch.func's transforms (grad of grad) through the Function, as torch_jsvd.svd calls it.
    if torch._C._are_functorch_transforms_active():
        return call_transformed(torch.ops.jsvd.svd.default, A, False, True, tol, max_sweeps)
    return torch.ops.jsvd.svd.default(A, False, True, tol, max_sweeps)


def _below(op, *args):
    with torch._C._AutoDispatchBelowAutograd():
        out = op(*args)
    if fwAD._current_level >= 0:
        # The outputs are views of the engine's buffers; forward-mode AD wants a tangent laid out as its
        # primal's base, which these have none of: give it outputs of their own.
        out = tuple(t.clone() for t in out) if isinstance(out, tuple) else out.clone()
    return out


def _batch_first(A: Tensor, bdim: Optional[int]) -> Tensor:
    # The ops take any leading batch dimensions: vmap's dimension becomes the first of them.
    return A if bdim is None else A.movedim(bdim, 0)


class SvdFunction(torch.autograd.Function):
    """jsvd.svd and jsvd.svd_ex (op) where a call is differentiated: their Autograd kernels call it. An
    autograd.Function with setup_context, jvp and vmap, so that forward-mode AD and torch.func's transforms
    (grad, jacrev, jacfwd, jvp, hessian, vmap over any of them) work as through torch.linalg.svd."""

    @staticmethod
    def forward(A, full_matrices, compute_uv, tol, max_sweeps, op):
        return _below(op, A, full_matrices, compute_uv, tol, max_sweeps)

    @staticmethod
    def setup_context(ctx, inputs, output):
        A, full_matrices, compute_uv, tol, max_sweeps, _ = inputs
        ctx.full_matrices, ctx.compute_uv = full_matrices, compute_uv
        ctx.tol, ctx.max_sweeps = tol, max_sweeps
        # Unused outputs then arrive as None, not zeros: a zero gU would still form
        # 0 / (S_j^2 - S_i^2), which is NaN for repeated singular values.
        ctx.set_materialize_grads(False)
        ctx.outputs = len(output)
        if len(output) == 4:
            ctx.mark_non_differentiable(output[3])
        # (compute_uv=False: U and Vh are placeholders, recomputed from A where a derivative needs them)
        saved = output[:3] if compute_uv else (A,)
        ctx.save_for_backward(*saved)
        ctx.save_for_forward(*saved)

    @staticmethod
    def _factors(ctx):
        if ctx.compute_uv:
            return ctx.saved_tensors
        return _recompute_uv(ctx.saved_tensors[0], ctx.tol, ctx.max_sweeps)

    @staticmethod
    def backward(ctx, gU, gS, gVh, *ginfo):
        none = (None,) * 5
        if not ctx.needs_input_grad[0]:
            return (None,) + none
        U, S, Vh = SvdFunction._factors(ctx)
        if ctx.compute_uv:
            gU, gVh, U, Vh = _narrow_grads(ctx, gU, gVh, U, Vh, S.shape[-1])
        else:  # (only S is an output)
            gU = gVh = None
        return (svd_backward(gU, gS, gVh, U, S, Vh),) + none

    @staticmethod
    def jvp(ctx, dA, *_):
        U, S, Vh = SvdFunction._factors(ctx)
        dU, dS, dVh = svd_jvp(dA, U, S, Vh, ctx.full_matrices, ctx.compute_uv)
        if not ctx.compute_uv:  # (U and Vh are empty placeholders)
            dU = dVh = dA.new_zeros(0)
        return (dU, dS, dVh) + (None,) * (ctx.outputs - 3)  # (svd_ex's info: none)

    @staticmethod
    def vmap(info, in_dims, A, full_matrices, compute_uv, tol, max_sweeps, op):
        out = SvdFunction.apply(_batch_first(A, in_dims[0]), full_matrices, compute_uv, tol, max_sweeps, op)
        return out, _out_dims(in_dims[0], compute_uv, len(out))


def _out_dims(bdim: Optional[int], compute_uv: Optional[bool] = None, outputs: int = 1):
    """vmap's output dimensions: the batch first, but not on the empty placeholders of compute_uv=False."""
    if bdim is None:
        return (None,) * outputs if compute_uv is not None else None
    if compute_uv is None:
        return 0
    uv = 0 if compute_uv else None
    return (uv, 0, uv) + (0,) * (outputs - 3)


class SvdvalsFunction(torch.autograd.Function):
    """jsvd.svdvals where a call is differentiated (as SvdFunction). U and V, which the derivatives need, are
    recomputed from A: torch_jsvd.svdvals asks jsvd.svd for them up front where A requires grad."""

    @staticmethod
    def forward(A, tol, max_sweeps):
        return _below(torch.ops.jsvd.svdvals.default, A, tol, max_sweeps)

    @staticmethod
    def setup_context(ctx, inputs, output):
        A, tol, max_sweeps = inputs
        ctx.tol, ctx.max_sweeps = tol, max_sweeps
        ctx.save_for_backward(A)
        ctx.save_for_forward(A)

    @staticmethod
    def backward(ctx, gS):
        U, S, Vh = _recompute_uv(ctx.saved_tensors[0], ctx.tol, ctx.max_sweeps)
        return svd_backward(None, gS, None, U, S, Vh), None, None

    @staticmethod
    def jvp(ctx, dA, *_):
        U, S, Vh = _recompute_uv(ctx.saved_tensors[0], ctx.tol, ctx.max_sweeps)
        return svd_jvp(dA, U, S, Vh, False, uv=False)[1]

    @staticmethod
    def vmap(info, in_dims, A, tol, max_sweeps):
        return SvdvalsFunction.apply(_batch_first(A, in_dims[0]), tol, max_sweeps), _out_dims(in_dims[0])


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


def _no_grads(ctx):
    # One None per non-tensor argument the op was called with (the dispatcher
    # drops trailing arguments equal to their defaults).
    return (None,) * (len(ctx.needs_input_grad) - 1)


def _has_tangent(A: Tensor) -> bool:
    return fwAD._current_level >= 0 and fwAD.unpack_dual(A).tangent is not None


def _differentiated(A: Tensor) -> bool:
    """Whether a call on A is differentiated: in reverse mode (grad mode on, A requires grad; inside
    torch.func.grad too) or in forward mode (A has a tangent at the current dual level; torch.func.jvp)."""
    return (torch.is_grad_enabled() and A.requires_grad) or _has_tangent(A)


def _apply(function, *args):
    """function's plain autograd apply: inside an Autograd kernel the torch.func transforms have already
    been dispatched, and Function.apply would hand the call back to them (custom_function_call, which has no
    kernel at this key). torch_jsvd's functions call function.apply itself under the transforms (call_transformed)."""
    return super(torch.autograd.Function, function).apply(*args)


def call_transformed(op, A: Tensor, *args):
    """op(A, *args) (jsvd.svd, svd_ex or svdvals) under torch.func's transforms: its autograd.Function at their
    level, so that they apply its vmap, jvp and backward. Forward mode over forward mode (jacfwd of
    jacfwd, jvp of jvp) raises: torch.func differentiates an autograd.Function's jvp at an outer jvp level as
    a constant (torch 2.11: x^3 through such a Function gives jvp(jvp) = 0, not 6x), which would be silently
    wrong; forward over reverse (torch.func.hessian) and reverse over either are right."""
    stack = torch._C._functorch.get_interpreter_stack() or ()
    if sum(str(i.key()) == "TransformType.Jvp" for i in stack) > 1:
        raise NotImplementedError("torch_jsvd under nested forward-mode transforms (jacfwd of jacfwd, jvp of "
                                  "jvp) is not supported: torch.func would drop the inner derivative's own "
                                  "derivative. Use torch.func.hessian (jacfwd of jacrev) or jacrev outside")
    if op is torch.ops.jsvd.svdvals.default:
        return SvdvalsFunction.apply(A, *args)
    return SvdFunction.apply(A, *args, op)


# The ops' Autograd kernels. torch.library.register_autograd's own autograd.Function has no setup_context
# staticmethod (torch.func's transforms refuse it) and no jvp (a tangent through it was silently dropped):
# differentiated calls go through SvdFunction / SvdvalsFunction instead, the others straight below autograd.
_lib = torch.library.Library("jsvd", "FRAGMENT")


def _not_under_transforms(name: str):
    if torch._C._are_functorch_transforms_active():
        raise NotImplementedError(f"torch.ops.jsvd.{name} differentiated under torch.func's transforms (grad, jacrev, "
                                  f"jvp, ...) is not supported: call torch_jsvd.{name}, which is")


def _svd_kernel(op):
    def kernel(keyset, A, full_matrices=True, compute_uv=True, tol=None, max_sweeps=None):
        if _differentiated(A):
            _not_under_transforms(op._opname)
            return _apply(SvdFunction, A, full_matrices, compute_uv, tol, max_sweeps, op)
        with torch._C._AutoDispatchBelowAutograd():
            return op.redispatch(keyset & torch._C._after_autograd_keyset, A, full_matrices, compute_uv, tol,
                                 max_sweeps)
    return kernel


def _svdvals_kernel(keyset, A, tol=None, max_sweeps=None):
    if _differentiated(A):
        _not_under_transforms("svdvals")
        return _apply(SvdvalsFunction, A, tol, max_sweeps)
    with torch._C._AutoDispatchBelowAutograd():
        return torch.ops.jsvd.svdvals.default.redispatch(keyset & torch._C._after_autograd_keyset, A, tol,
                                                         max_sweeps)


_varlen_reverse = torch._library.autograd.make_autograd_impl(  # (what register_autograd would register)
    torch.ops.jsvd.svd_varlen.default, torch._library.autograd.Info(_backward_varlen, _setup_varlen))


def _varlen_kernel(keyset, As, full_matrices=False, compute_uv=True, tol=None, max_sweeps=None):
    if fwAD._current_level >= 0 and any(_has_tangent(A) for A in As):
        # Forward mode: torch.library's autograd.Function (a list's) has no jvp, so the members go one at a
        # time through jsvd.svd, whose Function has (rare enough for the loop's cost).
        out = [torch.ops.jsvd.svd.default(A, full_matrices, compute_uv, tol, max_sweeps) for A in As]
        return tuple(list(f) for f in zip(*out))
    return _varlen_reverse(keyset, As, full_matrices, compute_uv, tol, max_sweeps)


_lib.impl("svd", _svd_kernel(torch.ops.jsvd.svd.default), "Autograd", with_keyset=True)
_lib.impl("svd_ex", _svd_kernel(torch.ops.jsvd.svd_ex.default), "Autograd", with_keyset=True)
_lib.impl("svdvals", _svdvals_kernel, "Autograd", with_keyset=True)
_lib.impl("svd_varlen", _varlen_kernel, "Autograd", with_keyset=True)


# vmap: the ops take any leading batch dimensions, so a vmapped call is one call with vmap's dimension first
# (not torch's fallback, a loop over it).
def _svd_vmap(op):
    def rule(info, in_dims, A, full_matrices=True, compute_uv=True, tol=None, max_sweeps=None):
        out = op(_batch_first(A, in_dims[0]), full_matrices, compute_uv, tol, max_sweeps)
        return out, _out_dims(in_dims[0], compute_uv, len(out))
    return rule


def _svdvals_vmap(info, in_dims, A, tol=None, max_sweeps=None):
    return torch.ops.jsvd.svdvals.default(_batch_first(A, in_dims[0]), tol, max_sweeps), _out_dims(in_dims[0])


torch.library.register_vmap("jsvd::svd", _svd_vmap(torch.ops.jsvd.svd.default), lib=_lib)
torch.library.register_vmap("jsvd::svd_ex", _svd_vmap(torch.ops.jsvd.svd_ex.default), lib=_lib)
torch.library.register_vmap("jsvd::svdvals", _svdvals_vmap, lib=_lib)
