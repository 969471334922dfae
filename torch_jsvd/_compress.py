"""Low-rank compression of a model's layers (issue 22): every nn.Linear (and nn.Conv2d, its weight
reshaped to out x (in·kh·kw)) replaced by two layers of rank r, all layers' SVDs in one svd_varlen call.

W = U diag(S) Vᴴ → the first layer applies diag(√S) Vᴴ_r (r outputs, no bias), the second U_r diag(√S)
(the original bias): a Linear becomes Linear(in, r) then Linear(r, out); a Conv2d becomes a Conv2d with r
output channels (its kernel, stride, padding, dilation) then a 1x1 Conv2d. The result is a plain
nn.Module (nn.Sequential pieces): it saves, loads and compiles like any other.
"""

from typing import Dict, List, NamedTuple, Optional

import torch
from torch import Tensor, nn

from ._lowrank import _int_in
from ._ops import svd_varlen


class LayerReport(NamedTuple):
    name: str          # the module's qualified name
    shape: tuple       # the weight matrix (out, in·kh·kw)
    rank: int          # kept rank (the layer is left as it was when rank >= its break-even rank)
    params_before: int
    params_after: int
    rel_error: float   # ‖W − W_r‖_F / ‖W‖_F
    replaced: bool


def _rank_for(S: Tensor, rank: Optional[int], energy: Optional[float], tol: Optional[float]) -> int:
    s2 = S.double().square()
    total = float(s2.sum())
    if rank is not None:
        return min(rank, S.numel())
    if total == 0:
        return 0
    kept = torch.cumsum(s2, 0)
    if energy is not None:  # the smallest r with Σ_{j<=r} s_j² >= energy Σ s_j²
        return int((kept < energy * total * (1 - 1e-12)).sum()) + 1
    err2 = (total - kept).clamp_min(0)  # ‖W − W_r‖²_F for r = 1, 2, ...
    hits = torch.nonzero(err2 <= tol * tol * total)
    return int(hits[0]) + 1 if hits.numel() else S.numel()


def _factor_layers(layer: nn.Module, U: Tensor, S: Tensor, Vh: Tensor, r: int) -> nn.Module:
    root = S[:r].sqrt()
    first_w = root[:, None] * Vh[:r]          # r x (in·kh·kw)
    second_w = U[:, :r] * root[None, :]       # out x r
    # (made in the layer's dtype and device: the factors are never rounded through a default float32)
    like = dict(device=layer.weight.device, dtype=layer.weight.dtype)
    if isinstance(layer, nn.Linear):
        first = nn.Linear(layer.in_features, r, bias=False, **like)
        second = nn.Linear(r, layer.out_features, bias=layer.bias is not None, **like)
    else:
        first = nn.Conv2d(layer.in_channels, r, layer.kernel_size, stride=layer.stride, padding=layer.padding,
                          dilation=layer.dilation, bias=False, padding_mode=layer.padding_mode, **like)
        second = nn.Conv2d(r, layer.out_channels, 1, bias=layer.bias is not None, **like)
    with torch.no_grad():
        first.weight.copy_(first_w.reshape(first.weight.shape))
        second.weight.copy_(second_w.reshape(second.weight.shape))
        if layer.bias is not None:
            second.bias.copy_(layer.bias)
    return nn.Sequential(first, second)


def compress(module: nn.Module, *, rank: Optional[int] = None, energy: Optional[float] = None,
             tol: Optional[float] = None, types=(nn.Linear, nn.Conv2d)) -> List[LayerReport]:
    """Replace, in place, each nn.Linear and nn.Conv2d (groups=1) of `module` by two low-rank layers.

    Exactly one of: `rank` (r for every layer), `energy` (the smallest r keeping that fraction of
    Σ s_j², in (0, 1]) or `tol` (the smallest r with ‖W − W_r‖_F <= tol ‖W‖_F, > 0). A layer is left as
    it was where rank r would not save parameters (r (out + in) >= out·in). All weights' SVDs are one
    torch_jsvd.svd_varlen call (float32 or float64, the weights' device). `types` narrows the candidates
    (e.g. (nn.Linear,)). Returns one LayerReport per candidate layer, in module order.
    """
    chosen = [x is not None for x in (rank, energy, tol)]
    if sum(chosen) != 1:
        raise ValueError("torch_jsvd.compress: give exactly one of rank, energy or tol")
    if rank is not None and not _int_in(rank, 1, None):
        raise ValueError(f"torch_jsvd.compress: expected rank to be a positive integer, but got {rank!r}")
    rank = None if rank is None else int(rank)
    if energy is not None and not 0 < energy <= 1:
        raise ValueError(f"torch_jsvd.compress: expected energy in (0, 1], but got {energy!r}")
    if tol is not None and not tol > 0:
        raise ValueError(f"torch_jsvd.compress: expected tol > 0, but got {tol!r}")
    layers = [(name, m) for name, m in module.named_modules()
              if isinstance(m, types) and isinstance(m, (nn.Linear, nn.Conv2d))
              and not (isinstance(m, nn.Conv2d) and m.groups != 1)]
    if not layers:
        return []
    mats = [m.weight.detach().reshape(m.weight.shape[0], -1) for _, m in layers]
    work = [w.float() if w.dtype not in (torch.float32, torch.float64) else w for w in mats]
    with torch.no_grad():
        Us, Ss, Vhs = svd_varlen(work, full_matrices=False)
    reports = []
    parents: Dict[str, nn.Module] = dict(module.named_modules())
    for (name, layer), W, U, S, Vh in zip(layers, mats, Us, Ss, Vhs):
        out_f, in_f = W.shape
        r = _rank_for(S, rank, energy, tol)
        before = W.numel()
        replaced = 0 < r and r * (out_f + in_f) < before
        s2 = S.double().square()
        err = float((s2[r:].sum() / s2.sum().clamp_min(1e-300)).sqrt()) if replaced else 0.0
        after = r * (out_f + in_f) if replaced else before
        if replaced:
            new = _factor_layers(layer, U, S, Vh, r)
            parent_name, _, child = name.rpartition(".")
            setattr(parents[parent_name] if parent_name else module, child, new)
        bias = layer.bias.numel() if layer.bias is not None else 0
        reports.append(LayerReport(name, (out_f, in_f), r if replaced else min(out_f, in_f), before + bias,
                                   after + bias, err, replaced))
    return reports
