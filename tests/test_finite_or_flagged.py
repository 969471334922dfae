"""A result is finite and converged, or flagged: info < 0 from svd_ex, LinAlgError from svd, svdvals and
svd_varlen. Never NaN or Inf returned with info >= 0."""

import pytest
import torch

import torch_jsvd
from jsvd_testutils import assert_valid_svd, on_devices, subnormal_factor

DTYPES = [torch.float32, torch.float64]


# On CUDA: the warp level with 3 matrices in one warp, shared memory, and (CUDA alone) blocked and Gram EVD.
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize(*on_devices("shape,dtype", [((3, 5, 4), torch.float32), ((3, 16, 16), torch.float64),
                                                     ((3, 100, 100), torch.float64)],
                                     cuda_only=[((2, 512, 512), torch.float64), ((2, 2048, 16), torch.float64)]))
def test_non_finite_input_is_flagged(device, shape, dtype, bad):
    A = torch.randn(shape, dtype=dtype, device=device)
    A[1, 2, 3] = bad
    U, S, Vh, info = torch_jsvd.svd_ex(A)
    assert info.tolist()[1] == torch_jsvd.INFO_NON_FINITE
    assert torch.isnan(S[1]).all()
    for i in range(0, shape[0], 2):  # the others are unaffected
        assert info[i] >= 0
        assert_valid_svd(A[i], U[i], S[i], Vh[i], True)
    for fn in (torch_jsvd.svd, torch_jsvd.svdvals):
        with pytest.raises(torch.linalg.LinAlgError, match="NaN or Inf"):
            fn(A)


# svd reads the least info on the host (CUDA: one launch of up to 64 blocks and a pinned read,
# kernels/engine/info_min.cu): the flagged matrix first, last and inside, in batches that span one
# block, several, and more entries than the grid covers in one pass.
@pytest.mark.parametrize("batch", [1, 7, 9000, 600_000])
def test_flag_found_anywhere_in_the_batch(device, batch):
    g = torch.Generator().manual_seed(batch)
    A = torch.randn(batch, 2, 2, generator=g).to(device)
    assert torch_jsvd.svdvals(A).shape == (batch, 2)
    for at in sorted({0, batch // 3, batch - 1}):
        B = A.clone()
        B[at, 1, 0] = float("nan")
        with pytest.raises(torch.linalg.LinAlgError, match="NaN or Inf"):
            torch_jsvd.svd(B)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 3), (40, 24), (24, 40), (130, 130)], ids=str)
def test_singular_values_beyond_range_are_flagged(device, dtype, shape):
    # entries at the overflow limit: sigma_max > finfo.max, not representable. Matrix 1 of the batch
    # is fine and must stay so.
    big = torch.finfo(dtype).max
    A = torch.empty(2, *shape, dtype=dtype).uniform_(0.5, 1.0).to(device)
    A[0] *= big
    U, S, Vh, info = torch_jsvd.svd_ex(A)
    assert info[0].item() == torch_jsvd.INFO_NON_FINITE_RESULT
    assert info[1].item() >= 0
    assert_valid_svd(A[1], U[1], S[1], Vh[1], True)
    for fn in (torch_jsvd.svd, torch_jsvd.svdvals):
        with pytest.raises(torch.linalg.LinAlgError, match="range of the dtype"):
            fn(A)
    with pytest.raises(torch.linalg.LinAlgError, match="range of the dtype"):
        torch_jsvd.svd_varlen([A[1], A[0, :5]])
    assert torch_jsvd.svd_ex(A, compute_uv=False).info[0].item() == torch_jsvd.INFO_NON_FINITE_RESULT


@pytest.mark.parametrize("dtype,scale", [(torch.float32, 1e-40), (torch.float64, 1e-310),
                                         (torch.float32, 1e-30), (torch.float64, 1e-300),
                                         (torch.float32, 1e30), (torch.float64, 1e300)])
@pytest.mark.parametrize("shape", [(5, 5), (20, 12), (12, 20), (40, 40), (130, 130)], ids=str)
def test_tiny_and_huge_scales(device, dtype, scale, shape):
    # All-subnormal entries came back non-finite on the H100 (1 / max|a| overflowed): the engines
    # divide by max|a| instead.
    A0 = torch.randn(shape, dtype=torch.float64)
    A = (A0 * scale).to(dtype)
    U, S, Vh, info = torch_jsvd.svd_ex(A.to(device))
    assert info.item() >= 0
    assert torch.isfinite(S).all() and torch.isfinite(U).all() and torch.isfinite(Vh).all()
    ref = torch.linalg.svdvals(A.double() / scale) * scale
    k = min(shape)
    # S rounds to A's dtype: subnormal values carry their spacing's error, nothing else
    tol = 10 * max(shape) * torch.finfo(dtype).eps * ref[0] + k * torch.finfo(dtype).tiny * torch.finfo(dtype).eps
    assert ((S.cpu().double() - ref).abs() <= tol).all()
    assert_valid_svd(A.to(device), U, S, Vh, True, factor=subnormal_factor(A))


def test_rank_one_duplicated_rows_converge(device):
    # The smallest failing case of the robustness issue: three equal columns, two equal rows.
    # Noise columns used to shrink by ~eps a sweep without ever counting as orthogonal (info = -1).
    for dtype in DTYPES:
        A = torch.tensor([[-1.45, -1.45, -1.45], [-0.88, -0.88, -0.88], [-0.88, -0.88, -0.88]], dtype=dtype)
        U, S, Vh, info = torch_jsvd.svd_ex(A.to(device))
        assert 0 <= info.item() <= 4
        assert S[1:].abs().max().item() <= 3 * 3 * torch.finfo(dtype).eps * S[0].item()
        assert_valid_svd(A.to(device), U, S, Vh, True)
