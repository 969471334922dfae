"""The CPU engine's own thread pool: concurrent callers, thread counts, fork."""

import subprocess
import sys
import threading

import pytest
import torch

import torch_jsvd
from jsvd_testutils import assert_valid_svd


def _check_batch(A):
    U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
    assert_valid_svd(A, U, S, Vh, full_matrices=False)
    assert torch.allclose(S, torch.linalg.svdvals(A), rtol=0, atol=50 * A.shape[-1] * torch.finfo(A.dtype).eps * S.max())


def test_concurrent_python_threads():
    inputs = [torch.randn(b, n, n, dtype=torch.float64) for b, n in [(6, 40), (1, 150), (30, 12), (1, 96)]]
    errors = []

    def work(A):
        try:
            for _ in range(3):
                _check_batch(A)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(A,)) for A in inputs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


@pytest.mark.parametrize("nthreads", [1, 2, 3])
def test_thread_counts_give_the_same_result(nthreads):
    A = torch.randn(1, 130, 90, dtype=torch.float64)
    old = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        ref = torch_jsvd.svdvals(A)
        torch.set_num_threads(nthreads)
        _check_batch(A)
        assert torch.allclose(torch_jsvd.svdvals(A), ref, rtol=0, atol=1e-13 * ref.max())
    finally:
        torch.set_num_threads(old)


_FORK_SCRIPT = """
import multiprocessing as mp, torch, torch_jsvd
# Small enough (< 32768 elements) that torch's own kernels stay serial: its
# OpenMP regions are not fork-safe once the parent has run one. One matrix,
# so the engine splits its column pairs over its pool (serially in a child).
A = torch.randn(1, 120, 120, dtype=torch.float64)
REF = torch.linalg.svdvals(A)
def child():
    S = torch_jsvd.svdvals(A)
    assert float((S - REF).abs().max()) < 1e-12 * float(REF.max())
if __name__ == "__main__":
    torch_jsvd.svd(A)  # the parent's pool has started
    p = mp.get_context("fork").Process(target=child)
    p.start()
    p.join(60)
    raise SystemExit(0 if p.exitcode == 0 else 1)
"""


def test_forked_child_runs():
    # In a fresh interpreter, whose only threads are the engine's pool.
    r = subprocess.run([sys.executable, "-c", _FORK_SCRIPT], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
