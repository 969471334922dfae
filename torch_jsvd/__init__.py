"""torch_jsvd: batched SVD by one-sided Jacobi as PyTorch custom ops.

Drop-in for torch.linalg.svd / svdvals on float32/float64 (float16/bfloat16
computed in float32), any batch shape, CPU and CUDA, with autograd and
torch.compile support::

    import torch_jsvd
    U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
    U, S, Vh, info = torch_jsvd.svd_ex(A)         # no host sync; info = sweeps or < 0
    S = torch_jsvd.svdvals(A)
    Us, Ss, Vhs = torch_jsvd.svd_varlen([A0, A1, A2])  # matrices of different shapes
    U, S, V = torch_jsvd.svd_lowrank(A, q=16)      # randomized, like torch.svd_lowrank, batched
    reports = torch_jsvd.compress(model, energy=0.9)  # Linear/Conv2d layers -> two low-rank layers

The ops live in torch.ops.jsvd (svd, svd_ex, svdvals, svd_varlen, svd_varlen_packed).
"""

import torch

from . import _C  # noqa: F401  (loads the library: registers torch.ops.jsvd.*)
from . import _autograd, _fake  # noqa: F401  (fake kernels and autograd formulas)
from ._compress import LayerReport, compress
from ._lowrank import AdaptiveResult, svd_lowrank, svd_lowrank_adaptive, svd_truncated
from ._plan import plan, tune
from ._ops import (
    INFO_NON_FINITE,
    INFO_NON_FINITE_RESULT,
    INFO_NOT_CONVERGED,
    SVDExResult,
    SVDResult,
    SVDVarlenResult,
    default_tol,
    svd,
    svd_ex,
    svd_varlen,
    svdvals,
)

__all__ = [
    "plan",
    "tune",
    "svd",
    "svd_ex",
    "svdvals",
    "svd_varlen",
    "svd_lowrank",
    "svd_lowrank_adaptive",
    "svd_truncated",
    "compress",
    "AdaptiveResult",
    "LayerReport",
    "SVDResult",
    "SVDExResult",
    "SVDVarlenResult",
    "INFO_NOT_CONVERGED",
    "INFO_NON_FINITE",
    "INFO_NON_FINITE_RESULT",
    "default_tol",
]
__version__ = "0.1.0"
