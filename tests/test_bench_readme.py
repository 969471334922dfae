"""README.md's results table is written by benchmarks/bench_gpu.py (--readme) from a saved run: the table and
the line naming the run match benchmarks/results/bench_gpu_h200.json, and the writer replaces only what lies
between its markers (a README without them is refused, not appended to)."""

import json
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "benchmarks"))
import bench_gpu  # noqa: E402

ROOT = os.path.dirname(HERE)


def _between(text, key):
    begin, end = f"<!-- {key}:begin -->\n", f"\n<!-- {key}:end -->"
    return text[text.index(begin) + len(begin):text.index(end)]


def test_readme_table_is_the_saved_runs():
    with open(os.path.join(ROOT, "benchmarks", "results", "bench_gpu_h200.json")) as f:
        doc = json.load(f)
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    run, table = bench_gpu.readme_sections(doc)
    assert _between(readme, "bench_gpu_readme_run") == run
    assert _between(readme, "bench_gpu_readme_table") == table
    assert doc["commit"] in run and doc["date"] in run


def _row(case, ours, torch_ms, gesvda):
    methods = {"ours": {"ms": ours}, "torch": {"ms": torch_ms}, "gesvdj": {"ms": torch_ms * 2}}
    methods["gesvda"] = {"ms": gesvda} if gesvda else {"error": "RuntimeError: cusolver error"}
    return {"case": case, "methods": methods, "speedup": torch_ms / ours, "best_torch": "torch",
            "speedup_best": torch_ms / ours}


def test_write_readme_replaces_only_its_pieces(tmp_path):
    doc = {"device": "GPU X", "torch": "2.11.0", "cuda": "13.0", "commit": "abc1234", "date": "2026-11-30 20:09",
           "command": "python benchmarks/bench_gpu.py",
           "rows": [_row("100000x3x3 float32", 0.5, 20.0, None), _row("200x128x128 float32", 2.0, 500.0, 3.0),
                    _row("7x7x7 float32", 1.0, 1.0, 1.0)]}  # (not one of README_CASES: left out)
    path = tmp_path / "README.md"
    before = "# T\n\nprose before\n\n"
    path.write_text(before + "<!-- bench_gpu_readme_run:begin -->\nold\n<!-- bench_gpu_readme_run:end -->\n"
                    "prose between\n\n<!-- bench_gpu_readme_table:begin -->\nold\n"
                    "<!-- bench_gpu_readme_table:end -->\n\nprose after\n")
    bench_gpu.write_readme(doc, path=str(path))
    text = path.read_text()
    assert text.startswith(before) and "prose between" in text and text.endswith("\nprose after\n")
    run, table = _between(text, "bench_gpu_readme_run"), _between(text, "bench_gpu_readme_table")
    assert "GPU X" in run and "abc1234" in run and "not timed: gesvd)" in run
    lines = table.splitlines()
    # (README_CASES' order, whatever the run's)
    assert lines[2:] == ["| 100000x3x3 float32 | 0.500 | 20.000 | error | 40.00 | 40.00 (default) |",
                         "| 200x128x128 float32 | 2.000 | 500.000 | 3.000 | 250.00 | 250.00 (default) |"]
    bench_gpu.write_readme(doc, path=str(path))  # (idempotent)
    assert path.read_text() == text


def test_write_readme_refuses_a_readme_without_markers(tmp_path):
    path = tmp_path / "README.md"
    path.write_text("# T\n")
    with pytest.raises(SystemExit, match="no <!-- bench_gpu_readme_run:begin --> marker"):
        bench_gpu.write_readme({"rows": []}, path=str(path))
    assert path.read_text() == "# T\n"
