"""Fake (meta) kernels: output shapes, dtypes and strides of every op, without
computing anything, so torch.compile can trace the ops (dynamic shapes too)."""

import torch
from torch import Tensor

_FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def _check_matrix(A: Tensor, op: str, name: str, exact_dim: bool = False) -> None:
    # Same rules and wording as check_matrix in csrc/svd_wrapper.cpp.
    if exact_dim:
        torch._check(A.dim() == 2, lambda: f"{op}: expected {name} to be a 2-D matrix (m, n), but got a "
                                           f"{A.dim()}-D tensor")
    else:
        torch._check(A.dim() >= 2, lambda: f"{op}: expected {name} to have at least 2 dimensions (..., m, n), "
                                           f"but got a {A.dim()}-D tensor")
    _check_dtype(A, op, name)


def _check_dtype(A: Tensor, op: str, name: str) -> None:
    # Same rules and wording as check_float_dtype in csrc/svd_wrapper.cpp.
    torch._check(not A.is_complex(), lambda: f"{op}: complex inputs are not yet supported ({name} has dtype "
                                             f"{A.dtype})")
    torch._check(A.dtype in _FLOATS, lambda: f"{op}: expected {name} to be a floating point tensor (float32, "
                                             f"float64, float16 or bfloat16), but got {A.dtype}")


def _svd_meta(A: Tensor, full_matrices: bool, compute_uv: bool, op: str):
    # U is F-contiguous (column-major) and Vh C-contiguous: torch.linalg.svd's strides on CUDA.
    _check_matrix(A, op, "A")
    *batch, m, n = A.shape
    k = torch.sym_min(m, n)
    S = A.new_empty((*batch, k))
    info = A.new_empty(batch, dtype=torch.int32)
    if not compute_uv:
        return A.new_empty((0,)), S, A.new_empty((0,)), info
    uc = m if full_matrices else k
    U = A.new_empty((*batch, uc, m)).mT
    Vh = A.new_empty((*batch, n if full_matrices else k, n))
    return U, S, Vh, info


@torch.library.register_fake("jsvd::svd")
def _svd_fake(A, full_matrices=True, compute_uv=True, tol=None, max_sweeps=None):
    U, S, Vh, _ = _svd_meta(A, full_matrices, compute_uv, "jsvd.svd")
    return U, S, Vh


@torch.library.register_fake("jsvd::svd_ex")
def _svd_ex_fake(A, full_matrices=True, compute_uv=True, tol=None, max_sweeps=None):
    return _svd_meta(A, full_matrices, compute_uv, "jsvd.svd_ex")


@torch.library.register_fake("jsvd::svdvals")
def _svdvals_fake(A, tol=None, max_sweeps=None):
    return _svd_meta(A, False, False, "jsvd.svdvals")[1]


@torch.library.register_fake("jsvd::svd_varlen")
def _svd_varlen_fake(As, full_matrices=False, compute_uv=True, tol=None, max_sweeps=None):
    op = "jsvd.svd_varlen"
    torch._check(len(As) > 0, lambda: f"{op}: expected a non-empty list of matrices, but got an empty list")
    Us, Ss, Vhs = [], [], []
    for i, A in enumerate(As):
        _check_matrix(A, op, f"As[{i}]", exact_dim=True)
        torch._check(A.dtype == As[0].dtype, lambda: f"{op}: all matrices must have the same dtype, but As[{i}] "
                                                     f"has dtype {A.dtype} and As[0] has dtype {As[0].dtype}")
        torch._check(A.device == As[0].device, lambda: f"{op}: all matrices must be on the same device, but "
                                                       f"As[{i}] is on {A.device} and As[0] is on {As[0].device}")
        U, S, Vh, _ = _svd_meta(A, full_matrices, compute_uv, op)
        Us.append(U)
        Ss.append(S)
        Vhs.append(Vh)
    return Us, Ss, Vhs


@torch.library.register_fake("jsvd::svd_varlen_packed")
def _svd_varlen_packed_fake(values, members, full_matrices=False, compute_uv=True, tol=None, max_sweeps=None):
    # Same checks as svd_varlen_packed_impl (csrc/svd_varlen.cpp); the results' lengths depend on the
    # values of members, so they are dynamic sizes.
    op = "jsvd.svd_varlen_packed"
    torch._check(values.dim() == 1, lambda: f"{op}: expected values to be a 1-D tensor, but got a "
                                            f"{values.dim()}-D tensor")
    _check_dtype(values, op, "values")
    torch._check(members.dim() == 2 and members.shape[1] == 5 and members.dtype == torch.int64
                 and members.device.type == "cpu",
                 lambda: f"{op}: expected members to be an int64 CPU tensor of shape (count, 5)")
    ctx = torch.library.get_ctx()
    S = values.new_empty((ctx.new_dynamic_size(),))
    if not compute_uv:
        return values.new_empty((0,)), S, values.new_empty((0,))
    return values.new_empty((ctx.new_dynamic_size(),)), S, values.new_empty((ctx.new_dynamic_size(),))
