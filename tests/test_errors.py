"""Bad inputs give clear errors; unregistered backends give PyTorch's normal dispatcher error."""

import pytest
import torch

import torch_jsvd


@pytest.mark.parametrize("fn", [torch_jsvd.svd, torch_jsvd.svd_ex, torch_jsvd.svdvals,
                                lambda A: torch.ops.jsvd.svd(A), lambda A: torch_jsvd.svd(A.to("meta"))])
def test_bad_inputs(device, fn):
    with pytest.raises(RuntimeError, match="expected A to have at least 2 dimensions"):
        fn(torch.randn(3, device=device))
    with pytest.raises(RuntimeError, match="expected A to have at least 2 dimensions"):
        fn(torch.tensor(1.0, device=device))
    for dt in (torch.int32, torch.int64, torch.uint8, torch.bool):
        with pytest.raises(RuntimeError, match="floating point"):
            fn(torch.ones(3, 3, dtype=dt, device=device))
    for dt in (torch.complex64, torch.complex128):
        with pytest.raises(RuntimeError, match="complex inputs are not yet supported"):
            fn(torch.ones(3, 3, dtype=dt, device=device))


def test_bad_options(device):
    A = torch.randn(3, 3, device=device)
    with pytest.raises(RuntimeError, match="tol must be a positive"):
        torch_jsvd.svd(A, tol=0.0)
    with pytest.raises(RuntimeError, match="tol must be a positive"):
        torch_jsvd.svd_ex(A, tol=float("nan"))
    with pytest.raises(RuntimeError, match="max_sweeps must be >= 1"):
        torch_jsvd.svdvals(A, max_sweeps=0)


def test_varlen_bad_inputs(device):
    with pytest.raises(ValueError, match="non-empty list"):
        torch_jsvd.svd_varlen([])
    with pytest.raises(RuntimeError, match=r"As\[1\] to be a 2-D matrix"):
        torch_jsvd.svd_varlen([torch.randn(3, 3, device=device), torch.randn(2, 3, 3, device=device)])
    with pytest.raises(RuntimeError, match=r"As\[2\] has dtype Double and As\[0\] has dtype Float"):
        torch_jsvd.svd_varlen([torch.randn(3, 3, device=device)] * 2 +
                              [torch.randn(3, 3, dtype=torch.float64, device=device)])
    with pytest.raises(RuntimeError, match=r"As\[0\] to be a floating point tensor"):
        torch_jsvd.svd_varlen([torch.ones(3, 3, dtype=torch.int32, device=device)])
    with pytest.raises(RuntimeError, match="complex inputs are not yet supported"):
        torch_jsvd.svd_varlen([torch.ones(3, 3, dtype=torch.complex64, device=device)])
    with pytest.raises(TypeError, match="list or tuple"):
        torch_jsvd.svd_varlen(torch.randn(2, 3, 3, device=device))
    with pytest.raises(TypeError, match="list or tuple of matrices or a torch.nested tensor, but got int"):
        torch_jsvd.svd_varlen(5)
    # (a member that is not a tensor: the direct call's check, and the autograd path's)
    for As, kind in (([torch.randn(3, 3, device=device), "x"], "str"),
                     ((torch.randn(3, 3, device=device, requires_grad=True), 3), "int")):
        with pytest.raises(TypeError, match=rf"expected As to be a list of tensors, but As\[1\] is a {kind}"):
            torch_jsvd.svd_varlen(As)


def test_varlen_mixed_devices(device):
    # The other device is meta on a CPU-only machine (it has fake kernels, so
    # dispatch can land on either backend); both report the same error.
    other = "cpu" if device != "cpu" else "meta"
    with pytest.raises(RuntimeError, match=r"all matrices must be on the same device, but As\[1\]"):
        torch_jsvd.svd_varlen([torch.randn(3, 3, device=device), torch.randn(3, 3, device=other)])
    with pytest.raises(RuntimeError, match=r"all matrices must be on the same device, but As\[1\]"):
        torch_jsvd.svd_varlen([torch.randn(3, 3, device=other), torch.randn(3, 3, device=device)])


@pytest.mark.parametrize("op,args", [("svd", ()), ("svd_ex", ()), ("svdvals", ()),
                                     ("svd_varlen", None)])
def test_unregistered_backend(op, args):
    # Sparse tensors dispatch to SparseCPU, for which jsvd registers nothing:
    # the dispatcher's own error, not a fake result.
    A = torch.randn(4, 3).to_sparse()
    call = (lambda: getattr(torch.ops.jsvd, op)([A])) if args is None else (lambda: getattr(torch.ops.jsvd, op)(A))
    with pytest.raises(NotImplementedError, match=f"Could not run 'jsvd::{op}' with arguments from the 'SparseCPU' "
                                                  "backend"):
        call()
    if op == "svd":
        with pytest.raises(NotImplementedError, match="Could not run 'jsvd::svd'"):
            torch_jsvd.svd(A)


def test_meta_is_shape_only():
    U, S, Vh, info = torch_jsvd.svd_ex(torch.empty(2, 5, 3, device="meta"))
    assert (U.shape, S.shape, Vh.shape, info.shape) == ((2, 5, 5), (2, 3), (2, 3, 3), (2,))
    assert U.device.type == "meta" and info.dtype == torch.int32
