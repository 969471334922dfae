"""svd_lowrank's sketch replayed as a CUDA graph (issue 22: calls whose launches cost more host time than
their kernels take).

One svd_lowrank call is about 220 PyTorch operations (about 1100 counting those they call). For a single
large matrix their host time exceeds the GPU's (1 x 4096², q = 64, H100: 1.7 ms of kernels in 4-5 ms of
wall time; docs/experiments.md, stop 35). So the second call with one key (A's shape, strides, dtype and
device, the current stream, q, niter) captures _sketch's fast path, which never synchronises, in a CUDA
graph, and that call and later ones copy A and the sketch matrix into the graph's inputs, replay it and
clone its outputs. Only without M, outside autograd, torch.compile, autocast, torch.func transforms and
other captures, and for A of at most _MAX_A_BYTES (larger ones are GPU-bound anyway, and each graph keeps a
copy of A). At most _MAX graphs are kept (the least recently used dropped), each holding that copy and its
intermediates in a private memory pool. JSVD_LOWRANK_GRAPHS=0 turns replays off.
"""

import os
import threading
from collections import OrderedDict
from typing import Callable, Optional, Tuple

import torch
from torch import Tensor

from ._ops import _fast_path

_MAX = 4
_MAX_A_BYTES = 512 << 20
_lock = threading.Lock()
_graphs: "OrderedDict[tuple, _Replay]" = OrderedDict()
_seen: "OrderedDict[tuple, None]" = OrderedDict()  # keys called once: captured at their second call
_failed = set()  # keys whose capture raised: eager from then on


def eligible(A: Tensor, M: Optional[Tensor]) -> bool:
    """(The caller checks torch.compile; _fast_path covers autograd and torch.func transforms.)"""
    return (A.is_cuda and M is None and os.environ.get("JSVD_LOWRANK_GRAPHS", "1") != "0"
            and A.numel() * A.element_size() <= _MAX_A_BYTES and _fast_path((A,))
            and not torch.cuda.is_current_stream_capturing()
            and not torch.is_autocast_enabled("cuda"))


class _Replay:
    def __init__(self, sketch: Callable, A: Tensor, R: Tensor, niter: int):
        self.A, self.R = A.clone(), R.clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # a warm-up outside the capture (libraries' handles and workspaces)
            sketch(self.A, None, self.R, niter, True)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, capture_error_mode="thread_local"):
            self.out = sketch(self.A, None, self.R, niter, True)

    def __call__(self, A: Tensor, R: Tensor) -> Tuple[Tensor, ...]:
        self.A.copy_(A)
        self.R.copy_(R)
        self.graph.replay()
        return tuple(t.clone() for t in self.out)


def replay(sketch: Callable, A: Tensor, R: Tensor, niter: int) -> Optional[Tuple[Tensor, ...]]:
    """sketch(A, None, R, niter, True) from a replayed graph, or None where this call is to run eagerly
    (the key's first call, or a key whose capture failed)."""
    key = (tuple(A.shape), A.stride(), A.dtype, A.device, torch.cuda.current_stream().cuda_stream,
           R.shape[-1], niter)
    with _lock:  # (one replay at a time: the graphs' inputs and outputs are shared)
        r = _graphs.get(key)
        if r is None:
            if key in _failed or key not in _seen:
                _seen[key] = None
                while len(_seen) > 64:
                    _seen.popitem(last=False)
                return None
            try:
                r = _Replay(sketch, A, R, niter)
            except RuntimeError:
                _failed.add(key)
                return None
            _graphs[key] = r
            while len(_graphs) > _MAX:
                _graphs.popitem(last=False)
        _graphs.move_to_end(key)
        return r(A, R)


def clear() -> None:
    """Drops every kept graph (and the memory its pool holds)."""
    with _lock:
        _graphs.clear()
        _seen.clear()
        _failed.clear()
