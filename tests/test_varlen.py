"""torch_jsvd.svd_varlen: a list (or nested tensor) of matrices of different shapes in one call."""

import gc
import textwrap

import pytest
import torch

import torch_jsvd
from jsvd_testutils import assert_valid_svd, bound, reference_svdvals, run_child

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
            ref = reference_svdvals(A)
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


def test_results_outlive_each_other(device):
    """Each result is a piece of the call's buffer with a storage of its own that keeps the buffer
    alive (csrc/svd_varlen.cpp, PieceOf): one kept while the others are freed stays intact."""
    As = _mats(device, shapes=[(6, 4), (3, 5), (7, 7)])
    U, S, Vh = torch_jsvd.svd_varlen(As)
    keep, ref = Vh[1], Vh[1].clone()
    assert keep.untyped_storage().nbytes() == keep.numel() * keep.element_size()
    del U, S, Vh
    gc.collect()
    junk = [torch.full((1 << 12,), float("nan"), dtype=keep.dtype, device=device) for _ in range(64)]
    assert torch.equal(keep, ref) and len(junk) == 64


def test_no_autograd_graph_without_grad(device):
    """Calls with nothing to differentiate skip the autograd layer (_ops._call) and record no graph;
    with an input that requires grad they do."""
    As = _mats(device, shapes=[(4, 3), (3, 5)])
    assert all(t.grad_fn is None for t in torch_jsvd.svd_varlen(As).U)
    assert torch_jsvd.svd(As[0]).S.grad_fn is None
    As[0].requires_grad_()
    assert torch_jsvd.svd_varlen(As).S[0].grad_fn is not None
    assert torch_jsvd.svd(As[0]).S.grad_fn is not None
    with torch.no_grad():
        assert torch_jsvd.svd(As[0]).S.grad_fn is None


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


@pytest.mark.parametrize("full_matrices", [True, False])
def test_jagged_nested(device, full_matrices):
    # A jagged nested tensor (rows ragged, 4 columns): outputs jagged where their matrices differ only in
    # their first dimension, strided nested otherwise; each matrix as from the list.
    shapes = [(5, 4), (9, 4), (2, 4), (4, 4), (0, 4)]
    As = _mats(device, shapes=shapes)
    nt = torch.nested.nested_tensor(As, layout=torch.jagged)
    U, S, Vh = torch_jsvd.svd_varlen(nt, full_matrices=full_matrices)
    assert S.layout == Vh.layout == torch.jagged  # (k_i x 4: ragged k_i = min(m_i, 4))
    assert U.layout == torch.strided  # (m_i x min(m_i, 4), or m_i x m_i: two ragged sizes)
    Ul, Sl, Vhl = torch_jsvd.svd_varlen(As, full_matrices=full_matrices)
    for got, ref in ((U, Ul), (S, Sl), (Vh, Vhl)):
        for a, b in zip(got.unbind(), ref):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
    # Every m_i >= n and reduced: U's matrices share their column count, so U is jagged too.
    tall = torch.nested.nested_tensor(_mats(device, shapes=[(5, 4), (9, 4), (4, 4)]), layout=torch.jagged)
    U, S, Vh = torch_jsvd.svd_varlen(tall, full_matrices=False)
    assert U.layout == S.layout == Vh.layout == torch.jagged
    for A, u, s, vh in zip(tall.unbind(), U.unbind(), S.unbind(), Vh.unbind()):
        assert_valid_svd(A, u, s, vh, False, check_strides=False)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_jagged_nested_large_members(dtype):
    # A jagged tensor whose ragged rows reach thousands (48 columns: members on the warp, shared-memory
    # and block-pair levels), with full U: each member's factors valid and as from the list.
    g = torch.Generator(device="cuda").manual_seed(7)
    As = [torch.randn(r, 48, dtype=dtype, device="cuda", generator=g) for r in (3000, 48, 700, 1, 130, 0, 2200)]
    nt = torch.nested.nested_tensor(As, layout=torch.jagged)
    for full_matrices in (False, True):
        U, S, Vh = torch_jsvd.svd_varlen(nt, full_matrices=full_matrices)
        Ul, Sl, Vhl = torch_jsvd.svd_varlen(As, full_matrices=full_matrices)
        for A, u, s, vh, sl in zip(As, U.unbind(), S.unbind(), Vh.unbind(), Sl):
            assert_valid_svd(A, u, s, vh, full_matrices, check_strides=False)
            torch.testing.assert_close(s, sl, rtol=0, atol=0)


def _ops_run(fn):
    """The jsvd op names that one call of fn dispatched (torch.profiler, CPU activity)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    return {e.name for e in prof.events() if e.name.startswith("jsvd::")}


@pytest.mark.parametrize("layout", [torch.strided, torch.jagged])
def test_nested_solved_in_place(device, layout):
    # A nested input that needs no gradient goes to svd_varlen_packed (no tensor a matrix); one that
    # needs a gradient to the list op, which has the derivative. Same results either way.
    shapes = [(5, 4), (9, 4), (2, 4), (0, 4)] if layout == torch.jagged else SHAPES
    As = _mats(device, shapes=shapes)
    nt = torch.nested.nested_tensor(As, layout=layout)
    assert _ops_run(lambda: torch_jsvd.svd_varlen(nt)) == {"jsvd::svd_varlen_packed"}
    ref = torch_jsvd.svd_varlen(As)
    ntg = torch.nested.nested_tensor(As, layout=layout, requires_grad=True)
    assert "jsvd::svd_varlen" in _ops_run(lambda: torch_jsvd.svd_varlen(ntg))
    for res in (torch_jsvd.svd_varlen(nt), torch_jsvd.svd_varlen(ntg)):
        for got, want in zip(res, ref):
            for a, b in zip(got.unbind(), want):
                torch.testing.assert_close(a.detach(), b, rtol=0, atol=0)


def test_nest_contiguous_helper():
    # The Python layer's nested views of a result buffer (csrc/python_module.cpp): components back to back,
    # from the buffer's first element even where it starts inside its storage; bad sizes raise.
    from torch_jsvd import _C
    buf = torch.arange(12.0)[2:]
    nt = _C._nest_contiguous(buf, torch.tensor([[2, 3], [1, 4], [0, 3]]))
    a, b, c = nt.unbind()
    assert torch.equal(a, buf[:6].view(2, 3)) and torch.equal(b, buf[6:10].view(1, 4)) and c.shape == (0, 3)
    with pytest.raises(RuntimeError, match="need 12 elements, the buffer has 10"):
        _C._nest_contiguous(buf, torch.tensor([[3, 4]]))
    with pytest.raises(RuntimeError, match="negative size"):
        _C._nest_contiguous(buf, torch.tensor([[-1, 4]]))


def test_strided_members_and_nest_results_helpers():
    # A strided nested tensor read in place (its size, stride and offset tables, as Python's accessors give
    # them; components transposed or padded), and svd_varlen_packed's buffers nested back for every
    # (full_matrices, compute_uv); a nested tensor of vectors is no list of matrices.
    from torch_jsvd import _C
    g = torch.Generator().manual_seed(3)
    base = torch.nested.nested_tensor([torch.randn(4, 7, generator=g), torch.randn(3, 2, generator=g)])
    for nt in (base, base.transpose(1, 2), torch.nested.nested_tensor([torch.randn(2, 3)[:, :2]])):
        values, members = _C._strided_members(nt)
        want = torch.cat([nt._nested_tensor_size(), nt._nested_tensor_storage_offsets()[:, None],
                          nt._nested_tensor_strides()], 1)
        assert torch.equal(members, want) and values.data_ptr() == nt.values().data_ptr()
        for full in (True, False):
            for uv in (True, False):
                U, S, Vh = torch.ops.jsvd.svd_varlen_packed.default(values, members, full, uv, None, None)
                got = _C._nest_results(U, S, Vh, members, full, uv)
                ref = torch_jsvd.svd_varlen(list(nt.unbind()), full_matrices=full, compute_uv=uv)
                for g_nt, r_list in zip(got, ref):
                    for a, b in zip(g_nt.unbind(), r_list):
                        assert a.shape == b.shape or (not uv and a.numel() == b.numel() == 0)
                        if uv or a.numel():
                            torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert _C._strided_members(torch.nested.nested_tensor([torch.randn(3), torch.randn(5)])) is None


def _buffer_of(As, device, dtype=torch.float64):
    """The matrices As laid into one buffer with gaps, half of them transposed (column-major): the
    buffer and its (count, 5) members table."""
    parts, rows, at = [], [], 0
    for i, A in enumerate(As):
        m, n = A.shape
        col_major = i % 2 == 1
        flat = (A.mT if col_major else A).reshape(-1)
        parts += [flat, torch.full((3,), float("nan"), dtype=dtype, device=device)]  # gaps never read
        rows.append([m, n, at, 1 if col_major else n, m if col_major else 1])
        at += flat.numel() + 3
    return torch.cat(parts), torch.tensor(rows, dtype=torch.int64)


@pytest.mark.parametrize("full_matrices", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_packed_op_matches_the_list(device, full_matrices, dtype):
    As = _mats(device, dtype, shapes=SHAPES + [(1, 6), (6, 1)])
    values, members = _buffer_of(As, device, dtype)
    U, S, Vh = torch.ops.jsvd.svd_varlen_packed(values, members, full_matrices)
    assert U.dtype == S.dtype == Vh.dtype == dtype and U.dim() == S.dim() == Vh.dim() == 1
    Ul, Sl, Vhl = torch_jsvd.svd_varlen(As, full_matrices)
    uo = so = vo = 0
    for u, s, vh in zip(Ul, Sl, Vhl):  # each member's factors C-contiguous, back to back
        for buf, at, ref in ((U, uo, u), (S, so, s), (Vh, vo, vh)):
            torch.testing.assert_close(buf[at:at + ref.numel()].view(ref.shape), ref, rtol=0, atol=0)
        uo, so, vo = uo + u.numel(), so + s.numel(), vo + vh.numel()
    assert (uo, so, vo) == (U.numel(), S.numel(), Vh.numel())
    U2, S2, Vh2 = torch.ops.jsvd.svd_varlen_packed(values, members, full_matrices, False)
    assert U2.shape == Vh2.shape == (0,)  # (without U and V the engine may take another path: rounding)
    torch.testing.assert_close(S2, S, rtol=0, atol=50 * torch.finfo(dtype).eps * S.abs().max().item())


def test_packed_op_bad_arguments(device):
    op = torch.ops.jsvd.svd_varlen_packed
    v = torch.randn(20, dtype=torch.float64, device=device)
    good = torch.tensor([[3, 2, 0, 2, 1]])
    with pytest.raises(RuntimeError, match="values to be a 1-D tensor"):
        op(v.view(4, 5), good)
    with pytest.raises(RuntimeError, match="values to be a floating point tensor"):
        op(v.long(), good)
    for bad in (good.int(), good[:, :4], good.to(device) if device != "cpu" else good.view(1, 1, 5)):
        with pytest.raises(RuntimeError, match="members to be an int64 CPU tensor of shape"):
            op(v, bad)
    with pytest.raises(RuntimeError, match="at least one matrix"):
        op(v, good[:0])
    with pytest.raises(RuntimeError, match=r"members\[1\].*negative entry"):
        op(v, torch.tensor([[3, 2, 0, 2, 1], [2, 2, -1, 2, 1]]))
    with pytest.raises(RuntimeError, match=r"members\[0\].*past the end of values \(20 elements\)"):
        op(v, torch.tensor([[4, 4, 5, 4, 1]]))
    with pytest.raises(RuntimeError, match="not differentiable"):
        op(v.clone().requires_grad_(), good)
    bad = v.clone()
    bad[3] = float("inf")
    with pytest.raises(torch.linalg.LinAlgError, match="NaN or Inf"):
        op(bad, good)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_shape_groups_solved_as_uniform_batches(device, dtype):
    # Shapes shared by >= 32 members are solved as uniform batches of their own (list_shape_groups,
    # csrc/core.h), the rest as one list: each gives what the uniform op, or the list of the rest alone,
    # gives (the same engine calls on the same matrices).
    g = torch.Generator().manual_seed(7)
    group_a = [torch.randn(20, 6, dtype=dtype, generator=g) for _ in range(40)]
    group_b = [torch.randn(7, 30, dtype=dtype, generator=g) for _ in range(33)]  # wide: 30 x 7 tall
    rest = [torch.randn(m, n, dtype=dtype, generator=g) for m, n in [(5, 3), (20, 6), (9, 9), (0, 4), (7, 30)]]
    As = [t.to(device) for t in group_a[:20] + rest[:2] + group_b + rest[2:] + group_a[20:]]
    tol = 100 * torch.finfo(dtype).eps

    def same(got, want):  # one matrix's (U, S, Vh) against another call's, up to the signs of the pairs
        u, s, vh = got
        u0, s0, vh0 = want
        torch.testing.assert_close(s, s0, rtol=0, atol=tol * max(1.0, s0.abs().max().item() if s0.numel() else 0))
        k = s.shape[0]
        sign = torch.where((u[:, :k] * u0[:, :k]).sum(0) < 0, -1.0, 1.0).to(dtype)
        torch.testing.assert_close(u[:, :k] * sign, u0[:, :k], rtol=0, atol=tol)
        torch.testing.assert_close(vh[:k] * sign[:, None], vh0[:k], rtol=0, atol=tol)

    for full_matrices in (False, True):
        U, S, Vh = torch_jsvd.svd_varlen(As, full_matrices)
        for A, u, s, vh in zip(As, U, S, Vh):
            assert_valid_svd(A, u, s, vh, full_matrices)
        ia = [i for i, A in enumerate(As) if A.shape == (20, 6)]
        ib = [i for i, A in enumerate(As) if A.shape == (7, 30)]
        assert len(ia) == 41 and len(ib) == 34
        for idx in (ia, ib):
            ref = torch_jsvd.svd(torch.stack([As[i] for i in idx]), full_matrices)
            for j, i in enumerate(idx):
                same((U[i], S[i], Vh[i]), tuple(t[j] for t in ref))
        others = [i for i in range(len(As)) if i not in ia + ib]
        ref = torch_jsvd.svd_varlen([As[i] for i in others], full_matrices)
        for j, i in enumerate(others):
            same((U[i], S[i], Vh[i]), tuple(t[j] for t in ref))
        # a non-finite member of a group, or of the rest, is reported like svd's (every part's info is read)
        for i in (ia[3], others[1]):
            bad = list(As)
            bad[i] = As[i].clone()
            bad[i][0, 0] = float("nan")
            with pytest.raises(torch.linalg.LinAlgError, match="NaN or Inf"):
                torch_jsvd.svd_varlen(bad, full_matrices)
        # the nested form (svd_varlen_packed) solves the same parts
        nested = torch_jsvd.svd_varlen(torch.nested.nested_tensor(As), full_matrices)
        for got, want in zip(nested, (U, S, Vh)):
            for a, b in zip(got.unbind(), want):
                torch.testing.assert_close(a, b, rtol=0, atol=0)


# A list that takes every level of the CUDA engine at once: thread and warp (<= 32 columns), whole
# matrices in shared memory, block pairs, Gram EVD pairs (too tall for a pair) and the GEMM level
# (>= 1024 columns), with size-0, 1 x n and n x 1 members.
EVERY_LEVEL = [(3, 3), (1, 7), (7, 1), (0, 5), (5, 0), (40, 30), (30, 40), (64, 64), (100, 90), (260, 250),
               (300, 200), (8000, 40), (1100, 1030)] + [(k % 13 + 2, k % 7 + 2) for k in range(60)]


@pytest.mark.cuda
@pytest.mark.parametrize("group", [None, "qr", "start"], ids=["levels", "levels+qr", "levels+start"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_list_mixing_every_level(dtype, group):
    # group: beside 32 members of one tall shape, which the list solves as a uniform batch of its own
    # (a shape group), QR first, or the Gram eigenvectors' start (65 to 128 columns): every level and the
    # group's route in one call, with full U too.
    f32 = dtype == torch.float32
    tall = {None: [], "qr": [(600, 130) if f32 else (200, 60)] * 32, "start": [(900, 100)] * 32}[group]
    shapes = EVERY_LEVEL + tall
    plan = torch_jsvd.plan(shapes, dtype=dtype)["matrices"]
    kernels = {lv["kernel"] for m in plan for lv in m["levels"]}
    assert {"whole_svd_warp", "whole_svd_smem", "pair_svd_smem", "gram_evd_smem", "gemm_gram_evd"} <= kernels, kernels
    assert [m.get("shape_group") for m in plan[len(EVERY_LEVEL):]] == [32] * len(tall)
    assert all(m.get("start_v" if group == "start" else "precondition") for m in plan[len(EVERY_LEVEL):])
    As = _mats("cuda", dtype, shapes)
    for full_matrices in (False, True) if group else (False,):
        U, S, Vh = torch_jsvd.svd_varlen(As, full_matrices=full_matrices)
        for A, u, s, vh in zip(As, U, S, Vh):
            assert_valid_svd(A, u, s, vh, full_matrices)
            if A.numel():
                ref = reference_svdvals(A)
                assert (s.double() - ref).abs().max() <= bound(*A.shape, dtype) * ref[0]


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_list_block_pairs_of_different_heights(dtype):
    # A list's block pairs share one launch sized for their largest rows, columns and width: a tall
    # narrow matrix beside wide-pair ones would have taken it past shared memory (CUDA "invalid
    # argument"); it goes to the Gram EVD level instead.
    # (a list of 100: wider pairs, as the batch fills more SMs; plan() reports the merged levels; small
    # matrices of 12 shapes, none shared by the 32 members that would make it a uniform batch of its own)
    shapes = [(3000, 40), (260, 250), (300, 200), (40, 2500)] + [(20 + k % 4, 20 + k % 3) for k in range(96)]
    alone = [torch_jsvd.plan([s, (2, 2)], dtype=dtype)["matrices"][0]["levels"][-1]["kernel"] for s in shapes[:3]]
    together = [m["levels"][-1]["kernel"] for m in torch_jsvd.plan(shapes, dtype=dtype)["matrices"][:3]]
    if dtype == torch.float32:
        assert alone == ["pair_svd_smem"] * 3 and together[0] == "pair_svd_smem", (alone, together)
        assert "gram_evd_smem" in together[1:], together
    As = _mats("cuda", dtype, shapes)
    U, S, Vh = torch_jsvd.svd_varlen(As)
    for A, u, s, vh in zip(As, U, S, Vh):
        assert_valid_svd(A, u, s, vh, False)


@pytest.mark.cuda
def test_whole_level_at_the_shared_memory_limit():
    # A 158 x 105 float64 member planned 232276 bytes of dynamic shared memory, within the kernel's own
    # 272 static bytes of the H100's 232448: its launch failed ("invalid argument"). Plans now leave
    # the kernel's static bytes free (it takes block pairs).
    g = torch.Generator(device="cuda").manual_seed(0)
    As = [torch.randn(s, dtype=torch.float64, device="cuda", generator=g) for s in [(158, 105), (105, 161), (3, 3)]]
    plan = torch_jsvd.plan([tuple(a.shape) for a in As], dtype=torch.float64, device="cuda")
    assert max(m["levels"][-1].get("smem", 0) for m in plan["matrices"]) + 272 <= plan["smem_per_block"]
    for A, u, s, vh in zip(As, *torch_jsvd.svd_varlen(As)):
        assert_valid_svd(A, u, s, vh, False)
        assert (s - reference_svdvals(A)).abs().max() <= 1e-13 * s[0]


_HUGE_AND_TINY = """
    import torch, torch_jsvd
    g = torch.Generator(device="cuda").manual_seed(0)
    shapes = [(600, 500)] + [(k % 9 + 1, k % 5 + 1) for k in range(500)] + [(48, 40)] * 20 + [(90, 70)] * 5
    As = [torch.randn(s, device="cuda", generator=g) for s in shapes]
    S = torch_jsvd.svd_varlen(As, compute_uv=False).S
"""


@pytest.mark.cuda
def test_list_one_huge_many_tiny_streams_on_and_off():
    # A list's launch groups run on streams of their own (JSVD_LIST_STREAMS=1, the default): each
    # matrix's singular values as with the groups one after another on the current stream (=0).
    scope = {}
    exec(textwrap.dedent(_HUGE_AND_TINY), scope)
    off = run_child(_HUGE_AND_TINY + "\n    print(repr(torch.cat(S).tolist()))", JSVD_LIST_STREAMS="0")
    on = torch.cat(scope["S"]).cpu()
    torch.testing.assert_close(on, torch.tensor(eval(off)), rtol=0, atol=2e-5 * on.max().item())
    for A, s in zip(scope["As"], scope["S"]):
        ref = reference_svdvals(A)
        assert (s.double() - ref).abs().max() <= bound(*A.shape, torch.float32) * ref[0], A.shape


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_list_one_huge_many_tiny_full_matrices(dtype):
    # One member the blocked levels take, hundreds the register and warp levels take, size-0, 1 x n and
    # n x 1 members, in one call with full U: every member's factors valid and its singular values
    # against float64.
    g = torch.Generator(device="cuda").manual_seed(3)
    shapes = ([(1100, 1000)] + [(k % 9 + 1, k % 5 + 1) for k in range(300)] + [(0, 4), (5, 0), (1, 7), (7, 1)] +
              [(40, 36)] * 10)
    plan = torch_jsvd.plan(shapes, dtype=dtype, device="cuda")["matrices"]
    assert {lv["kernel"] for lv in plan[0]["levels"]} & {"pair_svd_smem", "gram_evd_smem", "gemm_gram_evd"}
    As = [torch.randn(s, dtype=dtype, device="cuda", generator=g) for s in shapes]
    U, S, Vh = torch_jsvd.svd_varlen(As, full_matrices=True)
    for A, u, s, vh in zip(As, U, S, Vh):
        assert_valid_svd(A, u, s, vh, True)
        if A.numel():
            ref = reference_svdvals(A)
            assert (s.double() - ref).abs().max() <= bound(*A.shape, dtype) * ref[0], A.shape


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
    # (32 columns: no Gram eigenvectors' start on either engine, whose converged routes need no sweep)
    with pytest.raises(torch.linalg.LinAlgError, match="max_sweeps"):
        torch_jsvd.svd_varlen([torch.randn(32, 32, dtype=torch.float64, device=device)], max_sweeps=1)


def test_collector_state_kept(device):
    """A list's call pauses Python's cyclic collector (_ops.py, _collector_paused) and leaves it as it
    found it: enabled after a call and after a raise, disabled if it was, with the results intact."""
    bad = torch.randn(4, 4, device=device)
    bad[0, 0] = float("nan")
    was = gc.isenabled()
    try:
        for enabled in (True, False):
            gc.enable() if enabled else gc.disable()
            mats = _mats(device)
            Us, Ss, Vhs = torch_jsvd.svd_varlen(mats)
            assert gc.isenabled() == enabled
            with pytest.raises(torch.linalg.LinAlgError):
                torch_jsvd.svd_varlen([torch.randn(3, 3, device=device), bad])
            assert gc.isenabled() == enabled
            gc.collect()
            for A, U, S, Vh in zip(mats, Us, Ss, Vhs):
                assert_valid_svd(A, U, S, Vh, False, check_strides=False)
    finally:
        gc.enable() if was else gc.disable()
