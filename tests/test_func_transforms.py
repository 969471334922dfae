"""Forward-mode AD and torch.func's transforms through torch_jsvd, against torch.linalg.svd's.

Until stop 77 a tangent through torch_jsvd was silently dropped (fwAD.unpack_dual(S).tangent was None),
torch.func.grad / jacrev raised on torch.library's autograd.Function, and vmap looped over the vmapped
dimension in torch's fallback: _autograd.py's SvdFunction / SvdvalsFunction and the ops' vmap rules.
"""

import pytest
import torch
import torch.autograd.forward_ad as fwAD
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import torch_jsvd

SHAPES = [(5, 3), (3, 5), (4, 4), (2, 6, 4), (2, 3, 4, 7)]


def _k(S):
    return S.shape[-1]


def _invariants(U, S, Vh):
    """Outputs unchanged when a pair (u_i, v_i) flips sign: S, U S Vh and the projectors on U's and V's spans."""
    k = _k(S)
    Uk, Vhk = U[..., :k], Vh[..., :k, :]
    return S, (Uk * S.unsqueeze(-2)) @ Vhk, Uk @ Uk.mT, Vhk.mT @ Vhk


def _close(a, b, tol=1e-9):
    for x, y in zip(a, b):
        torch.testing.assert_close(x, y, rtol=tol, atol=tol)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("full_matrices", [True, False])
def test_forward_ad_matches_torch(device, shape, full_matrices):
    A = torch.randn(shape, dtype=torch.float64, device=device)
    dA = torch.randn_like(A)
    with fwAD.dual_level():
        x = fwAD.make_dual(A, dA)
        ours = [fwAD.unpack_dual(t).tangent for t in _invariants(*torch_jsvd.svd(x, full_matrices))]
        ref = [fwAD.unpack_dual(t).tangent for t in _invariants(*torch.linalg.svd(x, full_matrices=full_matrices))]
        S_vals = fwAD.unpack_dual(torch_jsvd.svdvals(x)).tangent
        S_ex = fwAD.unpack_dual(torch_jsvd.svd_ex(x, compute_uv=False).S).tangent
        S_op = fwAD.unpack_dual(torch.ops.jsvd.svdvals(x)).tangent
    assert all(t is not None for t in ours + [S_vals, S_ex, S_op])
    _close(ours, ref)
    _close([S_vals, S_ex, S_op], [ref[0]] * 3)


@pytest.mark.parametrize("shape", [(4, 3), (3, 5), (4, 4), (2, 6, 4)], ids=str)
def test_gradcheck_forward_and_backward(device, shape):
    A = torch.randn(shape, dtype=torch.float64, device=device, requires_grad=True)

    def reduced(A):
        return _invariants(*torch_jsvd.svd(A, full_matrices=False))

    def full(A):
        return _invariants(*torch_jsvd.svd(A, full_matrices=True))

    for f in (reduced, full, torch_jsvd.svdvals, lambda A: torch_jsvd.svd_ex(A, compute_uv=False).S,
              lambda A: _invariants(*torch_jsvd.svd_ex(A)[:3]), lambda A: torch.ops.jsvd.svdvals(A)):
        assert torch.autograd.gradcheck(f, (A,), check_forward_ad=True)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4)], ids=str)
def test_func_jacobians_and_hessian(device, shape):
    A = torch.randn(shape, dtype=torch.float64, device=device)
    pairs = [(lambda x: _invariants(*torch_jsvd.svd(x, full_matrices=False)),
              lambda x: _invariants(*torch.linalg.svd(x, full_matrices=False))),
             (torch_jsvd.svdvals, torch.linalg.svdvals),
             (lambda x: torch_jsvd.svd_ex(x, compute_uv=False).S, torch.linalg.svdvals)]
    for ours, ref in pairs:
        for transform in (torch.func.jacrev, torch.func.jacfwd):
            a, b = transform(ours)(A), transform(ref)(A)
            _close(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,))
    loss = (lambda svdvals: lambda x: (svdvals(x) ** 3).sum())
    torch.testing.assert_close(torch.func.hessian(loss(torch_jsvd.svdvals))(A),
                               torch.func.hessian(loss(torch.linalg.svdvals))(A), rtol=1e-8, atol=1e-8)
    dA = torch.randn_like(A)
    _, t = torch.func.jvp(torch_jsvd.svdvals, (A,), (dA,))
    _, t_ref = torch.func.jvp(torch.linalg.svdvals, (A,), (dA,))
    torch.testing.assert_close(t, t_ref, rtol=1e-9, atol=1e-9)


def _jsvd_calls(fn):
    """fn's result and how many jsvd ops it dispatched (torch.profiler, CPU activity)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        out = fn()
    return out, sum(e.name.startswith("jsvd::") for e in prof.events())


def test_vmap_is_one_batched_call(device):
    B = torch.randn(3, 6, 5, 4, dtype=torch.float64, device=device)  # vmapped over dim 1
    calls = {}
    # torch's batching fallback would call the op once per vmapped example (6 here, and only log a C++
    # warning): each form dispatches one batched jsvd op (the raw ops also record their vmapped call).
    for name, fn in {"svdvals": lambda: torch.func.vmap(torch_jsvd.svdvals, in_dims=1)(B),
                     "svd": lambda: torch.func.vmap(lambda x: torch_jsvd.svd(x, full_matrices=False), in_dims=1)(B),
                     "svd_ex": lambda: torch.func.vmap(lambda x: torch_jsvd.svd_ex(x, compute_uv=False), in_dims=1)(B),
                     "op svd_ex": lambda: torch.func.vmap(lambda x: torch.ops.jsvd.svd_ex(x, False), in_dims=1)(B),
                     "op svdvals": lambda: torch.func.vmap(torch.ops.jsvd.svdvals, in_dims=1)(B)}.items():
        calls[name] = _jsvd_calls(fn)
    assert {k: n for k, (_, n) in calls.items()} == {"svdvals": 1, "svd": 1, "svd_ex": 1, "op svd_ex": 2,
                                                      "op svdvals": 2}
    S, (U, S2, Vh), ex, op, op_vals = (out for out, _ in calls.values())
    ref = torch.linalg.svdvals(B.movedim(1, 0))
    for s in (S, S2, ex.S, op[1], op_vals):
        torch.testing.assert_close(s, ref, rtol=1e-12, atol=1e-12)
    assert U.shape == (6, 3, 5, 4) and Vh.shape == (6, 3, 4, 4) and op[0].shape == (6, 3, 5, 4)
    assert ex.U.shape == (6, 0) and ex.info.shape == (6, 3) and bool((ex.info > 0).all())
    Bm = B.movedim(1, 0)
    torch.testing.assert_close((U * S2.unsqueeze(-2)) @ Vh, Bm, rtol=1e-12, atol=1e-12)


def test_vmap_of_grad(device):
    B = torch.randn(4, 5, 3, dtype=torch.float64, device=device)
    loss = (lambda svd: lambda x: (svd(x, full_matrices=False)[0].abs() * svd(x, full_matrices=False)[1]).sum())
    g = torch.func.vmap(torch.func.grad(loss(torch_jsvd.svd)))(B)
    g_ref = torch.func.vmap(torch.func.grad(loss(torch.linalg.svd)))(B)
    torch.testing.assert_close(g, g_ref, rtol=1e-9, atol=1e-9)


def test_unsupported_forms_raise(device):
    A = torch.randn(4, 3, dtype=torch.float64, device=device)
    # The op itself, differentiated under a torch.func transform: a clear error naming what works.
    with pytest.raises(NotImplementedError, match="torch_jsvd.svdvals"):
        torch.func.grad(lambda x: torch.ops.jsvd.svdvals(x).sum())(A)
    with pytest.raises(NotImplementedError, match="torch_jsvd.svd"):
        torch.func.jacrev(lambda x: torch.ops.jsvd.svd(x, False)[1])(A)
    # svd_varlen_packed has no derivative: a tangent on its buffer raises rather than being dropped.
    values = torch.randn(12, dtype=torch.float64, device=device)
    members = torch.tensor([[3, 2, 0, 2, 1], [2, 3, 6, 3, 1]])
    with fwAD.dual_level():
        with pytest.raises(RuntimeError, match="forward-mode tangent"):
            torch.ops.jsvd.svd_varlen_packed(fwAD.make_dual(values, torch.randn_like(values)), members)


@pytest.mark.parametrize("full_matrices", [True, False])
def test_varlen_forward_ad(device, full_matrices):
    # A list's members with tangents (and one without) carry the tangents svd gives each of them.
    As = [torch.randn(s, dtype=torch.float64, device=device) for s in [(5, 3), (2, 6), (4, 4)]]
    dAs = [torch.randn_like(A) for A in As]
    with fwAD.dual_level():
        duals = [fwAD.make_dual(A, dA) for A, dA in zip(As, dAs)][:2] + [As[2]]
        U, S, Vh = torch_jsvd.svd_varlen(duals, full_matrices)
        S_only = torch_jsvd.svd_varlen(duals, compute_uv=False).S
        for i in range(2):
            ref = [fwAD.unpack_dual(t).tangent for t in _invariants(*torch.linalg.svd(duals[i], full_matrices))]
            ours = [fwAD.unpack_dual(t).tangent for t in _invariants(U[i], S[i], Vh[i])]
            _close(ours, ref)
            _close([fwAD.unpack_dual(S_only[i]).tangent], ref[:1])
        assert fwAD.unpack_dual(S[2]).tangent is None
        torch.testing.assert_close(S[2], torch.linalg.svdvals(As[2]), rtol=1e-12, atol=1e-12)


def test_forward_ad_rank_deficient_values(device):
    # Repeated zero singular values: S's tangent is still finite (only U's and V's divide by S_j^2 - S_i^2).
    A = (torch.randn(6, 2, dtype=torch.float64) @ torch.randn(2, 5, dtype=torch.float64)).to(device)
    dA = torch.randn_like(A)
    _, t = torch.func.jvp(torch_jsvd.svdvals, (A,), (dA,))
    _, t_ref = torch.func.jvp(torch.linalg.svdvals, (A,), (dA,))
    assert torch.isfinite(t).all()
    torch.testing.assert_close(t[:2], t_ref[:2], rtol=1e-9, atol=1e-9)


def test_lowrank_composes(device):
    # svd_lowrank and svd_truncated call torch_jsvd.svd: their S carry the tangents and gradients of the
    # exact SVD where q covers the rank (q = n, so the range finder's basis spans A's columns).
    A = torch.randn(20, 8, dtype=torch.float64, device=device)
    dA = torch.randn_like(A)
    _, ref = torch.func.jvp(torch.linalg.svdvals, (A,), (dA,))
    for f in (lambda x: torch_jsvd.svd_lowrank(x, q=8, niter=2)[1], lambda x: torch_jsvd.svd_truncated(x, 8)[1]):
        _, t = torch.func.jvp(f, (A,), (dA,))
        torch.testing.assert_close(t, ref, rtol=1e-8, atol=1e-8)
        g = torch.func.grad(lambda x: f(x).sum())(A)
        torch.testing.assert_close(g, torch.func.grad(lambda x: torch.linalg.svdvals(x).sum())(A), rtol=1e-8, atol=1e-8)


def test_lowrank_under_vmap(device):
    # svd_lowrank's CholeskyQR fallback branches on the data, which vmap cannot: Householder bases there.
    B = torch.randn(6, 30, 10, dtype=torch.float64, device=device)
    for randomness in ("different", "same"):
        S = torch.func.vmap(lambda x: torch_jsvd.svd_lowrank(x, q=10, niter=2)[1], randomness=randomness)(B)
        torch.testing.assert_close(S, torch.linalg.svdvals(B), rtol=1e-10, atol=1e-10)


@given(m=st.integers(1, 9), n=st.integers(1, 9), batch=st.sampled_from([(), (2,), (2, 3)]),
       full=st.booleans(), seed=st.integers(0, 2**31 - 1))
@settings(max_examples=40, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
def test_forward_ad_property(m, n, batch, full, seed):
    # Random shapes (CPU, float64; distinct singular values almost surely): the tangents of S and of the
    # sign-invariant products are torch.linalg.svd's.
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(*batch, m, n, generator=g, dtype=torch.float64)
    dA = torch.randn(*batch, m, n, generator=g, dtype=torch.float64)
    ours = torch.func.jvp(lambda x: _invariants(*torch_jsvd.svd(x, full)), (A,), (dA,))[1]
    ref = torch.func.jvp(lambda x: _invariants(*torch.linalg.svd(x, full_matrices=full)), (A,), (dA,))[1]
    _close(ours, ref, tol=1e-7)


def test_compiled_transforms_fall_back_to_eager(device):
    # torch.compile around torch.func.grad / vmap of torch_jsvd: the grad's frame falls back to eager at
    # the op (a graph break; fullgraph=True would raise), with the eager result.
    torch._dynamo.reset()
    A = torch.randn(4, 3, dtype=torch.float64, device=device)
    g = torch.compile(lambda A: torch.func.grad(lambda x: torch_jsvd.svdvals(x).sum())(A))(A)
    torch.testing.assert_close(g, torch.func.grad(lambda x: torch.linalg.svdvals(x).sum())(A))
    B = torch.randn(5, 4, 3, dtype=torch.float64, device=device)
    torch.testing.assert_close(torch.compile(torch.func.vmap(torch_jsvd.svdvals))(B), torch.linalg.svdvals(B))


def test_second_order_transforms(device):
    # Nested transforms, each form (the values-only ones recompute U and V inside the derivative):
    # reverse over reverse and forward over reverse (torch.func.hessian) match torch's; forward over
    # forward raises, since torch.func would treat the Function's jvp as a constant there (silently wrong).
    A = torch.randn(4, 3, dtype=torch.float64, device=device)
    loss = (lambda svdvals: lambda x: (svdvals(x) ** 3).sum())
    ref = loss(torch.linalg.svdvals)
    forms = [torch_jsvd.svdvals, lambda x: torch_jsvd.svd(x, False)[1],
             lambda x: torch_jsvd.svd_ex(x, compute_uv=False)[1]]
    nested = {"grad(grad)": lambda f: lambda x: torch.func.grad(lambda y: torch.func.grad(f)(y).sum())(x),
              "jacrev(jacrev)": lambda f: torch.func.jacrev(torch.func.jacrev(f)),
              "hessian": torch.func.hessian,
              "jacrev(jacfwd)": lambda f: torch.func.jacrev(torch.func.jacfwd(f))}
    for form in forms:
        for name, T in nested.items():
            torch.testing.assert_close(T(loss(form))(A), T(ref)(A), rtol=1e-8, atol=1e-8, msg=name)
        with pytest.raises(NotImplementedError, match="nested forward-mode"):
            torch.func.jacfwd(torch.func.jacfwd(loss(form)))(A)


@pytest.mark.parametrize("kind", ["graded", "rank_deficient", "nan"])
def test_structured_inputs(device, kind):
    # The differentiated paths on non-Gaussian inputs. Graded columns (1 .. 1e-6, distinct singular values):
    # tangents and gradients as torch's, finite. Rank-deficient (rank 2 of 6x5): S's tangent and gradient
    # stay finite (only U's and V's divide by S_j^2 - S_i^2). NaN: every differentiated form raises, as the
    # undifferentiated one does, rather than returning a tangent or a gradient.
    g = torch.Generator().manual_seed(5)
    if kind == "graded":
        A = torch.randn(6, 5, generator=g, dtype=torch.float64) * torch.logspace(0, -6, 5, dtype=torch.float64)
    else:
        A = torch.randn(6, 2, generator=g, dtype=torch.float64) @ torch.randn(2, 5, generator=g, dtype=torch.float64)
        if kind == "nan":
            A[2, 3] = float("nan")
    A, dA = A.to(device), torch.randn(6, 5, generator=g, dtype=torch.float64).to(device)
    if kind == "nan":
        for f in (lambda: torch.func.jvp(torch_jsvd.svdvals, (A,), (dA,)),
                  lambda: torch.func.grad(lambda x: torch_jsvd.svd(x)[1].sum())(A),
                  lambda: torch.func.vmap(torch_jsvd.svdvals)(A[None])):
            with pytest.raises(torch.linalg.LinAlgError, match="NaN"):
                f()
        return
    k = 5 if kind == "graded" else 2
    _, t = torch.func.jvp(torch_jsvd.svdvals, (A,), (dA,))
    _, t_ref = torch.func.jvp(torch.linalg.svdvals, (A,), (dA,))
    gr = torch.func.grad(lambda x: torch_jsvd.svdvals(x)[:k].sum())(A)
    gr_ref = torch.func.grad(lambda x: torch.linalg.svdvals(x)[:k].sum())(A)
    assert torch.isfinite(t).all() and torch.isfinite(gr).all()
    torch.testing.assert_close(t[:k], t_ref[:k], rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(gr, gr_ref, rtol=1e-9, atol=1e-9)
    if kind == "graded":
        ours = torch.func.jvp(lambda x: _invariants(*torch_jsvd.svd(x, False)), (A,), (dA,))[1]
        ref = torch.func.jvp(lambda x: _invariants(*torch.linalg.svd(x, full_matrices=False)), (A,), (dA,))[1]
        _close(ours, ref, tol=1e-6)
