"""Python API over torch.ops.jsvd, mirroring torch.linalg."""

import contextlib
import gc
import math
import warnings
from typing import List, NamedTuple, Optional, Sequence, Union

import torch
import torch.autograd.forward_ad as fwAD
from torch import Tensor

from . import _C, _autograd

# info codes (csrc/core.h): info >= 0 is the number of sweeps taken.
INFO_NOT_CONVERGED = -1  # max_sweeps reached; the result is the last iterate
INFO_NON_FINITE = -2  # the input held NaN or Inf; outputs are NaN
INFO_NON_FINITE_RESULT = -3  # finite input, non-finite S, U or V (S beyond the dtype's range)

DEFAULT_MAX_SWEEPS = 64


def default_tol(rows: int, dtype: torch.dtype) -> float:
    """Default convergence threshold sqrt(rows) * eps (rows of the tall matrix, i.e. max(m, n)).

    A pair of columns (i, j) counts as orthogonal when |a_i^T a_j| <= tol * ||a_i|| * ||a_j||.
    float16/bfloat16 inputs use float32's eps (they are computed in float32).
    """
    eps = torch.finfo(torch.float64 if dtype == torch.float64 else torch.float32).eps
    return math.sqrt(max(rows, 1)) * eps


def _fast_path(tensors: Sequence[Tensor]) -> bool:
    """Whether a call may go straight below the autograd layer: eager, outside torch.func transforms and
    forward-mode dual levels, and nothing to differentiate. The ops' Autograd kernels (_autograd.py) are
    Python: they convert a call's arguments and results to Python objects and back once more, which small
    calls and long svd_varlen lists feel (docs/experiments.md, "Stop 36")."""
    if not _eager_plain():
        return False
    return not (torch.is_grad_enabled() and any(isinstance(t, Tensor) and t.requires_grad for t in tensors))


def _eager_plain() -> bool:
    """_fast_path's test of the call's context alone: eager, outside torch.func transforms and forward-mode dual
    levels (the tensors' requires_grad is the caller's to check)."""
    return not (torch.compiler.is_compiling() or torch._C._are_functorch_transforms_active() or
                fwAD._current_level >= 0)


def _call(op, tensors: Sequence[Tensor], *args):
    """op(*args), below the autograd layer where _fast_path allows it."""
    if _fast_path(tensors):
        with torch._C._AutoDispatchBelowAutograd():
            return op(*args)
    return op(*args)


_SVD, _SVD_EX, _SVDVALS = 0, 1, 2  # (_C._below_autograd's op numbers)


def _call_one(which: int, op, A, *args):
    """op(A, *args) for jsvd.svd, svd_ex or svdvals (`which`), as _call. Where the call may go below
    autograd and A is a plain tensor without __torch_function__ handlers (no subclass, no mode), the
    extension calls the op's dispatcher handle itself (_C._below_autograd): the same kernels, dispatch
    keys and profiler record, without the Python op object's boxing of arguments and results. Under
    torch.func's transforms (eager) the op's autograd.Function, at their level (_autograd.call_transformed)."""
    plain = type(A) is Tensor and not torch._C._has_torch_function_unary(A)
    if plain and _fast_path((A,)):
        if which == _SVDVALS:
            return _C._below_autograd(which, A, False, False, *args)
        return _C._below_autograd(which, A, *args)
    if plain and not torch.compiler.is_compiling() and torch._C._are_functorch_transforms_active():
        return _autograd.call_transformed(op, A, *args)
    return _call(op, (A,), A, *args)


@contextlib.contextmanager
def _collector_paused():
    """Python's cyclic garbage collector paused for the block, as it was after it. A list's results are
    three tensors a matrix, Python objects the collector tracks: thousands of them set off a collection
    every 700 and promote the survivors towards the oldest generation, whose collections traverse every
    object the process holds. The objects are counted all the same, so at most one collection follows
    the block. svd_varlen of 2000 2x2 matrices on the CPU, results kept between calls, 300 calls (2 threads,
    Intel Xeon, Python 3.11; docs/experiments.md, stop 47), us a matrix: mean 3.2-3.4 -> 2.2-2.3, median
    2.10-2.17 -> 2.02-2.09. (The switch is the process's: a thread that runs meanwhile is not collected either;
    one that paused it first keeps it paused.)"""
    on = gc.isenabled()
    if on:
        gc.disable()
    try:
        yield
    finally:
        if on:
            gc.enable()


class SVDResult(NamedTuple):
    U: Tensor
    S: Tensor
    Vh: Tensor


class SVDExResult(NamedTuple):
    U: Tensor
    S: Tensor
    Vh: Tensor
    info: Tensor


class SVDVarlenResult(NamedTuple):
    U: Union[List[Tensor], Tensor]
    S: Union[List[Tensor], Tensor]
    Vh: Union[List[Tensor], Tensor]


# torch.linalg.svd's cuSOLVER algorithms: accepted by name for a drop-in call, and ignored.
_DRIVERS = (None, "gesvd", "gesvdj", "gesvda")


def _check_driver(fn: str, driver: Optional[str]) -> None:
    if driver not in _DRIVERS:
        raise ValueError(f"torch_jsvd.{fn}: driver must be None, 'gesvd', 'gesvdj' or 'gesvda' (torch.linalg's "
                         f"cuSOLVER algorithms, accepted for compatibility and ignored: the Jacobi engine computes "
                         f"every SVD), but got {driver!r}")


def _check_out(fn: str, A: Tensor, out, n: int) -> None:
    """As torch.linalg: no autograd through out=, and n tensors (a tuple of them for n > 1)."""
    if torch.is_grad_enabled() and A.requires_grad:
        raise RuntimeError(f"torch_jsvd.{fn}(): functions with out=... arguments don't support automatic "
                           "differentiation, but one of the arguments requires grad.")
    if n > 1 and (not isinstance(out, (tuple, list)) or len(out) != n):
        got = f"{len(out)} elements" if isinstance(out, (tuple, list)) else type(out).__name__
        raise TypeError(f"torch_jsvd.{fn}: out must be a tuple of {n} tensors, but got {got}")
    for o in (out if n > 1 else (out,)):
        if not isinstance(o, Tensor):
            raise TypeError(f"torch_jsvd.{fn}: out must hold tensors, but got {type(o).__name__}")
        # (the results have A's dtype and device, so this is checked before the work)
        if o.dtype != A.dtype:
            raise RuntimeError(f"torch_jsvd.{fn}: expected out tensor to have dtype {A.dtype}, but got "
                               f"{o.dtype} instead")
        if o.device != A.device:
            raise RuntimeError(f"torch_jsvd.{fn}: expected out tensor to be on device {A.device}, but got "
                               f"{o.device} instead")


def _copy_out(result: Tensor, out: Tensor) -> Tensor:
    """torch's out= rules, after _check_out: resized where the shape differs (with torch's warning if it
    had elements), to the result's strides (U column-major, as torch.linalg.svd's out= gives it)."""
    if out.shape != result.shape:
        if out.numel() != 0:
            warnings.warn(f"An output with one or more elements was resized since it had shape {list(out.shape)}, "
                          f"which does not match the required output shape {list(result.shape)}. This behavior "
                          "is deprecated, and in a future PyTorch release outputs will not be resized unless "
                          "they have zero elements. You can explicitly reuse an out tensor t by resizing it, "
                          "inplace, to zero elements with t.resize_(0).", UserWarning, stacklevel=3)
        out.resize_(result.shape)
        if out.stride() != result.stride():
            out.as_strided_(result.shape, result.stride())  # (a permutation of the same elements: in bounds)
    return out.copy_(result)


def svd(A: Tensor, full_matrices: bool = True, *, driver: Optional[str] = None, out=None,
        tol: Optional[float] = None, max_sweeps: Optional[int] = None) -> SVDResult:
    """A = U @ diag(S) @ Vh, like torch.linalg.svd(A, full_matrices, *, driver, out).

    driver (None, 'gesvd', 'gesvdj', 'gesvda') is accepted for a drop-in call
    and ignored; out=(U, S, Vh) follows torch's out= rules (same dtype and
    device, resized where the shape differs, no autograd). Raises
    torch.linalg.LinAlgError if a matrix did not converge within max_sweeps
    (default 64), holds NaN/Inf, or has singular values beyond the dtype's
    range; svd_ex reports that in info instead.
    """
    _check_driver("svd", driver)
    if out is not None:
        _check_out("svd", A, out, 3)
    U, S, Vh = _call_one(_SVD, torch.ops.jsvd.svd.default, A, full_matrices, True, tol, max_sweeps)
    if out is not None:
        copied = []
        for r, o in zip((U, S, Vh), out):  # (a loop, not a generator: the warning's stacklevel)
            copied.append(_copy_out(r, o))
        return SVDResult(*copied)
    return SVDResult(U, S, Vh)


def svd_ex(A: Tensor, full_matrices: bool = True, *, compute_uv: bool = True, tol: Optional[float] = None,
           max_sweeps: Optional[int] = None) -> SVDExResult:
    """svd without error checks or host synchronisation.

    info (int32, batch shape): sweeps taken, INFO_NOT_CONVERGED (-1),
    INFO_NON_FINITE (-2: the input holds NaN/Inf) or INFO_NON_FINITE_RESULT
    (-3: finite input, but S, U or V not finite). With compute_uv=False, U and Vh are empty tensors of
    shape (0,) (as torch._linalg_svd).

    Without a host read it cannot stop early: on CUDA, matrices too large for
    one block's shared memory (the blocked level, e.g. 256x256 float32) get all
    max_sweeps sweeps (default 64) queued, and those after convergence still
    cost time: their launches find every matrix converged and return, block by
    block (benchmarks/RESULTS.md has a measurement). Where that matters, pass a
    max_sweeps near the expected count (15-20 sweeps at such sizes); info tells
    whether it sufficed.
    """
    U, S, Vh, info = _call_one(_SVD_EX, torch.ops.jsvd.svd_ex.default, A, full_matrices, compute_uv, tol,
                              max_sweeps)
    return SVDExResult(U, S, Vh, info)


def svdvals(A: Tensor, *, driver: Optional[str] = None, out: Optional[Tensor] = None, tol: Optional[float] = None,
            max_sweeps: Optional[int] = None) -> Tensor:
    """Singular values, descending, like torch.linalg.svdvals(A, *, driver, out) (driver ignored, as in svd)."""
    _check_driver("svdvals", driver)
    if out is not None:
        _check_out("svdvals", A, out, 1)
        return _copy_out(_call_one(_SVDVALS, torch.ops.jsvd.svdvals.default, A, tol, max_sweeps), out)
    if torch.is_grad_enabled() and A.requires_grad:
        # As torch.linalg.svdvals: the gradient needs U and V, so compute them now.
        return _call_one(_SVD, torch.ops.jsvd.svd.default, A, False, True, tol, max_sweeps)[1]
    return _call_one(_SVDVALS, torch.ops.jsvd.svdvals.default, A, tol, max_sweeps)


def svd_varlen(As: Union[Sequence[Tensor], Tensor], full_matrices: bool = False, compute_uv: bool = True, *,
               tol: Optional[float] = None, max_sweeps: Optional[int] = None) -> SVDVarlenResult:
    """SVD of a list of 2-D matrices of different shapes, in one engine call.

    As: a list/tuple of (m_i, n_i) tensors, or a torch.nested tensor of
    matrices (strided layout, or ``layout=torch.jagged``: rows ragged, one
    column count). Returns lists (U_i, S_i, Vh_i) -- or nested tensors for a
    nested input: of the input's layout, except that a jagged input's output
    whose matrices differ in more than their first dimension (U with
    full_matrices, or where some m_i < n) is a strided nested tensor, the only
    layout that holds it. With compute_uv=False, each U_i and Vh_i is an
    empty tensor of shape (0,). Raises like svd on non-convergence or NaN/Inf.

    Members that share a shape with at least 31 others are solved as a
    uniform batch of their own (as svd would solve them: with its QR
    preconditioning for tall ones), the rest as one list.

    A nested input that needs no gradient is solved in place by
    torch.ops.jsvd.svd_varlen_packed: the matrices are read from its buffer
    and the results are nested views of one buffer each, so the host makes no
    tensor a matrix (thousands of small matrices: the fastest form).

    The results of one call are pieces of one buffer per kind (U, S, Vh), each
    with a storage of its own (no allocation or copy a matrix); the buffer
    lives while any of them does. Tensor.record_stream on one of them does not
    reach that buffer: to use the results on another stream, make that stream
    wait for the current one (torch.cuda.Stream.wait_stream) and keep them
    alive until it is done.
    """
    nested = isinstance(As, Tensor) and As.is_nested
    if nested and _fast_path((As,)):
        packed = _packed_members(As)
        if packed is not None:  # the nested tensor's own buffer, no tensor a matrix (docs/design.md)
            values, members, row_offsets = packed
            U, S, Vh = torch.ops.jsvd.svd_varlen_packed.default(values, members, full_matrices, compute_uv, tol,
                                                                max_sweeps)
            if As.layout == torch.strided:  # (the three nested tensors in one C++ loop)
                return SVDVarlenResult(*_C._nest_results(U, S, Vh, members, full_matrices, compute_uv))
            return SVDVarlenResult(*_nest_results(U, S, Vh, members, full_matrices, compute_uv, As.layout,
                                                  row_offsets))
    if nested:
        mats = list(As.unbind())
    elif isinstance(As, Tensor):
        raise TypeError("torch_jsvd.svd_varlen: expected a list or tuple of matrices or a torch.nested tensor, "
                        "but got a regular Tensor; use torch_jsvd.svd for a uniform batch")
    else:
        try:
            mats = list(As)
        except TypeError:
            raise TypeError("torch_jsvd.svd_varlen: expected a list or tuple of matrices or a torch.nested tensor, "
                            f"but got {type(As).__name__}") from None
    if not mats:
        # The dispatcher cannot pick a backend for an empty Tensor[]: say what is wrong here.
        raise ValueError("torch_jsvd.svd_varlen: expected a non-empty list of matrices, but got an empty list")
    args = (mats, full_matrices, compute_uv, tol, max_sweeps)
    if torch.compiler.is_compiling():  # (a compiled graph makes no Python objects a matrix; dynamo cannot trace gc)
        U, S, Vh = _call(torch.ops.jsvd.svd_varlen.default, mats, *args)
    else:
        with _collector_paused():
            # (plain tensors: the op's handle called directly, no boxing of 4 lists a call; a member that is not a
            # tensor raises a TypeError naming it; None where one requires grad, which the op below differentiates)
            r = _C._varlen_below_autograd(*args) if _eager_plain() and not torch._C._has_torch_function(mats) else None
            if r is not None:
                U, S, Vh = r
            else:
                for i, A in enumerate(mats):
                    if not isinstance(A, Tensor):
                        raise TypeError(f"torch_jsvd.svd_varlen: expected As to be a list of tensors, but As[{i}] "
                                        f"is a {type(A).__name__}")
                U, S, Vh = _call(torch.ops.jsvd.svd_varlen.default, mats, *args)
    if nested:
        U, S, Vh = (_nest(t, As.layout) for t in (U, S, Vh))
    return SVDVarlenResult(U, S, Vh)


def _packed_members(As: Tensor):
    """(values, members, row offsets or None) describing a nested tensor of 2-D matrices in place, for
    jsvd.svd_varlen_packed; None where its layout cannot be described so (the list path then decides)."""
    if As.layout == torch.strided:  # (its size, stride and offset tables read in one C++ loop)
        packed = _C._strided_members(As)
        return None if packed is None else (*packed, None)
    # jagged: rows ragged (ragged_idx 1), one column count, no holes (lengths)
    if As.dim() != 3 or As._ragged_idx != 1 or As._lengths is not None:
        return None
    values = As.values().contiguous()
    n = values.shape[1]
    offsets = As.offsets()
    rows_at = offsets.to("cpu", torch.int64)
    count = rows_at.numel() - 1
    if count == 0:
        return None
    col = torch.full((count,), n, dtype=torch.int64)
    members = torch.stack([rows_at.diff(), col, rows_at[:-1] * n, col, torch.ones_like(col)], 1)
    return values.view(-1), members, offsets


def _nest_buffer(buf: Tensor, sizes: Tensor, layout: torch.layout, row_offsets: Optional[Tensor]) -> Tensor:
    """The components of `sizes` (count, d), C-contiguous back to back in `buf`, as a nested tensor of
    `layout` where it can hold them (as _nest: jagged only when ragged in the first dimension)."""
    if layout == torch.jagged and bool((sizes[:, 1:] == sizes[:1, 1:]).all()):
        if row_offsets is None:
            row_offsets = torch.cat([sizes.new_zeros(1), sizes[:, 0].cumsum(0)]).to(buf.device)
        return torch.nested.nested_tensor_from_jagged(buf.view(-1, *sizes[0, 1:].tolist()), row_offsets)
    # (torch._nested_view_from_buffer checks each component with tensor ops: ~2 us a matrix on a CPU)
    return _C._nest_contiguous(buf, sizes)


def _nest_results(U: Tensor, S: Tensor, Vh: Tensor, members: Tensor, full_matrices: bool, compute_uv: bool,
                  layout: torch.layout, row_offsets: Optional[Tensor]):
    """svd_varlen_packed's three buffers as the nested tensors svd_varlen returns for a jagged input (a strided
    one's: _C._nest_results, the same in one C++ loop)."""
    m, n = members[:, 0], members[:, 1]
    k = torch.minimum(m, n)
    S = _nest_buffer(S, k[:, None], layout, None)
    if not compute_uv:
        empty = torch.zeros_like(m)[:, None]
        return _nest_buffer(U, empty, layout, None), S, _nest_buffer(Vh, empty, layout, None)
    U = _nest_buffer(U, torch.stack([m, m if full_matrices else k], 1), layout, row_offsets)
    Vh = _nest_buffer(Vh, torch.stack([n if full_matrices else k, n], 1), layout, None)
    return U, S, Vh


def _nest(ts: Sequence[Tensor], layout: torch.layout) -> Tensor:
    """A nested tensor of `ts` in `layout` where it can hold them (jagged: ragged in the first dimension only)."""
    if layout == torch.jagged and all(t.shape[1:] == ts[0].shape[1:] for t in ts):
        return torch.nested.nested_tensor(list(ts), layout=torch.jagged)
    return torch.nested.nested_tensor(list(ts), layout=torch.strided)
