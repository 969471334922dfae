"""The GEMM level (kernels/levels/gemm/) and the tailoring auto-tuner (kernels/planner/tuner.h).

Large matrices: accuracy at >= 2048 columns whatever level the tuner picks (a float32 Gram matrix once
left 1 x 4096^2 with ||U^T U - I||_F = 9.5e-3); the GEMM level itself on every shape class it can take
(forced with JSVD_LEVEL=gemm in a child process: the engine reads its switches once per process); and
the tuner's cache when absent, stale or corrupt. Skipped without a CUDA device.
"""

import json
import re

import pytest
import torch

import torch_jsvd
from jsvd_testutils import assert_valid_svd, bound, reference_svdvals, run_child

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


@pytest.mark.parametrize("n,dtype", [(2048, torch.float32), (2048, torch.float64), (4096, torch.float32)],
                         ids=str)
def test_large_matrix_orthogonal_to_working_precision(n, dtype):
    plan = torch_jsvd.plan([(n, n)], dtype=dtype)["matrices"][0]
    assert "tuner" in plan, plan  # a uniform batch this large is the tuner's to decide
    g = torch.Generator().manual_seed(n)
    A = torch.randn(1, n, n, generator=g, dtype=torch.float64).to(dtype=dtype, device="cuda")
    # svd: the tuner's level after the Gram eigenvectors' start; svd_ex: the tuner's on A itself
    if n == 2048:
        U, S, Vh, info = torch_jsvd.svd_ex(A, full_matrices=False)
        assert int(info) > 0
        assert_valid_svd(A, U, S, Vh, full_matrices=False)
    U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
    assert_valid_svd(A, U, S, Vh, full_matrices=False)
    if n == 4096:  # issue 19's goal: ||U^T U - I||_F <= 1e-4 and residual <= 1e-5 in float32
        Ud = U.double()
        assert torch.linalg.matrix_norm(Ud.mT @ Ud - torch.eye(n, dtype=Ud.dtype, device=Ud.device)).item() <= 1e-4
        R = A.double() - Ud @ torch.diag_embed(S.double()) @ Vh.double()
        assert (torch.linalg.matrix_norm(R) / torch.linalg.matrix_norm(A.double())).item() <= 1e-5
    ref = reference_svdvals(A)
    assert ((S.double() - ref).abs().max() / ref[..., 0]).item() <= bound(n, n, dtype)


@pytest.mark.parametrize("shapes,dtype,pairs", [([(512, 512)] * 100, torch.float64, True),
                                                ([(1024, 1024)] * 20, torch.float32, True),
                                                ([(4096, 4096)], torch.float32, False)],
                         ids=["100x512²", "20x1024²", "1x4096²"])
def test_svd_ex_takes_block_pairs_where_they_fill_the_gpu(shapes, dtype, pairs):
    # svd_ex reads nothing on the host, so its sweep loop runs max_sweeps sweeps, which cost the GEMM
    # level its GEMMs each (100 x 512² float64: 625 ms, 314 by block pairs, H200); a single large matrix,
    # whose pairs are too tall for shared memory, stays the tuner's (planner.cpp, plan_call)
    m = torch_jsvd.plan(shapes, dtype=dtype, sync=False)["matrices"][0]
    if pairs:
        assert [lv["kernel"] for lv in m["levels"]] == ["block_pairs", "pair_svd_smem"], m
        assert "cannot stop early" in m["tuner"], m
    else:
        assert "cannot stop early" not in m["tuner"], m


def test_list_mixing_gemm_level_and_small_matrices():
    # A list gets no tuner: the GEMM level from 1024 columns (JSVD_GEMM_MIN_COLS), beside the warp,
    # shared-memory and block-pair levels, in one call.
    shapes = [(1100, 1030), (30, 20), (5, 3), (300, 200), (1, 9), (1030, 1100)]
    plan = torch_jsvd.plan(shapes, dtype=torch.float32)["matrices"]
    assert plan[0]["levels"][1]["kernel"] == "gemm_gram_evd" and plan[5]["levels"][1]["kernel"] == "gemm_gram_evd"
    g = torch.Generator().manual_seed(5)
    As = [torch.randn(m, n, generator=g).cuda() for m, n in shapes]
    U, S, Vh = torch_jsvd.svd_varlen(As, full_matrices=False)
    for A, u, s, vh in zip(As, U, S, Vh):
        assert_valid_svd(A, u, s, vh, False)
        ref = reference_svdvals(A)
        assert ((s.double() - ref).abs().max() / ref[0]).item() <= bound(*A.shape, A.dtype)


def test_gemm_level_forced_on_every_shape_class():
    # Columns not a multiple of the block width (padding), batch 1 and > 1 (also from 2048 columns),
    # float32 and float64, square (QR preconditioned), tall and wide, full_matrices, singular values
    # only, a rank-deficient batch, column-graded float64, and a list down to 1 x n, all at the GEMM
    # level (JSVD_LEVEL=gemm sends every matrix there).
    out = run_child("""
        import torch, torch_jsvd
        from jsvd_testutils import assert_valid_svd, bound, random_rank, reference_svdvals, run_child
        torch.manual_seed(0)
        def ok(A, full):
            U, S, Vh = torch_jsvd.svd(A, full_matrices=full)
            assert_valid_svd(A, U, S, Vh, full)
            ref = reference_svdvals(A)
            err = ((S.double() - ref).abs().amax(-1) / ref[..., 0]).max().item()
            assert err <= bound(*A.shape[-2:], A.dtype), err
            s = torch_jsvd.svdvals(A)
            assert ((s.double() - ref).abs().amax(-1) / ref[..., 0]).max().item() <= bound(*A.shape[-2:], A.dtype)
        lv = torch_jsvd.plan([(300, 270)] * 3)["matrices"][0]["levels"]
        assert lv[1]["kernel"] == "gemm_gram_evd", lv
        for dtype in (torch.float32, torch.float64):
            for shape in [(1, 2100, 2050), (2, 2060, 2049), (3, 300, 270), (2, 200, 130), (2, 130, 200), (4, 70, 33)]:
                A = torch.randn(shape, dtype=dtype, device="cuda")
                ok(A, False)
                if shape[0] == 1 or shape[1] < 1000:
                    ok(A, True)
            ok(random_rank((2, 260, 250), 40, dtype=dtype, device="cuda"), False)
        # float64 column-graded to kappa 1e12: the small singular values keep their relative accuracy
        # (the CPU engine's, held to mpmath in test_graded.py), through the QR and the GEMM level
        g = torch.Generator().manual_seed(19)
        for wide in (False, True):
            m, n = 300, 260
            B = torch.randn(2, m, n, dtype=torch.float64, generator=g)
            d = torch.logspace(0, -12, n, dtype=torch.float64)[torch.randperm(n, generator=g)]
            A = (B * d).mT.contiguous() if wide else B * d  # (wide: graded rows, columns in the engine's orientation)
            ref = torch_jsvd.svdvals(A)
            for s in (torch_jsvd.svdvals(A.cuda()), torch_jsvd.svd(A.cuda())[1]):
                rel = ((s.cpu() - ref).abs() / ref).max().item()
                assert rel <= 100 * m * torch.finfo(torch.float64).eps, (wide, rel)
        As = [torch.randn(m, n, device="cuda") for m, n in [(700, 650), (40, 30), (5, 3), (1, 9), (2, 2)]]
        U, S, Vh = torch_jsvd.svd_varlen(As)
        for A, u, s, vh in zip(As, U, S, Vh):
            assert_valid_svd(A, u, s, vh, False)
        print("all ok")
        """, JSVD_LEVEL="gemm")
    assert "all ok" in out


TUNE = """
    import json, torch, torch_jsvd
    t = torch_jsvd.tune([(1, 600, 600)])[0]
    A = torch.randn(1, 600, 600, device="cuda")
    U, S, Vh = torch_jsvd.svd(A)
    R = A.double() - U.double() @ torch.diag_embed(S.double()) @ Vh.double()
    assert (R.norm() / A.double().norm()).item() < 1e-5
    print(json.dumps(t))
    """


def _tune(cache, **env):
    return json.loads(run_child(TUNE, JSVD_CACHE_DIR=str(cache), **env).strip().splitlines()[-1])


def test_tuner_cache_absent_then_used(tmp_path):
    first = _tune(tmp_path)
    assert first["tuner"].startswith("calibrated:"), first
    assert first["levels"][1]["kernel"] in ("gemm_gram_evd", "pair_svd_smem")
    files = [f for f in tmp_path.iterdir() if f.suffix != ".lock"]  # (the writers' lock file beside it)
    assert len(files) == 1 and files[0].read_text().startswith("torch_jsvd-tuner-")
    second = _tune(tmp_path)
    assert second["tuner"].startswith("cache:") and second["levels"] == first["levels"], (first, second)


@pytest.mark.parametrize("content", ["not a cache\n1 2 three\n", "", "\x00\xff garbage", "bad line"],
                         ids=["text", "empty", "binary", "bad-line"])
def test_tuner_corrupt_cache_never_fails_a_call(tmp_path, content):
    path = tmp_path / f"tuner-{re.sub('[^0-9A-Za-z]', '_', torch.cuda.get_device_name())}.txt"
    if content == "bad line":  # a valid header, then a line that does not parse
        _tune(tmp_path)
        content = path.read_text() + "1 600 600 4 1 1 thirty-two\n"
    path.write_bytes(content.encode("latin-1"))
    t = _tune(tmp_path)
    assert t["tuner"].startswith("calibrated:"), t
    assert path.read_text().startswith("torch_jsvd-tuner-") and "thirty-two" not in path.read_text()


def test_tuner_stale_cache_is_recalibrated(tmp_path):
    _tune(tmp_path)
    (path,) = (f for f in tmp_path.iterdir() if f.suffix != ".lock")
    lines = path.read_text().splitlines()
    # another version (or another device): the file is ignored
    path.write_text("torch_jsvd-tuner-0 " + lines[0].split(" ", 1)[1] + "\n" + "\n".join(lines[1:]) + "\n")
    assert _tune(tmp_path)["tuner"].startswith("calibrated:")


def test_tuner_keeps_other_processes_entries(tmp_path):
    """A process that shares the cache with others (data-parallel ranks, test workers) takes an entry
    another one wrote after it loaded the file, rather than calibrating its own, and keeps it when it
    writes: no process drops another's calibrations (the file was rewritten from memory alone before)."""
    out = run_child("""
        import re, torch, torch_jsvd
        from pathlib import Path
        torch_jsvd.tune([(1, 600, 600)])
        (path,) = (f for f in Path(CACHE).iterdir() if f.suffix != ".lock")
        line = next(l for l in path.read_text().splitlines() if l.startswith("1 600 600 "))
        with open(path, "a") as f:  # (as another process would, after this one loaded the file)
            f.write("2" + line[1:] + "\\n")
        assert torch_jsvd.tune([(2, 600, 600)])[0]["tuner"].startswith("cache:")
        torch_jsvd.tune([(1, 640, 640)])
        keys = {tuple(l.split()[:3]) for l in path.read_text().splitlines()[1:]}
        assert {("1", "600", "600"), ("2", "600", "600"), ("1", "640", "640")} <= keys, keys
        print("ok")
    """.replace("CACHE", repr(str(tmp_path))), JSVD_CACHE_DIR=str(tmp_path))
    assert out.strip().endswith("ok"), out


def test_tuner_off(tmp_path):
    t = _tune(tmp_path, JSVD_TUNER="0")
    assert "tuner" not in t and t["levels"][1]["kernel"] == "pair_svd_smem", t  # the rule: 600 < 1024 columns
    assert not list(tmp_path.iterdir())


def test_tune_rejects_bad_arguments():
    with pytest.raises(ValueError, match="shapes"):
        torch_jsvd.tune([(0, 5, 5)])
    with pytest.raises(ValueError, match="dtype"):
        torch_jsvd.tune([(5, 5)], dtype=torch.float16)
    with pytest.raises(ValueError, match="CUDA"):
        torch_jsvd.tune([(5, 5)], device="cpu")
