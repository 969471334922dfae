"""syevBatched replayed as a CUDA graph (kernels/precondition/syev_batched.cpp): the first call of a shape
captures cuSOLVER's call, later ones copy their Gram matrices in and replay it. Checked in child processes
(the engine reads JSVD_SYEV_GRAPH once): the replay ran (cudaGraphLaunch in torch.profiler's trace), and
every call of a sequence of shapes and data, on the current and on a side stream, gives what the direct
call gives (JSVD_SYEV_GRAPH=0) to rounding, with every output property. Skipped without a CUDA device.
"""

import pytest
import torch

from jsvd_testutils import run_child

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

# Batches on syevBatched's route (eigh_precondition.h: near-square float64 batches from 40 matrices of 256
# columns, float32 from 100), well-conditioned so that float64's Cholesky test keeps them there; one shape
# twice, with other data, and a second shape between.
_CODE = """
    import torch, torch_jsvd
    from torch.profiler import ProfilerActivity, profile
    from jsvd_testutils import assert_valid_svd, reference_svdvals

    def batch(b, n, dtype, seed):
        g = torch.Generator().manual_seed(seed)
        # (the QRs on the device: 100 of 256² in float64 took most of the test's time on the host)
        P = torch.linalg.qr(torch.randn(b, n, n, generator=g, dtype=torch.float64).cuda())[0]
        Q = torch.linalg.qr(torch.randn(b, n, n, generator=g, dtype=torch.float64).cuda())[0]
        s = torch.linspace(3, 1, n, dtype=torch.float64, device="cuda")
        return ((P * s) @ Q.mT).to(dtype)

    cases = [(40, 256, torch.float64, 0), (100, 256, torch.float32, 1), (40, 256, torch.float64, 2),
             (100, 256, torch.float32, 3)]
    out, graph_launches = [], 0
    side = torch.cuda.Stream()
    for i, (b, n, dtype, seed) in enumerate(cases):
        A = batch(b, n, dtype, seed)
        stream = side if i == 3 else torch.cuda.current_stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream), profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
        torch.cuda.synchronize()
        graph_launches += sum(1 for e in prof.events() if e.name == "cudaGraphLaunch")
        assert_valid_svd(A, U, S, Vh, False)
        ref = reference_svdvals(A)
        assert ((S.double() - ref).abs() <= 4 * n * torch.finfo(dtype).eps * ref[..., :1]).all()
        out.append([t.cpu() for t in (U, S, Vh)])
    torch.save(out, OUT)
    print(graph_launches)
"""


def test_graph_replay_matches_the_direct_call(tmp_path):
    graph = run_child(_CODE.replace("OUT", repr(str(tmp_path / "graph.pt"))))
    direct = run_child(_CODE.replace("OUT", repr(str(tmp_path / "direct.pt"))), JSVD_SYEV_GRAPH="0")
    # every call replays (the first of a shape after capturing it); none without the switch
    assert int(graph.split()[-1]) >= 4, graph
    assert int(direct.split()[-1]) == 0, direct
    for g, d in zip(torch.load(tmp_path / "graph.pt"), torch.load(tmp_path / "direct.pt")):
        eps = torch.finfo(g[1].dtype).eps
        torch.testing.assert_close(g[1], d[1], rtol=0, atol=64 * eps * d[1].max().item())
        # U and V to the rounding of well-separated singular vectors (gaps of 2/255: sign fixed by U^T U')
        for x, y in ((g[0], d[0]), (g[2].mT, d[2].mT)):
            signs = torch.sign((x * y).sum(-2, keepdim=True))
            torch.testing.assert_close(x * signs, y, rtol=0, atol=1e4 * eps)
