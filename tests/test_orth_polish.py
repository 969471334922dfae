"""float32 U and V polished to float32's rounding on CUDA (kernels/engine/orth_polish.h): one
Newton-Schulz step in float64 after the Jacobi, so that ||Q^T Q - I||_F is about sqrt(n) eps (cuSOLVER's
gesvda's level) rather than the Jacobi's n eps, S untouched. Skipped without a CUDA device.
"""

import math
import textwrap

import pytest
import torch

import torch_jsvd
from jsvd_testutils import assert_valid_svd, bound, eps_of, orthogonality_error, rel_reconstruction_error, run_child

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

F32 = torch.float32


def polished_bound(k):
    """What the polish leaves: float32's rounding of orthonormal columns, about sqrt(k) eps (H100,
    stop 56: 0.3-0.4 sqrt(k) eps from 16 to 128 columns)."""
    return 1.5 * math.sqrt(k) * eps_of(F32)


def _orth(U, Vh):
    return orthogonality_error(U).max().item(), orthogonality_error(Vh, rows=True).max().item()


# One shape for each way a float32 batch is solved: warp level (16², 32x8 wide), whole matrices in
# shared memory (64², 128²), the QR path (300x77), block pairs or the GEMM path of the polish itself
# (8x256², whose factors exceed one block: batched GEMMs), wide ones (200x300).
@pytest.mark.parametrize("b,m,n", [(200, 16, 16), (64, 32, 8), (40, 64, 64), (40, 128, 128), (8, 300, 77),
                                   (8, 256, 256), (4, 200, 300)], ids=str)
def test_factors_polished(b, m, n):
    g = torch.Generator().manual_seed(m * n)
    A = torch.randn(b, m, n, generator=g)
    A[1] *= torch.logspace(0, -3, n)  # graded columns
    A[2, :, 1] = A[2, :, 0]  # rank deficient
    A = A.cuda()
    U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
    assert_valid_svd(A, U, S, Vh, False)
    k = min(m, n)
    ou, ov = _orth(U, Vh)
    assert ou <= polished_bound(k) and ov <= polished_bound(k), (ou, ov, polished_bound(k))


def test_without_polish_less_orthogonal_same_s(tmp_path):
    """JSVD_POLISH=0 (a child process): the Jacobi's own factors exceed the polished bound at 128
    columns (so the test above can fail), S is the same to the bit, and the residual no smaller by more
    than rounding."""
    A = torch.randn(40, 128, 128, generator=torch.Generator().manual_seed(1)).cuda()
    U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
    rec = rel_reconstruction_error(A, U, S, Vh).max().item()
    out = run_child(f"""
        import torch, torch_jsvd
        from jsvd_testutils import orthogonality_error, rel_reconstruction_error
        A = torch.randn(40, 128, 128, generator=torch.Generator().manual_seed(1)).cuda()
        U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
        torch.save(S.cpu(), r"{tmp_path / 'S0.pt'}")
        print(orthogonality_error(U).max().item(), orthogonality_error(Vh, rows=True).max().item(),
              rel_reconstruction_error(A, U, S, Vh).max().item())
    """, JSVD_POLISH="0")
    ou0, ov0, rec0 = map(float, out.split())
    assert max(ou0, ov0) > polished_bound(128)
    assert max(_orth(U, Vh)) < max(ou0, ov0) / 3
    assert rec <= rec0 + 1e-7
    assert torch.equal(S.cpu(), torch.load(tmp_path / "S0.pt"))


def test_full_matrices():
    """U's completed columns stay orthogonal to the polished ones."""
    A = torch.randn(20, 100, 40, generator=torch.Generator().manual_seed(2)).cuda()
    U, S, Vh = torch_jsvd.svd(A, full_matrices=True)
    assert_valid_svd(A, U, S, Vh, True)
    assert orthogonality_error(U).max().item() <= polished_bound(100)
    assert orthogonality_error(U[..., :40]).max().item() <= polished_bound(40)


def test_lists():
    """svd_varlen: members one block holds are polished; a member too large for it (300²) keeps the
    Jacobi's orthogonality; members of fewer than 8 columns are not touched (and are fine)."""
    g = torch.Generator().manual_seed(3)
    shapes = [(16, 16), (40, 12), (12, 40), (128, 100), (300, 300), (5, 3), (64, 64)]
    As = [torch.randn(m, n, generator=g).cuda() for m, n in shapes]
    Us, Ss, Vhs = torch_jsvd.svd_varlen(As)
    for (m, n), A, U, S, Vh in zip(shapes, As, Us, Ss, Vhs):
        assert_valid_svd(A, U, S, Vh, False)
        k = min(m, n)
        if k >= 8 and k < 300:
            assert max(_orth(U, Vh)) <= polished_bound(k), (m, n, _orth(U, Vh))


def test_not_finite_or_not_converged_left_alone():
    """A member with NaN keeps its NaN factors and info -2; max_sweeps=1 leaves members unconverged
    (info -1), whose factors the polish must not spoil: finite, and no less orthogonal than the
    Jacobi left them (a child with JSVD_POLISH=0)."""
    A = torch.randn(6, 64, 64, generator=torch.Generator().manual_seed(4)).cuda()
    A[3, 5, 7] = float("nan")
    U, S, Vh, info = torch_jsvd.svd_ex(A, full_matrices=False, max_sweeps=1)
    assert info[3].item() == -2 and torch.isnan(U[3]).all()
    ok = [i for i in range(6) if i != 3]
    assert (info[ok] == -1).all()
    assert torch.isfinite(U[ok]).all() and torch.isfinite(Vh[ok]).all()
    out = run_child("""
        import torch, torch_jsvd
        from jsvd_testutils import orthogonality_error
        A = torch.randn(6, 64, 64, generator=torch.Generator().manual_seed(4)).cuda()
        A[3, 5, 7] = float("nan")
        U, S, Vh, info = torch_jsvd.svd_ex(A, full_matrices=False, max_sweeps=1)
        ok = [i for i in range(6) if i != 3]
        print(orthogonality_error(U[ok]).max().item(), orthogonality_error(Vh[ok], rows=True).max().item())
    """, JSVD_POLISH="0")
    ou0, ov0 = map(float, out.split())
    ou, ov = (orthogonality_error(U[ok]).max().item(), orthogonality_error(Vh[ok], rows=True).max().item())
    assert ou <= ou0 * 1.01 + 1e-7 and ov <= ov0 * 1.01 + 1e-7


_WARP_CASE = """
    import torch, torch_jsvd
    g = torch.Generator().manual_seed(5)
    # warp-sized factors (<= 64 x 32), U by a block beside V by a warp (100 x 32), and a list with both
    uni = [torch.randn(b, m, n, generator=g).cuda() for b, m, n in [(301, 16, 16), (97, 32, 8), (50, 64, 32),
                                                                   (30, 100, 32), (20, 8, 40)]]
    lst = [torch.randn(m, n, generator=g).cuda() for m, n in [(100, 20), (40, 12), (12, 40), (64, 64), (9, 9),
                                                              (200, 40), (64, 32), (5, 3)]]
    out = [torch_jsvd.svd(A, full_matrices=False) for A in uni] + [torch_jsvd.svd_varlen(lst)]
    torch.save([[t.cpu() if torch.is_tensor(t) else [x.cpu() for x in t] for t in r] for r in out], PATH)
"""


@pytest.mark.parametrize("warp", ["1", "2"])
def test_warp_polish_same_as_block(tmp_path, warp):
    """A warp a factor (kPolishWarpMax*) sums every entry of E and of the update in the block kernel's
    order: U, S and Vh equal to the bit with JSVD_POLISH_WARP=0 (children), uniform batches and a list
    whose factors go to both kernels, by the rule (1: the 8-16-column factors) and wherever a factor fits
    a warp (2: the 17-32-column ones too); and polished (JSVD_POLISH=0 gives other factors)."""
    res = {}
    for name, env in [("warp", {"JSVD_POLISH_WARP": warp}), ("block", {"JSVD_POLISH_WARP": "0"}),
                      ("none", {"JSVD_POLISH": "0"})]:
        path = tmp_path / f"{name}.pt"
        run_child(f"PATH = r'{path}'\n" + textwrap.dedent(_WARP_CASE), **env)
        res[name] = torch.load(path)
    flat = {k: [t for r in v for x in r for t in (x if isinstance(x, list) else [x])] for k, v in res.items()}
    assert all(torch.equal(a, b) for a, b in zip(flat["warp"], flat["block"]))
    assert not all(torch.equal(a, b) for a, b in zip(flat["warp"], flat["none"]))


@pytest.mark.parametrize("full_matrices", [False, True])
def test_warp_polish_rank_deficient(tmp_path, full_matrices):
    """The warp level's uniform float32 batch, its factors polished a warp each after U's completion: 37 x
    24 x 16 (two matrices a warp of the Jacobi, the last warp half empty) with a zero member, one of rank 3
    and one at 1e-30: valid outputs, U and V polished (the completed columns too), S equal to the bit to
    the block kernel's polish (JSVD_POLISH_WARP=0, a child), and the Gaussian members' U and Vh too where
    full_matrices leaves nothing to complete."""
    g = torch.Generator().manual_seed(37)
    A = torch.randn(37, 24, 16, generator=g)
    A[1] = 0
    A[2] = torch.randn(24, 3, generator=g) @ torch.randn(3, 16, generator=g)
    A[3] *= 1e-30
    torch.save(A, tmp_path / "A.pt")
    code = f"""
        import torch, torch_jsvd
        A = torch.load({str(tmp_path / "A.pt")!r}).cuda()
        torch.save([t.cpu() for t in torch_jsvd.svd(A, full_matrices={full_matrices})], {str(tmp_path / "r.pt")!r})
    """
    run_child(code, JSVD_POLISH_WARP="0")
    U0, S0, Vh0 = torch.load(tmp_path / "r.pt")
    U, S, Vh = (t.cpu() for t in torch_jsvd.svd(A.cuda(), full_matrices=full_matrices))
    assert_valid_svd(A, U, S, Vh, full_matrices)
    ou, ov = _orth(U, Vh)
    assert ou <= polished_bound(24 if full_matrices else 16) and ov <= polished_bound(16), (ou, ov)
    assert torch.equal(S, S0)
    gaussian = list(range(4, 37))
    if not full_matrices:
        assert torch.equal(U[gaussian], U0[gaussian]) and torch.equal(Vh[gaussian], Vh0[gaussian])
