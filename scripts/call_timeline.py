"""Where one torch_jsvd.svd call's time goes: host time before the first kernel, the GPU's busy time, and the
gaps between kernels (torch.profiler). Usage: python scripts/call_timeline.py 200x256x256 [...]"""
import sys

import torch
from torch.profiler import ProfilerActivity, profile

import torch_jsvd

for case in sys.argv[1:]:
    b, m, n = (int(v) for v in case.split("x"))
    A = torch.randn(b, m, n, device="cuda")
    torch_jsvd.svd(A, full_matrices=False)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        torch_jsvd.svd(A, full_matrices=False)
        torch.cuda.synchronize()
    ev = [e for e in prof.events() if e.device_type.name == "CUDA"]
    cpu = [e for e in prof.events() if e.device_type.name == "CPU" and e.name.startswith("jsvd::svd")]
    t0 = min(e.time_range.start for e in cpu) if cpu else min(e.time_range.start for e in ev)
    ev.sort(key=lambda e: e.time_range.start)
    busy = sum(e.time_range.end - e.time_range.start for e in ev)
    span = ev[-1].time_range.end - ev[0].time_range.start
    print(f"== {case}: op start -> first GPU work {(ev[0].time_range.start - t0) / 1e3:.3f} ms, GPU span {span / 1e3:.3f} ms, "
          f"GPU busy {busy / 1e3:.3f} ms, gaps {(span - busy) / 1e3:.3f} ms over {len(ev)} GPU events")
    by = {}
    for e in ev:
        k = e.name[:60]
        by.setdefault(k, [0, 0.0])
        by[k][0] += 1
        by[k][1] += (e.time_range.end - e.time_range.start) / 1e3
    for k, (c, t) in sorted(by.items(), key=lambda kv: -kv[1][1])[:10]:
        print(f"  {t:8.3f} ms  x{c:<4d} {k}")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12, max_name_column_width=50))

# Without the profiler (which inflates host time): the host time before the first kernel, as the call's time
# minus its time when a long GPU sleep queued before it hides that host time; and the per-sweep host round trip
# of svd, as its time minus svd_ex's with max_sweeps = the sweeps svd took (svd_ex never synchronises).
def timed(fn, pre_sleep=False, reps=5):
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


for case in sys.argv[1:]:
    b, m, n = (int(v) for v in case.split("x"))
    A = torch.randn(b, m, n, device="cuda")
    sweeps = int(torch_jsvd.svd_ex(A, full_matrices=False)[3].max().item())
    svd = lambda: torch_jsvd.svd(A, full_matrices=False)
    ex = lambda: torch_jsvd.svd_ex(A, full_matrices=False, max_sweeps=sweeps)
    t, ts, te, tes = timed(svd), timed(svd, True), timed(ex), timed(ex, True)
    print(f"== {case} ({sweeps} sweeps): svd {t:.3f} ms, with host prep hidden {ts:.3f} (prep {t - ts:.3f}); "
          f"svd_ex {te:.3f}, hidden {tes:.3f}; svd - svd_ex (hidden) {ts - tes:.3f} ms of per-sweep round trips")
