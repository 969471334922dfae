"""torch_jsvd.compress: Linear and Conv2d layers replaced by two low-rank layers, all SVDs in one call."""

import io

import pytest
import torch
from torch import nn

import torch_jsvd


def _model(device):
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, stride=2, groups=2),
                         nn.Flatten(), nn.Linear(16 * 3 * 3, 64), nn.ReLU(), nn.Linear(64, 10, bias=False)).to(device)


def test_exact_low_rank_weights_give_the_same_function(device):
    # Weights of rank 2 compressed at rank 2: the same function (to rounding); the grouped convolution
    # is not a candidate.
    model = _model(device).double()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.Linear) or (isinstance(m, nn.Conv2d) and m.groups == 1):
                out, inner = m.weight.shape[0], m.weight[0].numel()
                W = torch.randn(out, 2, dtype=torch.float64, device=device) @ torch.randn(2, inner, dtype=torch.float64,
                                                                                         device=device)
                m.weight.copy_(W.reshape(m.weight.shape))
    x = torch.randn(5, 3, 8, 8, dtype=torch.float64, device=device)
    y = model(x)
    reports = torch_jsvd.compress(model, rank=2)
    assert [r.name for r in reports] == ["0", "4", "6"] and all(r.replaced for r in reports)
    assert all(r.rel_error <= 1e-12 for r in reports)
    assert isinstance(model[0], nn.Sequential) and isinstance(model[2], nn.Conv2d)
    torch.testing.assert_close(model(x), y, rtol=1e-9, atol=1e-9)


def test_no_saving_leaves_the_layer(device):
    # rank r with r (out + in) >= out in saves nothing: the layer stays as it was.
    lin = nn.Sequential(nn.Linear(8, 6)).to(device)
    reports = torch_jsvd.compress(lin, rank=5)
    assert not reports[0].replaced and isinstance(lin[0], nn.Linear)
    assert reports[0].params_after == reports[0].params_before == 8 * 6 + 6


@pytest.mark.parametrize("how", [dict(rank=4), dict(energy=0.8), dict(tol=0.3)])
def test_reports_and_weight_error(device, how):
    model = _model(device)
    weights = {name: m.weight.detach().reshape(m.weight.shape[0], -1).clone() for name, m in model.named_modules()
               if isinstance(m, (nn.Linear, nn.Conv2d)) and getattr(m, "groups", 1) == 1}
    reports = torch_jsvd.compress(model, **how)
    mods = dict(model.named_modules())
    for r in reports:
        W = weights[r.name]
        assert r.shape == tuple(W.shape)
        if not r.replaced:
            assert r.params_after == r.params_before
            continue
        first, second = mods[r.name][0], mods[r.name][1]
        Wr = second.weight.reshape(W.shape[0], r.rank) @ first.weight.reshape(r.rank, -1)
        err = (torch.linalg.matrix_norm(W - Wr) / torch.linalg.matrix_norm(W)).item()
        assert abs(err - r.rel_error) <= 1e-4
        sv = torch.linalg.svdvals(W.double())
        optimal = (sv[r.rank:].square().sum() / sv.square().sum()).sqrt().item()
        assert abs(err - optimal) <= 1e-4  # the truncated SVD is the best rank-r approximation
        if "tol" in how:
            assert err <= how["tol"] + 1e-6
            worse = (sv[r.rank - 1:].square().sum() / sv.square().sum()).sqrt().item()
            assert worse > how["tol"]  # and the smallest such rank
        if "energy" in how:
            assert 1 - err ** 2 >= how["energy"] - 1e-6
        assert r.params_after < r.params_before


def test_saves_loads_and_compiles(device):
    model = _model(device)
    torch_jsvd.compress(model, rank=3)
    x = torch.randn(2, 3, 8, 8, device=device)
    y = model(x)
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    clone = _model(device)
    torch_jsvd.compress(clone, rank=3)
    buf.seek(0)
    clone.load_state_dict(torch.load(buf))
    torch.testing.assert_close(clone(x), y)
    torch.testing.assert_close(torch.compile(model)(x), y, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kwargs, match", [(dict(), "exactly one"), (dict(rank=2, tol=0.1), "exactly one"),
                                           (dict(rank=0), "rank"), (dict(rank=-3), "rank"),
                                           (dict(energy=1.5), "energy"), (dict(tol=0.0), "tol")])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        torch_jsvd.compress(nn.Linear(4, 4), **kwargs)


def test_demo_runs(tmp_path):
    """examples/compress_demo.py end to end on the CPU, a tiny model trained for a moment: its table,
    JSON (one row per energy, parameters falling with the energy) and, with matplotlib, its plot."""
    import json
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, os.path.join(root, "examples", "compress_demo.py"), "--train-s", "0.5",
                          "--device", "cpu", "--width", "24", "--depth", "1", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert "SVDs of the 7 Linear layers" in out.stdout
    doc = json.load(open(tmp_path / "compress_demo.json"))
    params = [r["params"] for r in doc["rows"]]
    assert len(params) == 7 and params == sorted(params, reverse=True) and params[-1] < doc["base"]["params"]
