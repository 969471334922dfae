"""torch_jsvd.svd, svd_ex, svdvals and svd_varlen (of a list) call their op's dispatcher handle from the
extension where nothing needs the Python op object (_ops._call_one, _C._varlen_below_autograd): the same
results, errors and dispatch as torch.ops.jsvd."""

import pytest
import torch
from torch.overrides import TorchFunctionMode

import torch_jsvd

SHAPES = [(4, 4), (2, 3, 5, 4), (3, 1, 6, 2), (5, 3), (1, 7, 9)]


def through_op(name, A, *args):
    with torch._C._AutoDispatchBelowAutograd():
        return getattr(torch.ops.jsvd, name).default(A, *args)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_same_as_the_op(device, shape, dtype):
    g = torch.Generator(device=device).manual_seed(7)
    A = torch.randn(*shape, device=device, dtype=dtype, generator=g)
    for full in (False, True):
        got = torch_jsvd.svd(A, full_matrices=full)
        want = through_op("svd", A, full, True, None, None)
        for x, y in zip(got, want):
            assert torch.equal(x, y) and x.stride() == y.stride() and x.dtype == y.dtype
        got = torch_jsvd.svd_ex(A, full_matrices=full, max_sweeps=3, tol=1e-3)
        want = through_op("svd_ex", A, full, True, 1e-3, 3)
        for x, y in zip(got, want):
            assert torch.equal(x, y) and x.stride() == y.stride()
    assert torch.equal(torch_jsvd.svdvals(A), through_op("svdvals", A, None, None))
    # (the strides torch.linalg.svd gives: U F-contiguous, Vh C-contiguous)
    U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
    assert U.mT.is_contiguous() and Vh.is_contiguous()


def test_varlen_same_as_the_op(device):
    g = torch.Generator(device=device).manual_seed(8)
    As = [torch.randn(m, n, device=device, generator=g) for m, n in [(4, 4), (5, 3), (2, 6), (1, 7), (0, 3), (3, 3)]]
    for full in (False, True):
        for uv in (True, False):
            got = torch_jsvd.svd_varlen(tuple(As), full_matrices=full, compute_uv=uv, max_sweeps=20)
            want = through_op("svd_varlen", As, full, uv, None, 20)
            for xs, ys in zip(got, want):
                assert type(xs) is list and len(xs) == len(ys) == len(As)
                for x, y in zip(xs, ys):
                    assert torch.equal(x, y) and x.stride() == y.stride() and x.dtype == y.dtype


def test_varlen_member_requiring_grad(device):
    """The direct call solves nothing and returns None where grad mode is on and a member requires grad (its
    own check, a member at a time), so that svd_varlen takes the autograd path; under no_grad it solves."""
    from torch_jsvd import _C

    g = torch.Generator(device=device).manual_seed(9)
    As = [torch.randn(m, n, device=device, dtype=torch.float64, generator=g) for m, n in [(4, 3), (3, 5), (2, 2)]]
    As[2].requires_grad_(True)
    assert _C._varlen_below_autograd(As, False, True, None, None) is None
    with torch.no_grad():
        got = _C._varlen_below_autograd(As, False, True, None, None)
    want = through_op("svd_varlen", [A.detach() for A in As], False, True, None, None)
    for xs, ys in zip(got, want):
        for x, y in zip(xs, ys):
            assert torch.equal(x, y) and not x.requires_grad
    U, S, Vh = torch_jsvd.svd_varlen(As)
    assert S[2].requires_grad
    S[2].sum().backward()
    # d(sum of singular values)/dA = U Vh
    torch.testing.assert_close(As[2].grad, (U[2] @ Vh[2]).detach())


def test_errors_as_the_op(device):
    """Arguments the op's schema would reject raise TypeError naming them (the op's own parser raises
    RuntimeError); numpy's bools and numbers pass as they do there; NaN raises LinAlgError as before."""
    A = torch.randn(3, 3, device=device)
    with pytest.raises(TypeError, match="full_matrices must be a bool"):
        torch_jsvd.svd(A, full_matrices="yes")
    with pytest.raises(TypeError, match="compute_uv must be a bool"):
        torch_jsvd.svd_ex(A, compute_uv=1)
    with pytest.raises(TypeError, match="max_sweeps must be an int"):
        torch_jsvd.svd(A, max_sweeps=2.5)
    with pytest.raises(TypeError, match="tol must be a float"):
        torch_jsvd.svdvals(A, tol="small")
    np = pytest.importorskip("numpy")  # (numpy's bools and numbers, as the op's schema takes them)
    got = torch_jsvd.svd_ex(A, full_matrices=np.bool_(True), max_sweeps=np.int64(5), tol=np.float32(1e-6))
    want = through_op("svd_ex", A, True, True, float(np.float32(1e-6)), 5)
    assert all(torch.equal(x, y) for x, y in zip(got, want))
    with pytest.raises(TypeError, match="max_sweeps must be an int"):
        torch_jsvd.svd(A, max_sweeps=True)
    B = A.clone()
    B[1, 1] = float("nan")
    with pytest.raises(torch.linalg.LinAlgError, match="NaN or Inf"):
        torch_jsvd.svd(B)
    with pytest.raises(torch.linalg.LinAlgError, match="NaN or Inf"):
        torch_jsvd.svdvals(B)
    assert torch_jsvd.svd_ex(B).info.item() == torch_jsvd.INFO_NON_FINITE


class Seen(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.names.append(str(func))
        return func(*args, **(kwargs or {}))


class Logged(torch.Tensor):
    names = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.names.append(str(func))
        return super().__torch_function__(func, types, args, kwargs or {})


def test_modes_and_subclasses_see_the_op(device):
    A = torch.randn(4, 3, device=device)
    with Seen() as mode:
        torch_jsvd.svd(A)
        torch_jsvd.svd_ex(A)
        torch_jsvd.svdvals(A)
    assert [n for n in mode.names if "jsvd" in n] == ["jsvd.svd.default", "jsvd.svd_ex.default",
                                                       "jsvd.svdvals.default"]
    Logged.names.clear()
    torch_jsvd.svd(A.as_subclass(Logged))
    assert "jsvd.svd.default" in Logged.names
    # svd_varlen: a mode, or a member of a subclass, takes the list the op's way
    with Seen() as mode:
        torch_jsvd.svd_varlen([A, A[:2]])
    assert [n for n in mode.names if "jsvd" in n] == ["jsvd.svd_varlen.default"]
    Logged.names.clear()
    torch_jsvd.svd_varlen([A, A[:2].as_subclass(Logged)])
    assert "jsvd.svd_varlen.default" in Logged.names


def test_profiler_records_the_op(device):
    A = torch.randn(5, 4, device=device)
    with torch.profiler.profile() as prof:
        torch_jsvd.svd(A)
        torch_jsvd.svdvals(A)
        torch_jsvd.svd_varlen([A, A[:3]])
    names = {e.name for e in prof.events()}
    assert {"jsvd::svd", "jsvd::svdvals", "jsvd::svd_varlen"} <= names
