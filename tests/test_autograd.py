"""Backward of torch_jsvd.svd / svd_ex / svdvals / svd_varlen: torch's svd_backward formulas."""

import pytest
import torch

import torch_jsvd


def _k(S):
    return S.shape[-1]


# Gauge-invariant losses (unchanged when a pair (u_i, v_i) flips sign), so the
# gradient is well defined and must equal torch.linalg.svd's.
LOSSES = {
    "reconstruction": lambda U, S, Vh: ((U[..., :_k(S)] * S.unsqueeze(-2)) @ Vh[..., :_k(S), :]).sin().sum(),
    "S_only": lambda U, S, Vh: (S ** 3).sum(),
    "UUt": lambda U, S, Vh: (U[..., :_k(S)] @ U[..., :_k(S)].mT).cos().sum(),
    "VtV": lambda U, S, Vh: (Vh[..., :_k(S), :].mT @ Vh[..., :_k(S), :]).pow(2).sum(),
    "abs_U_Vh": lambda U, S, Vh: (U[..., :_k(S)].abs() * 2).sum() + Vh[..., :_k(S), :].abs().pow(3).sum(),
    "mixed": lambda U, S, Vh: ((U[..., :_k(S)] * S.sqrt().unsqueeze(-2)).abs().sum() + S.log().sum()),
    # The full bases: only the first min(m, n) columns/rows get gradient (as in torch).
    "full_basis_abs": lambda U, S, Vh: U.abs().sum() + Vh.abs().sum(),
}
SHAPES = [(5, 3), (3, 5), (4, 4), (2, 6, 4), (2, 3, 4, 7)]


@pytest.mark.parametrize("loss", LOSSES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("full_matrices", [True, False])
def test_grad_matches_torch(device, loss, shape, full_matrices):
    f = LOSSES[loss]
    A = torch.randn(shape, dtype=torch.float64, device=device, requires_grad=True)
    g, = torch.autograd.grad(f(*torch_jsvd.svd(A, full_matrices)), A)
    g_ref, = torch.autograd.grad(f(*torch.linalg.svd(A, full_matrices=full_matrices)), A)
    torch.testing.assert_close(g, g_ref, rtol=1e-9, atol=1e-9)


def test_svd_ex_and_svdvals_grads(device):
    A = torch.randn(3, 6, 4, dtype=torch.float64, device=device, requires_grad=True)
    g_ref, = torch.autograd.grad(torch.linalg.svdvals(A).pow(2).sum(), A)
    for S in (torch_jsvd.svdvals(A), torch_jsvd.svd_ex(A).S, torch_jsvd.svd_ex(A, compute_uv=False).S,
              torch.ops.jsvd.svdvals(A)):
        g, = torch.autograd.grad(S.pow(2).sum(), A)
        torch.testing.assert_close(g, g_ref, rtol=1e-10, atol=1e-10)


def test_svdvals_grad_rank_deficient(device):
    # Repeated zero singular values: an S-only loss still has a finite gradient,
    # which needs the U/Vh grads to be treated as absent (not as zeros / 0).
    A = (torch.randn(6, 2, dtype=torch.float64) @ torch.randn(2, 5, dtype=torch.float64)).to(device)
    A.requires_grad_()
    for fn in (lambda A: torch_jsvd.svd(A).S, torch_jsvd.svdvals):
        g, = torch.autograd.grad(fn(A)[:2].sum(), A)
        g_ref, = torch.autograd.grad(torch.linalg.svdvals(A)[:2].sum(), A)
        assert torch.isfinite(g).all()
        torch.testing.assert_close(g, g_ref, rtol=1e-9, atol=1e-9)


def test_info_not_differentiable(device):
    A = torch.randn(4, 3, device=device, requires_grad=True)
    r = torch_jsvd.svd_ex(A)
    assert not r.info.requires_grad and r.U.requires_grad


@pytest.mark.parametrize("shape", [(4, 3), (3, 5), (4, 4), (2, 3, 2), (2, 6, 4)], ids=str)
def test_gradcheck(device, shape):
    A = torch.randn(shape, dtype=torch.float64, device=device, requires_grad=True)

    def factors(A):
        U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
        return U @ torch.diag_embed(S) @ Vh, S, U @ U.mT

    def recon(A):
        U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
        return (U * S.unsqueeze(-2)) @ Vh

    def projectors(A):
        U, S, Vh = torch_jsvd.svd(A, full_matrices=True)
        k = S.shape[-1]
        return U[..., :k] @ U[..., :k].mT, Vh[..., :k, :].mT @ Vh[..., :k, :], U[..., :k].abs(), Vh[..., :k, :].abs()

    assert torch.autograd.gradcheck(factors, (A,))
    assert torch.autograd.gradcheck(recon, (A,))
    assert torch.autograd.gradcheck(projectors, (A,))
    assert torch.autograd.gradcheck(torch_jsvd.svdvals, (A,))
    assert torch.autograd.gradcheck(lambda A: torch_jsvd.svd_ex(A, compute_uv=False).S, (A,))
    assert torch.autograd.gradcheck(lambda A: torch.ops.jsvd.svdvals(A), (A,))


def test_gradcheck_varlen(device):
    As = [torch.randn(s, dtype=torch.float64, device=device, requires_grad=True) for s in [(4, 3), (2, 5), (3, 3)]]

    def f(*As):
        U, S, Vh = torch_jsvd.svd_varlen(list(As))
        return [(u * s.unsqueeze(-2)) @ vh for u, s, vh in zip(U, S, Vh)] + [u.abs() for u in U]

    assert torch.autograd.gradcheck(f, tuple(As))
    assert torch.autograd.gradcheck(lambda *As: torch_jsvd.svd_varlen(list(As), compute_uv=False).S, tuple(As))


def test_half_backward(device):
    A = torch.randn(5, 3, device=device).to(torch.bfloat16).requires_grad_()
    g, = torch.autograd.grad(torch_jsvd.svdvals(A).sum(), A)
    assert g.dtype == torch.bfloat16 and torch.isfinite(g).all()


@pytest.mark.parametrize("shape", [(4, 3), (3, 5), (2, 4, 4)], ids=str)
def test_second_derivatives(device, shape):
    # Double backward (create_graph=True). The values-only forms recompute U and V in backward; until
    # stop 77 they did so under no_grad, and their second derivatives silently missed U's and V's terms.
    A = torch.randn(shape, dtype=torch.float64, device=device, requires_grad=True)
    for f in (torch_jsvd.svdvals, torch.ops.jsvd.svdvals, lambda A: torch_jsvd.svd_ex(A, compute_uv=False).S,
              lambda A: torch_jsvd.svd(A, full_matrices=False).S,
              lambda A: torch_jsvd.svd_varlen([A.reshape(-1, A.shape[-1])], compute_uv=False).S[0]):
        assert torch.autograd.gradgradcheck(f, (A,))
