"""Where the time goes: CUDA kernels and host time of torch_jsvd.svd for a few shapes."""
import sys, time, torch, torch_jsvd
from torch.profiler import profile, ProfilerActivity
# usage: profile_engine.py [BxMxN ...]
cases = [tuple(int(v) for v in a.split("x")) for a in sys.argv[1:]] or [(10000, 32, 32), (500, 16, 16), (100, 512, 512)]
for b, m, n in cases:
    A = torch.randn(b, m, n, device="cuda")
    torch_jsvd.svd(A, full_matrices=False); torch.cuda.synchronize()
    t = time.perf_counter(); torch_jsvd.svd(A, full_matrices=False); torch.cuda.synchronize()
    wall = (time.perf_counter() - t) * 1e3
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        torch_jsvd.svd(A, full_matrices=False); torch.cuda.synchronize()
    print(f"== {b}x{m}x{n}: wall {wall:.2f} ms")
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=8, max_name_column_width=60))
