"""Load and lifetime: 10^4 calls of mixed shapes leave GPU and host memory where they were; four Python
threads (on CUDA each on its own stream) get results bit-identical to serial calls."""

import threading

import pytest
import torch

import torch_jsvd

SHAPES = [(2, 2), (5, 3), (3, 7), (16, 16), (4, 8, 8), (33, 20), (2, 40, 40), (1, 1), (0, 3), (70, 9)]


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def _calls(device, n, seed=0):
    g = torch.Generator().manual_seed(seed)
    inputs = [torch.randn(s, generator=g).to(device) for s in SHAPES]
    flat = [A for A in inputs if A.dim() == 2]
    for i in range(n):
        A = inputs[i % len(inputs)]
        if i % 3 == 0:
            torch_jsvd.svd(A, full_matrices=i % 2 == 0)
        elif i % 3 == 1:
            torch_jsvd.svdvals(A)
        else:
            torch_jsvd.svd_varlen(flat[i % 3: i % 3 + 3])


def test_no_memory_growth(device):
    _calls(device, 500)  # warm up: allocator pools, cached plans
    if device == "cuda":
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
    rss = _rss_bytes()
    _calls(device, 10_000)
    if device == "cuda":
        torch.cuda.synchronize()
        assert torch.cuda.memory_allocated() == before
    # host: no growth beyond allocator noise (a leak of one buffer a call would be megabytes)
    assert _rss_bytes() - rss < 16 << 20


def test_threads_match_serial(device):
    g = torch.Generator().manual_seed(1)
    inputs = [torch.randn(s, generator=g, dtype=torch.float64).to(device) for s in SHAPES[:8]]
    serial = [torch_jsvd.svd(A, full_matrices=False) for A in inputs]
    results, errors = [None] * 4, []

    def work(t):
        try:
            stream = torch.cuda.Stream() if device == "cuda" else None
            ctx = torch.cuda.stream(stream) if stream is not None else torch.autograd.grad_mode.no_grad()
            with ctx:
                out = [[torch_jsvd.svd(A, full_matrices=False) for A in inputs] for _ in range(20)]
            if stream is not None:
                stream.synchronize()
            results[t] = out
        except Exception as e:  # reported below: an assertion in a thread would be lost
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    for out in results:
        for rep in out:
            for got, want in zip(rep, serial):
                for a, b in zip(got, want):
                    assert torch.equal(a, b)
