"""torch.library.opcheck for every op, and torch.compile(fullgraph=True) against eager."""

import pytest
import torch
from torch.library import opcheck

import torch_jsvd


def _opcheck_cases(device):
    f64 = dict(dtype=torch.float64, device=device)
    A = torch.randn(3, 5, 4, **f64)
    W = torch.randn(2, 3, 6, **f64)
    Ag = torch.randn(5, 4, **f64, requires_grad=True)
    Wg = torch.randn(3, 6, **f64, requires_grad=True)
    svd, svd_ex, svdvals, varlen = (torch.ops.jsvd.svd.default, torch.ops.jsvd.svd_ex.default,
                                    torch.ops.jsvd.svdvals.default, torch.ops.jsvd.svd_varlen.default)
    mats = [torch.randn(4, 3, **f64), torch.randn(2, 5, **f64), torch.randn(3, 3, **f64)]
    mats_g = [t.clone().requires_grad_() for t in mats]
    T = torch.randn(3, 20, 12, **f64)  # taller; defaults and keyword arguments
    packed = torch.ops.jsvd.svd_varlen_packed.default
    buf = torch.randn(40, **f64)
    members = torch.tensor([[4, 3, 0, 3, 1], [2, 5, 12, 1, 2], [0, 3, 30, 3, 1], [3, 3, 31, 3, 1]])
    return [
        (svd, (A, True, True, None, None)),
        (svd, (W, False, True, 1e-10, 40)),
        (svd, (Ag, True, True, None, None)),
        (svd, (Wg, False, True, None, None)),
        (svd, (Ag, False, False, None, None)),
        (svd, (A.to(torch.float32), True, True, None, None)),
        (svd_ex, (A, True, True, None, None)),
        (svd_ex, (Wg, False, True, None, 16)),
        (svd_ex, (Ag, True, False, None, None)),
        (svdvals, (A, None, None)),
        (svdvals, (Wg, None, None)),
        (varlen, (mats, False, True, None, None)),
        (varlen, (mats, True, True, None, None)),
        (varlen, (mats_g, False, True, None, None)),
        (varlen, (mats_g, True, False, None, None)),
        (svd, (T,), {"full_matrices": False}),
        (svd_ex, (T,), {"full_matrices": False}),
        (svdvals, (T,)),
        (varlen, ([T[0], T[1, :5]],)),
        (packed, (buf, members, False, True, None, None)),
        (packed, (buf, members, True, True, 1e-12, 30)),
        (packed, (buf, members, True, False, None, None)),
        (packed, (buf, members)),
    ]


@pytest.mark.parametrize("case", range(len(_opcheck_cases("cpu"))))
def test_opcheck(device, case):
    op, args, *kwargs = _opcheck_cases(device)[case]
    opcheck(op, args, *kwargs)


def _f(A):
    U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
    R = (U * S.unsqueeze(-2)) @ Vh
    return R, S, torch_jsvd.svdvals(A), torch_jsvd.svd_ex(A, full_matrices=True).Vh.abs().sum(-1)


def _assert_same(out, ref):
    for a, b in zip(out, ref):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_compile_fullgraph(device):
    torch._dynamo.reset()
    cf = torch.compile(_f, fullgraph=True)
    A = torch.randn(4, 6, 5, device=device)
    _assert_same(cf(A), _f(A))


def test_compile_fullgraph_out(device):
    # out= tensors of the right shape are written in place inside the graph (empty ones need a resize,
    # which dynamo does not trace under fullgraph=True: torch.linalg.svd's out= does not either).
    torch._dynamo.reset()

    def f(A, U, S, Vh, s):
        torch_jsvd.svd(A, False, out=(U, S, Vh))
        torch_jsvd.svdvals(A, out=s)

    A = torch.randn(3, 6, 4, device=device)
    outs = (torch.empty(3, 4, 6, device=device).mT, torch.empty(3, 4, device=device),
            torch.empty(3, 4, 4, device=device), torch.empty(3, 4, device=device))
    torch.compile(f, fullgraph=True)(A, *outs)
    ref = torch_jsvd.svd(A, False)
    _assert_same(tuple(outs[:3]), tuple(ref))
    torch.testing.assert_close(outs[3], ref.S)


def test_compile_dynamic(device):
    torch._dynamo.reset()
    cf = torch.compile(_f, fullgraph=True, dynamic=True)
    for shape in [(4, 6, 5), (2, 5, 7), (3, 3), (2, 2, 9, 4)]:
        A = torch.randn(shape, device=device)
        _assert_same(cf(A), _f(A))


def test_compile_backward(device):
    torch._dynamo.reset()

    def loss(A):
        U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
        return ((U * S.unsqueeze(-2)) @ Vh).sin().sum() + torch_jsvd.svdvals(A).sum()

    cf = torch.compile(loss, fullgraph=True)
    A = torch.randn(3, 6, 4, dtype=torch.float64, device=device, requires_grad=True)
    g, = torch.autograd.grad(cf(A), A)
    g_ref, = torch.autograd.grad(loss(A), A)
    torch.testing.assert_close(g, g_ref)


def test_compile_varlen(device):
    torch._dynamo.reset()

    def f(a, b):
        U, S, Vh = torch_jsvd.svd_varlen([a, b])
        return [(u * s.unsqueeze(-2)) @ vh for u, s, vh in zip(U, S, Vh)]

    cf = torch.compile(f, fullgraph=True)
    a, b = torch.randn(5, 3, device=device), torch.randn(2, 6, device=device)
    _assert_same(cf(a, b), f(a, b))
    _assert_same(cf(a, b), [a, b])


def test_export_roundtrip(device, tmp_path):
    # torch.export (a deployment path): the ops stay in the graph as jsvd ops, the program saves and loads,
    # and a dynamic batch dimension needs no guard from them.
    A = torch.randn(3, 6, 4, device=device)
    ep = torch.export.export(_ExportModule(), (A,), dynamic_shapes=({0: torch.export.Dim("batch")},))
    assert "jsvd.svd" in ep.graph_module.code and "jsvd.svdvals" in ep.graph_module.code
    torch.export.save(ep, tmp_path / "svd.pt2")
    loaded = torch.export.load(tmp_path / "svd.pt2").module()
    for B in (A, torch.randn(5, 6, 4, device=device)):
        _assert_same(loaded(B), _ExportModule()(B))


class _ExportModule(torch.nn.Module):
    def forward(self, A):
        U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
        return (U * S.unsqueeze(-2)) @ Vh, torch_jsvd.svdvals(A)


def test_cudagraph_tags():
    """The ops that read results on the host are tagged so that torch.compile's
    CUDA graphs leave them out; svd_ex, which never does, is not."""
    unsafe = torch.Tag.cudagraph_unsafe
    for name in ("svd", "svdvals", "svd_varlen"):
        assert unsafe in getattr(torch.ops.jsvd, name).default.tags, name
    assert unsafe not in torch.ops.jsvd.svd_ex.default.tags


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_compile_reduce_overhead_cuda():
    """mode="reduce-overhead" (CUDA graphs): the syncing ops run outside the
    graphs, svd_ex inside; results match eager on fresh inputs."""
    torch._dynamo.reset()
    cf = torch.compile(_f, mode="reduce-overhead")
    for _ in range(3):
        A = torch.randn(4, 40, 36, device="cuda")
        _assert_same(cf(A), _f(A))
