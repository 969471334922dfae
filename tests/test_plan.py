"""torch_jsvd.plan on the CPU (the CUDA plan of each level is tested in test_levels.py)."""

import pytest
import torch

import torch_jsvd


def test_cpu_plan_lists_every_shape():
    shapes = [(int(m), int(n)) for m, n in torch.randint(1, 300, (7, 2))]
    out = torch_jsvd.plan(shapes, dtype=torch.float64, device="cpu")
    assert out["device"] == "cpu"
    assert [(e["rows"], e["cols"]) for e in out["matrices"]] == shapes
    for (m, n), e in zip(shapes, out["matrices"]):
        assert e["transposed"] == (m < n)
        assert e["levels"][0]["kernel"] == "one_sided_jacobi_cpu"


def test_plan_rejects_unknown_device_type():
    with pytest.raises(ValueError, match="meta"):
        torch_jsvd.plan([(4, 4)], device="meta")
