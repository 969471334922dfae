"""Where one CUDA torch_jsvd.svd call's time goes: host time, GPU busy time and gaps, per-call overhead.

Usage: python scripts/call_timeline.py 200x256x256 [100x512x512:float64 1x4x4 list:40x100-600 ...]
Per case (BxMxN[:dtype], float32 by default, seeded):
1. torch.profiler: op start -> first GPU work, the GPU's span, busy time and gaps, the top kernels, the host table;
2. without the profiler (which inflates host time): the host time before the first kernel (hidden behind a long
   GPU sleep queued first) and svd's per-sweep host round trips (svd against svd_ex with max_sweeps = its sweeps);
3. back-to-back calls: wall and CUDA-event time per call of the svd_ex op (no sync; also below autograd),
   torch_jsvd.svd and torch.linalg.svd. A tiny case (1x4x4) measures the host overhead alone.
A list case (float32, seeded; 1. only): list:COUNTxLO-HI (sides drawn from [LO, HI], as bench_varlen.py) or
list:CxMxN+CxMxN+... (levels of one shape, shuffled), through svd_varlen; nested:... the same as a strided
torch.nested tensor.
"""
import os
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

import torch_jsvd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
import bench_varlen  # noqa: E402  (its lists, seeded alike)


def make(case, seed=0):
    shape, *dt = case.split(":")
    b, m, n = (int(v) for v in shape.split("x"))
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(b, m, n, device="cuda", dtype=getattr(torch, dt[0] if dt else "float32"), generator=g)


def make_list(case, seed=0):
    """A list case's matrices (see the usage), as bench_varlen.make_list draws them: a list, or a nested
    tensor for nested:..."""
    kind, spec = case.split(":", 1)
    if "-" in spec:
        count, rng = spec.split("x")
        lo, hi = (int(v) for v in rng.split("-"))
        mats = bench_varlen.make_list(int(count), lo, hi, seed=seed)
    else:
        levels = tuple(tuple(int(v) for v in lvl.split("x")) for lvl in spec.split("+"))
        mats = bench_varlen.make_list("hmatrix", levels, seed=seed)
    return torch.nested.nested_tensor(mats, layout=torch.strided) if kind == "nested" else mats


def timeline(case, A):
    fn = (lambda: torch_jsvd.svd_varlen(A)) if isinstance(A, list) or A.is_nested else \
        (lambda: torch_jsvd.svd(A, full_matrices=False))
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    ev = [e for e in prof.events() if e.device_type.name == "CUDA"]
    cpu = [e for e in prof.events() if e.device_type.name == "CPU" and e.name.startswith("jsvd::svd")]
    wall = max(e.time_range.end for e in prof.events()) - min(e.time_range.start for e in prof.events())
    t0 = min(e.time_range.start for e in cpu) if cpu else min(e.time_range.start for e in ev)
    ev.sort(key=lambda e: e.time_range.start)
    busy = sum(e.time_range.end - e.time_range.start for e in ev)
    span = ev[-1].time_range.end - ev[0].time_range.start
    print(f"== {case}: op start -> first GPU work {(ev[0].time_range.start - t0) / 1e3:.3f} ms, GPU span {span / 1e3:.3f} ms, "
          f"GPU busy {busy / 1e3:.3f} ms, gaps {(span - busy) / 1e3:.3f} ms over {len(ev)} GPU events, "
          f"profiled wall {wall / 1e3:.3f} ms")
    by = {}
    for e in ev:
        k = e.name[:60]
        by.setdefault(k, [0, 0.0])
        by[k][0] += 1
        by[k][1] += (e.time_range.end - e.time_range.start) / 1e3
    for k, (c, t) in sorted(by.items(), key=lambda kv: -kv[1][1])[:10]:
        print(f"  {t:8.3f} ms  x{c:<4d} {k}")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12, max_name_column_width=50))


def timed(fn, pre_sleep=False, reps=5):
    """Median CUDA-event ms of one call; pre_sleep queues a long GPU sleep first, hiding the call's host time."""
    ts = []
    for _ in range(reps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        if pre_sleep:
            torch.cuda._sleep(100_000_000)
        e0.record()
        fn()
        e1.record()
        torch.cuda.synchronize()
        ts.append(e0.elapsed_time(e1))
    return sorted(ts)[len(ts) // 2]


def round_trips(case, A):
    sweeps = int(torch_jsvd.svd_ex(A, full_matrices=False)[3].max().item())
    svd = lambda: torch_jsvd.svd(A, full_matrices=False)
    ex = lambda: torch_jsvd.svd_ex(A, full_matrices=False, max_sweeps=sweeps)
    t, ts, te, tes = timed(svd), timed(svd, True), timed(ex), timed(ex, True)
    print(f"== {case} ({sweeps} sweeps): svd {t:.3f} ms, with host prep hidden {ts:.3f} (prep {t - ts:.3f}); "
          f"svd_ex {te:.3f}, hidden {tes:.3f}; svd - svd_ex (hidden) {ts - tes:.3f} ms of per-sweep round trips")


def per_call(fn, reps):
    """(wall ms, CUDA-event ms) per call over reps back-to-back calls."""
    fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t = time.perf_counter()
    s.record()
    for _ in range(reps):
        fn()
    e.record()
    e.synchronize()
    return (time.perf_counter() - t) * 1e3 / reps, s.elapsed_time(e) / reps


def back_to_back(case, A):
    op = lambda: torch.ops.jsvd.svd_ex.default(A, False, True, None, None)
    reps = max(3, min(2000, int(2e7 // A.numel())))  # 1x4x4: 2000 calls, 100x512x512: 3
    fns = {
        "svd_ex op (no sync)": op,
        "torch_jsvd.svd": lambda: torch_jsvd.svd(A, full_matrices=False),
        "torch.linalg.svd": lambda: torch.linalg.svd(A, full_matrices=False),
    }
    print(f"== {case}: back-to-back calls ({reps})")
    with torch._C._AutoDispatchBelowAutograd():
        wall, ev = per_call(op, reps)
    print(f"  {'svd_ex op below autograd':26s} wall {wall:8.4f} ms/call  events {ev:8.4f} ms/call")
    for name, fn in fns.items():
        wall, ev = per_call(fn, reps)
        print(f"  {name:26s} wall {wall:8.4f} ms/call  events {ev:8.4f} ms/call")


if __name__ == "__main__":
    for case in sys.argv[1:]:
        if case.startswith(("list:", "nested:")):
            timeline(case, make_list(case))
            continue
        A = make(case)
        timeline(case, A)
        round_trips(case, A)
        back_to_back(case, A)
