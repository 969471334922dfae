"""torch_jsvd.svd_varlen: a list (or nested tensor) of matrices of different shapes in one call."""

import pytest
import torch

import torch_jsvd
from jsvd_testutils import assert_valid_svd, bound

SHAPES = [(5, 3), (3, 5), (4, 4), (1, 1), (17, 2), (2, 17), (0, 3), (3, 0), (9, 9), (30, 20)]


def _mats(device, dtype=torch.float64, shapes=SHAPES):
    return [torch.randn(s, dtype=dtype, device=device) for s in shapes]


@pytest.mark.parametrize("full_matrices", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_list(device, full_matrices, dtype):
    As = _mats(device, dtype)
    U, S, Vh = torch_jsvd.svd_varlen(As, full_matrices)
    assert len(U) == len(S) == len(Vh) == len(As)
    for A, u, s, vh in zip(As, U, S, Vh):
        assert_valid_svd(A, u, s, vh, full_matrices)
        # Same answer as the uniform-batch op on that matrix alone.
        u1, s1, vh1 = torch_jsvd.svd(A, full_matrices)
        smax = s1.max().item() if s1.numel() else 1.0
        torch.testing.assert_close(s, s1, rtol=0, atol=10 * torch.finfo(dtype).eps * max(smax, 1.0))


def test_every_matrix_of_a_random_list_accurate(device):
    # 60 random shapes up to 89 x 89 and a few larger (on CUDA: every level, several in one launch)
    shapes = [(int(m), int(n)) for m, n in torch.randint(1, 90, (60, 2))] + [(300, 20), (20, 300), (256, 256)]
    for dtype in (torch.float32, torch.float64):
        As = [torch.randn(m, n, dtype=dtype, device=device) for m, n in shapes]
        Us, Ss, Vhs = torch_jsvd.svd_varlen(As)
        for A, U, S, Vh in zip(As, Us, Ss, Vhs):
            assert_valid_svd(A, U, S, Vh, full_matrices=False)
            ref = torch.linalg.svdvals(A.double())
            assert (S.double() - ref).abs().max() <= bound(*A.shape, dtype) * ref[0]


def test_mixed_orientation_and_layouts(device):
    As = [torch.randn(6, 9, device=device).mT, torch.randn(4, 7, device=device)[:, ::2],
          torch.randn(1, 5, device=device).expand(3, 5), torch.randn(8, 3, device=device)]
    U, S, Vh = torch_jsvd.svd_varlen(As, full_matrices=True)
    for A, u, s, vh in zip(As, U, S, Vh):
        assert_valid_svd(A, u, s, vh, True)


def test_outputs_do_not_alias(device):
    U, S, Vh = torch_jsvd.svd_varlen(_mats(device, shapes=[(4, 3), (3, 4), (5, 5)]))
    ptrs = [t.untyped_storage().data_ptr() for t in (*U, *S, *Vh)]
    assert len(set(ptrs)) == len(ptrs)


def test_compute_uv_false(device):
    As = _mats(device)
    U, S, Vh = torch_jsvd.svd_varlen(As, compute_uv=False)
    assert all(u.shape == (0,) for u in U) and all(v.shape == (0,) for v in Vh)
    for A, s in zip(As, S):
        torch.testing.assert_close(s, torch_jsvd.svdvals(A), rtol=0, atol=1e-13 * max(s.max().item(), 1.0)
                                   if s.numel() else 0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half(device, dtype):
    As = _mats(device, dtype, shapes=[(5, 3), (3, 6)])
    U, S, Vh = torch_jsvd.svd_varlen(As)
    for A, u, s, vh in zip(As, U, S, Vh):
        assert u.dtype == s.dtype == vh.dtype == dtype
        assert_valid_svd(A, u, s, vh, False)


def test_nested(device):
    shapes = [(5, 3), (3, 5), (4, 4)]
    As = _mats(device, shapes=shapes)
    nt = torch.nested.nested_tensor(As, layout=torch.strided)
    U, S, Vh = torch_jsvd.svd_varlen(nt, full_matrices=True)
    assert U.is_nested and S.is_nested and Vh.is_nested
    Ul, Sl, Vhl = torch_jsvd.svd_varlen(As, full_matrices=True)
    for a, b in zip(U.unbind(), Ul):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    for A, u, s, vh in zip(As, U.unbind(), S.unbind(), Vh.unbind()):
        assert_valid_svd(A, u, s, vh, True, check_strides=False)


def test_matches_batched_op(device):
    # A uniform batch through svd_varlen gives the batched op's factors (up to the sign of each pair).
    A = torch.randn(6, 7, 5, dtype=torch.float64, device=device)
    U, S, Vh = (torch.stack(t) for t in torch_jsvd.svd_varlen(list(A.unbind(0)), full_matrices=False))
    Ub, Sb, Vhb = torch_jsvd.svd(A, full_matrices=False)
    tol = 1e-12
    torch.testing.assert_close(S, Sb, rtol=0, atol=tol * Sb.max().item())
    sign = torch.sign((U * Ub).sum(-2))
    torch.testing.assert_close(U * sign.unsqueeze(-2), Ub, rtol=0, atol=tol)
    torch.testing.assert_close(Vh * sign.unsqueeze(-1), Vhb, rtol=0, atol=tol)


def test_raises_like_svd(device):
    bad = torch.randn(4, 4, device=device)
    bad[0, 0] = float("nan")
    with pytest.raises(torch.linalg.LinAlgError, match="NaN or Inf"):
        torch_jsvd.svd_varlen([torch.randn(3, 3, device=device), bad])
    with pytest.raises(torch.linalg.LinAlgError, match="max_sweeps"):
        torch_jsvd.svd_varlen([torch.randn(48, 48, dtype=torch.float64, device=device)], max_sweeps=1)
