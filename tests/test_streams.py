"""Streams and CUDA graphs: the CUDA engine runs on the current stream, svd_ex never synchronises (so it
can be captured in a CUDA graph and replayed), and the ops that read results on the host refuse a capture
with an error naming svd_ex. Skipped without a CUDA device."""

import pytest
import torch

import torch_jsvd
from jsvd_testutils import assert_valid_svd

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

DTYPES = [torch.float32, torch.float64]


def on_own_streams(calls, count):
    """calls(i) for i < count, each from a thread of its own on a CUDA stream of its own (which waits for the
    default stream first), all at once; returns when every thread's stream is done."""
    import threading

    def work(i):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.default_stream())
        with torch.cuda.stream(s):
            calls(i)
        s.synchronize()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_svd_ex_runs_on_a_side_stream():
    A = torch.randn(50, 100, 60, device="cuda")
    B = torch.randn(2, 600, 600, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        outA = torch_jsvd.svd_ex(A, full_matrices=False)
        outB = torch_jsvd.svd_ex(B, full_matrices=False)
    torch.cuda.current_stream().wait_stream(s)
    assert_valid_svd(A, *outA[:3], full_matrices=False)
    assert_valid_svd(B, *outB[:3], full_matrices=False)


@pytest.mark.parametrize("dtype,large", [(torch.float32, False), (torch.float64, True)], ids=["f32", "f64-large"])
def test_lists_from_two_threads_on_their_own_streams(dtype, large):
    # Two svd_varlen calls at once, each from its own thread on its own stream (each call forks its
    # launch groups onto pool streams and joins them back): both results right, and ready on the
    # caller's stream when the call returns (a copy there right away would read a missing join's
    # partial results). large: also a member on the blocked levels and a QR-first shape group.
    g = torch.Generator(device="cuda").manual_seed(1)
    big = [(300, 200)] + ([(700, 650)] + [(200, 60)] * 32 if large else [])
    lists = [[torch.randn(k % 37 + 1, k % 23 + 1, dtype=dtype, device="cuda", generator=g) for k in range(150)] +
             [torch.randn(s, dtype=dtype, device="cuda", generator=g) for s in big] for _ in range(2)]
    if large:
        plan = torch_jsvd.plan([tuple(a.shape) for a in lists[0]], dtype=dtype, device="cuda")["matrices"]
        assert plan[-1].get("precondition") and plan[-1].get("shape_group") == 32
    out = [None, None]

    def calls(i):
        for _ in range(3):
            out[i] = [[t.clone() for t in ts] for ts in torch_jsvd.svd_varlen(lists[i])]

    on_own_streams(calls, 2)
    for i in range(2):
        for A, u, sv, vh in zip(lists[i], *out[i]):
            assert_valid_svd(A, u, sv, vh, full_matrices=False)


def test_svd_info_reads_from_threads_on_their_own_streams():
    """svd's info read (kernels/engine/info_min.cu: a kernel storing into a host-mapped slot, a pool of them)
    from four threads at once, each on its own stream: every call gets its own verdict, the threads whose
    batches hold a NaN raise LinAlgError and the others return valid results, call after call; batches of
    more than one info block (100000 matrices) among them."""
    g = torch.Generator(device="cuda").manual_seed(3)
    shapes = [(500, 16, 16), (100000, 3, 3), (7, 40, 30), (3, 64, 64)]
    inputs = [torch.randn(s, device="cuda", generator=g) for s in shapes]
    bad = [i % 2 == 1 for i in range(4)]
    for A, b in zip(inputs, bad):
        if b:
            A[-1, 0, 0] = float("nan")
    verdicts = [[] for _ in range(4)]

    def calls(i):
        for _ in range(20):
            try:
                U, S, Vh = torch_jsvd.svd(inputs[i], full_matrices=False)
                verdicts[i].append(bool(torch.isfinite(S).all()))
            except torch.linalg.LinAlgError:
                verdicts[i].append("raised")

    on_own_streams(calls, 4)
    for i in range(4):
        assert verdicts[i] == (["raised"] * 20 if bad[i] else [True] * 20), (shapes[i], verdicts[i])
    A = inputs[2]
    assert_valid_svd(A, *torch_jsvd.svd(A, full_matrices=False), full_matrices=False)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_svd_ex_graph_replays_on_new_input(dtype):
    """svd_ex never synchronises, so it can be captured in a CUDA graph (as
    torch.compile's reduce-overhead mode does). Its launches read task lists
    uploaded from pinned host memory during capture: replays must still see
    them intact (the pinned blocks are churned in between) and the new input."""
    shapes = [(64, 16, 16), (6, 100, 60), (2, 300, 260)]  # warp, whole and pair levels
    for shape in shapes:
        A = torch.randn(shape, dtype=dtype, device="cuda")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up: per-device caches filled before capture
            torch_jsvd.svd_ex(A, full_matrices=False)
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            U, S, Vh, info = torch_jsvd.svd_ex(A, full_matrices=False)
        for _ in range(2):
            A.copy_(torch.randn_like(A))
            for e in range(8, 21):  # reuse of a freed pinned block would put these bytes in a task list
                junk = torch.full((1 << e,), 0x7F, dtype=torch.uint8).pin_memory()
                junk.to("cuda", non_blocking=True)
            g.replay()
            torch.cuda.synchronize()
            assert (info >= 0).all(), info
            assert_valid_svd(A, U, S, Vh, full_matrices=False)


def test_syncing_ops_raise_under_graph_capture():
    """svd, svdvals and svd_varlen read on the host: inside a CUDA graph capture
    they raise a clear error that names svd_ex, instead of invalidating it."""
    A = torch.randn(4, 16, 16, device="cuda")
    torch_jsvd.svd(A)  # warm-up outside the capture
    for call in (lambda: torch_jsvd.svd(A), lambda: torch_jsvd.svdvals(A), lambda: torch_jsvd.svd_varlen([A[0]])):
        g = torch.cuda.CUDAGraph()
        with pytest.raises(RuntimeError, match="svd_ex"):
            with torch.cuda.graph(g):
                call()
    U, S, Vh = torch_jsvd.svd(A)  # and the stream works afterwards
    assert_valid_svd(A, U, S, Vh, full_matrices=True)
