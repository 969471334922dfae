"""Property-based fuzzing (hypothesis): shapes 0..300, batch shapes, strides and transposes, float32/64,
scales 1e-300..1e300, rank, repeated singular values, zero blocks. Every result: converged, finite,
reconstruction and orthogonality <= 10 max(m, n) eps, S sorted, non-negative and within
10 max(m, n) eps S_max of float64 LAPACK's.

CI runs a fixed, bounded set of examples (derandomized); JSVD_FUZZ_EXAMPLES raises the count (the GPU
script runs more, on CUDA too).
"""

import os

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import torch_jsvd
from jsvd_testutils import assert_valid_svd, bound

EXAMPLES = int(os.environ.get("JSVD_FUZZ_EXAMPLES", "60"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))


@st.composite
def matrices(draw):
    dtype = draw(st.sampled_from([torch.float32, torch.float64]))
    small = draw(st.booleans())  # most cases small, so that a bounded run covers many structures
    side = st.integers(0, 24) if small else st.integers(0, 300)
    m, n = draw(side), draw(side)
    batch = draw(st.sampled_from([(), (1,), (3,), (2, 2)]))
    k = min(m, n)
    seed = draw(st.integers(0, 2**31 - 1))
    g = torch.Generator().manual_seed(seed)
    rank = draw(st.integers(0, k)) if k else 0
    # singular values: distinct, repeated, or spread over decades; then a random rank cut
    kind = draw(st.sampled_from(["gauss", "repeated", "graded"]))
    X = torch.randn(*batch, m, max(k, 1), generator=g, dtype=torch.float64)
    Y = torch.randn(*batch, max(k, 1), n, generator=g, dtype=torch.float64)
    if k:
        Q1 = torch.linalg.qr(X).Q[..., :k]
        Q2 = torch.linalg.qr(Y.mT).Q[..., :k]
        if kind == "gauss":
            s = torch.rand(k, generator=g, dtype=torch.float64) + 0.1
        elif kind == "repeated":
            s = torch.ones(k, dtype=torch.float64) * torch.randint(1, 3, (k,), generator=g)
        else:
            s = 10.0 ** -torch.linspace(0, draw(st.integers(0, 12)), k, dtype=torch.float64)
        s[rank:] = 0
        A = (Q1 * s) @ Q2.mT
    else:
        A = torch.zeros(*batch, m, n, dtype=torch.float64)
    if draw(st.booleans()) and m and n:  # a zero block
        A[..., : m // 2, : n // 2] = 0
    exp = draw(st.integers(-30, 30) if dtype == torch.float32 else st.integers(-300, 300))
    A = (A * 10.0**exp).to(dtype)
    layout = draw(st.sampled_from(["contiguous", "transposed", "strided"]))
    if layout == "transposed":
        A = A.mT.contiguous().mT
    elif layout == "strided":
        A = torch.repeat_interleave(A, 2, dim=-1)[..., ::2]
    return A


def check(A, device):
    A = A.to(device)
    m, n = A.shape[-2:]
    U, S, Vh, info = torch_jsvd.svd_ex(A, full_matrices=False)
    assert (info >= 0).all(), info
    for t in (U, S, Vh):
        assert torch.isfinite(t).all()
    if A.numel() == 0:
        return
    if _normal(A):
        assert_valid_svd(A, U, S, Vh, False, check_strides=False)
    amax = A.double().abs().amax((-2, -1), keepdim=True).clamp_min(1e-300)
    ref = torch.linalg.svdvals((A.double() / amax).cpu())
    err = (S.double().cpu() / amax.squeeze(-1).cpu() - ref).abs().max().item()
    assert err <= bound(m, n, A.dtype) * max(ref.max().item(), 1e-300) + 1e-300


def _normal(A):
    # reconstruction is judged where S is representable to full precision (not subnormal)
    t = torch.finfo(A.dtype).tiny
    return bool(A.abs().amax() == 0 or A.abs().amax() > t / torch.finfo(A.dtype).eps * max(A.shape[-2:]))


@SETTINGS
@given(matrices())
def test_fuzz_cpu(A):
    check(A, "cpu")


@pytest.mark.cuda
@SETTINGS
@given(matrices())
def test_fuzz_cuda(A):
    check(A, "cuda")


@st.composite
def lists(draw):
    """A list of matrices laid into one buffer for svd_varlen_packed: sides 0..40, each Gaussian,
    rank-deficient, column-graded or zero, row- or column-major with a gap after it, sometimes 32+
    copies of one shape (a shape group, solved as a uniform batch)."""
    dtype = draw(st.sampled_from([torch.float32, torch.float64]))
    shapes = draw(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), min_size=1, max_size=12))
    if draw(st.booleans()):
        shapes += [draw(st.tuples(st.integers(1, 24), st.integers(1, 24)))] * draw(st.integers(32, 40))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    order = torch.randperm(len(shapes), generator=g).tolist()
    parts, rows, at = [], [], 0
    for i in order:
        m, n = shapes[i]
        kind = draw(st.sampled_from(["gauss", "rank_deficient", "graded", "zero"]))
        A = torch.randn(m, n, generator=g, dtype=torch.float64)
        if kind == "rank_deficient" and min(m, n) > 1:
            r = min(m, n) // 2
            A = A[:, :r] @ torch.randn(r, n, generator=g, dtype=torch.float64)
        elif kind == "graded":
            A = A * torch.logspace(0, -6 if dtype == torch.float32 else -12, n, dtype=torch.float64)
        elif kind == "zero":
            A.zero_()
        A = A.to(dtype)
        col_major = draw(st.booleans())
        flat = (A.mT if col_major else A).reshape(-1)
        gap = draw(st.integers(0, 3))
        parts += [flat, torch.full((gap,), float("nan"), dtype=dtype)]  # (gaps are never read)
        rows.append([m, n, at, 1 if col_major else n, m if col_major else 1])
        at += flat.numel() + gap
    return torch.cat(parts), torch.tensor(rows, dtype=torch.int64), draw(st.booleans())


def check_packed(values, members, full_matrices, device):
    values = values.to(device)
    U, S, Vh = torch.ops.jsvd.svd_varlen_packed(values, members, full_matrices)
    As = [values[o:].as_strided((m, n), (rs, cs)) for m, n, o, rs, cs in members.tolist()]
    Ul, Sl, Vhl = torch_jsvd.svd_varlen(As, full_matrices)  # the list op: the same engine calls
    uo = so = vo = 0
    for A, u, s, vh in zip(As, Ul, Sl, Vhl):
        for buf, at, ref in ((U, uo, u), (S, so, s), (Vh, vo, vh)):
            assert torch.equal(buf[at:at + ref.numel()].view(ref.shape), ref)
        uo, so, vo = uo + u.numel(), so + s.numel(), vo + vh.numel()
        assert_valid_svd(A, u, s, vh, full_matrices)
    assert (uo, so, vo) == (U.numel(), S.numel(), Vh.numel())


@settings(SETTINGS, max_examples=max(EXAMPLES // 3, 10))
@given(lists())
def test_fuzz_packed_lists_cpu(case):
    check_packed(*case, "cpu")


@pytest.mark.cuda
@settings(SETTINGS, max_examples=max(EXAMPLES // 3, 10))
@given(lists())
def test_fuzz_packed_lists_cuda(case):
    check_packed(*case, "cuda")
