import os
import time
import zlib

import pytest
import torch

import torch_jsvd  # noqa: F401  (registers torch.ops.jsvd)

# Fresh random inputs every run; JSVD_SEED=<n> replays a run (the seed is in the header).
# (Into the environment: pytest -n's workers, spawned after this import, and the tests' child processes
# inherit it, so the seed the summary prints is the one every worker drew from.)
SEED = int(os.environ.setdefault("JSVD_SEED", str(time.time_ns() % (2**31))))

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]

# Under pytest -n N each worker, and each child process a test starts, would take every core for torch's CPU
# work (the float64 LAPACK references): N x cores threads on the cores, and a run of two test files that takes
# 183 s with 2 threads a worker did not finish in 400 (H200 machine, 16 cores, -n 8; docs/experiments.md,
# stop 86). A worker takes its share of the cores unless OMP_NUM_THREADS says otherwise; children inherit it.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
if _WORKERS > 1 and "OMP_NUM_THREADS" not in os.environ:
    os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // _WORKERS))
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


def pytest_report_header(config):
    cuda = torch.cuda.get_device_name() if torch.cuda.is_available() else "none (cuda tests skip)"
    return [f"JSVD_SEED={SEED}", f"torch {torch.__version__}, CUDA device: {cuda}"]


def pytest_terminal_summary(terminalreporter):
    # Also under -q, which hides the header: the seed that replays this run.
    terminalreporter.write_line(f"random inputs: JSVD_SEED={SEED}")


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _seed(request):
    # Per-test seed derived from the run seed, so one test replays independently of the others.
    seed = (SEED + zlib.crc32(request.node.nodeid.encode())) % (2**31)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    yield
    if torch.cuda.is_available():
        # The suite's workers (pytest -n) and their child processes share one device: memory a test's large
        # tensors left in this process's cache would starve the others (cudaErrorMemoryAllocation)
        peak = torch.cuda.max_memory_reserved()
        if os.environ.get("JSVD_MEM_LOG") and peak > 2**32:
            with open(os.environ["JSVD_MEM_LOG"], "a") as f:
                f.write(f"{peak / 2**30:.1f} GiB {request.node.nodeid}\n")
        if torch.cuda.memory_reserved() > 2**30:
            torch.cuda.empty_cache()


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param
