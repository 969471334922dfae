"""Time and accuracy of torch_jsvd.svd on seeded random CUDA batches, one line per case.

Usage: python scripts/measure.py 100x512x512:float32 [10x1024x1024:float64 200x256x256:float32:values 8x4096x128:float32:cond=1e6 ...] [--reps 3] [--seed 0] [--json] [--profile]
Per case: median ms of torch_jsvd.svd (CUDA events, after a warm-up call), the max relative reconstruction
error, ‖UᵀU − I‖_F and ‖VᵀV − I‖_F (max over the batch) of its result, and svd_ex's sweeps (svd_ex takes
no Gram-eigenvector start: precondition/eigh_precondition.h). A case ending in
":values" times svdvals and reports the singular values' error against float64 torch.linalg.svdvals; ":cond=C"
takes random orthogonal factors and singular values spaced geometrically from 1 to 1/C instead of a Gaussian A;
":tolx=F" passes tol = F x torch_jsvd.default_tol (the Jacobi's convergence threshold).
--profile adds torch.profiler's per-kernel GPU times of one call and the device's largest idle gaps.
ab_builds.sh, ab_knob.sh and knob_sweep.py time through this script.
"""
import argparse, json, math

import torch

import torch_jsvd


def orth(Q):
    Q = Q.double()
    G = Q.mT @ Q
    return (G - torch.eye(G.shape[-1], dtype=G.dtype, device=G.device)).norm(dim=(-2, -1)).max().item()


def make_input(case, seed):
    shape, dt, *mode = case.split(":")
    b, m, n = (int(v) for v in shape.split("x"))
    dtype, g = getattr(torch, dt), torch.Generator(device="cuda").manual_seed(seed)
    cond = [float(x[5:]) for x in mode if x.startswith("cond=")]
    if not cond:
        return torch.randn(b, m, n, device="cuda", dtype=dtype, generator=g)
    k = min(m, n)
    Q1, Q2 = (torch.linalg.qr(torch.randn(b, r, k, device="cuda", dtype=torch.float64, generator=g))[0] for r in (m, n))
    s = torch.logspace(0, -math.log10(cond[0]), k, device="cuda", dtype=torch.float64)
    return ((Q1 * s) @ Q2.mT).to(dtype)


def measure(case, reps=3, seed=0):
    shape, dt, *mode = case.split(":")
    values = "values" in mode
    b, m, n = (int(v) for v in shape.split("x"))
    dtype = getattr(torch, dt)
    A = make_input(case, seed)
    scale = [float(x[5:]) for x in mode if x.startswith("tolx=")]
    tol = scale[0] * torch_jsvd.default_tol(max(m, n), dtype) if scale else None
    ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    # Timed: svd / svdvals, as bench_gpu.py (they stop sweeping at convergence; svd_ex, which never
    # synchronises, queues all max_sweeps sweeps, whose launches cost time after convergence).
    call = ((lambda: torch_jsvd.svdvals(A, tol=tol)) if values
            else (lambda: torch_jsvd.svd(A, full_matrices=False, tol=tol)))
    times = []
    for _ in range(reps + 1):
        ev0.record()
        out = call()
        ev1.record()
        torch.cuda.synchronize()
        times.append(ev0.elapsed_time(ev1))
    times = sorted(times[1:])
    U, S, Vh = (None, out, None) if values else out  # (the accuracy of the last timed call's result)
    *_, info = torch_jsvd.svd_ex(A, full_matrices=False, compute_uv=not values, tol=tol)
    Ad = A.double()
    plan = torch_jsvd.plan([(m, n)] * b, dtype=dtype, device="cuda", compute_uv=not values)["matrices"][0]["levels"]
    if values:
        ref = torch.linalg.svdvals(Ad)
        err = ((S.double() - ref).abs().amax(-1) / ref[..., 0]).max().item()
        return {"case": case, "ms": times[len(times) // 2], "recon": err, "orth_u": 0.0, "orth_v": 0.0,
                "sweeps": int(info.max().item()), "plan": plan}
    rec = ((U.double() * S.double()[..., None, :]) @ Vh.double() - Ad).norm(dim=(-2, -1)) / Ad.norm(dim=(-2, -1))
    return {"case": case, "ms": times[len(times) // 2], "recon": rec.max().item(), "orth_u": orth(U),
            "orth_v": orth(Vh.mT), "sweeps": int(info.max().item()), "plan": plan}


def line(d):
    if ":values" in d["case"]:
        return f"{d['case']:24s} {d['ms']:9.3f} ms  s_err {d['recon']:.1e}  sweeps {d['sweeps']}"
    return (f"{d['case']:24s} {d['ms']:9.3f} ms  recon {d['recon']:.1e}  orthU {d['orth_u']:.1e}  "
            f"orthV {d['orth_v']:.1e}  sweeps {d['sweeps']}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cases", nargs="+")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="one JSON object per case instead of a line")
    ap.add_argument("--profile", action="store_true", help="also print the GPU time of each kernel of one call")
    a = ap.parse_args()
    for case in a.cases:
        d = measure(case, a.reps, a.seed)
        print(json.dumps(d) if a.json else line(d), flush=True)
        if a.profile:
            profile(case, a.seed)


def profile(case, seed):
    """torch.profiler's per-kernel GPU time (total and calls) for one svd call of the case."""
    from torch.profiler import ProfilerActivity, profile as prof
    A = make_input(case, seed)
    with prof(activities=[ProfilerActivity.CUDA]) as p:
        torch_jsvd.svd(A, full_matrices=False)
        torch.cuda.synchronize()
    rows = sorted((e for e in p.key_averages() if e.device_time_total > 0), key=lambda e: -e.device_time_total)
    total = sum(e.self_device_time_total for e in rows)
    print(f"  profile: {total / 1e3:.2f} ms of kernels")
    for e in rows[:14]:
        print(f"  {e.self_device_time_total / 1e3:8.3f} ms  {e.count:5d}x  {e.key[:90]}")
    # Where the device waited between the call's first and last kernel (host
    # round trips, launch latency): the largest gaps and what they lie between.
    from torch.autograd import DeviceType
    ks = sorted((e for e in p.events() if e.device_type == DeviceType.CUDA), key=lambda e: e.time_range.start)
    gaps, end = [], ks[0].time_range.end
    for a_, b_ in zip(ks, ks[1:]):
        if b_.time_range.start > end:
            gaps.append((b_.time_range.start - end, a_.name, b_.name))
        end = max(end, b_.time_range.end)
    span = ks[-1].time_range.end - ks[0].time_range.start
    print(f"  span {span / 1e3:.2f} ms, device idle {sum(g[0] for g in gaps) / 1e3:.2f} ms in {len(gaps)} gaps; largest:")
    for g, a_, b_ in sorted(gaps, reverse=True)[:10]:
        print(f"    {g:8.1f} us  {a_[:40]} -> {b_[:40]}")


if __name__ == "__main__":
    main()
