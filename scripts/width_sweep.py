"""Blocked levels: time and accuracy of torch_jsvd.svd per pair width (JSVD_PAIR_WIDTH), next to torch.linalg.svd.

usage: width_sweep.py [--widths 0,8,16,32,64] [--cases 200x256x256:float32,...]
Width 0 is the planner's own choice. Each width runs in a child process (the knob is read once).
"""
import argparse, json, os, subprocess, sys

CASES = "200x256x256:float32,100x512x512:float32,10x1024x1024:float32,1x1536x1536:float32,100x512x512:float64,10x1024x1024:float64"


def child(case, reps):
    import torch, torch_jsvd
    shape, dt = case.split(":")
    b, m, n = (int(v) for v in shape.split("x"))
    dtype = getattr(torch, dt)
    g = torch.Generator(device="cuda").manual_seed(0)
    A = torch.randn(b, m, n, device="cuda", dtype=dtype, generator=g)
    ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps + 1):
        ev0.record(); U, S, Vh, info = torch_jsvd.svd_ex(A, full_matrices=False); ev1.record()
        torch.cuda.synchronize(); times.append(ev0.elapsed_time(ev1))
    times = sorted(times[1:])
    Ad = A.double()
    rec = ((U.double() * S.double()[..., None, :]) @ Vh.double() - Ad).norm(dim=(-2, -1)) / Ad.norm(dim=(-2, -1))
    eye = torch.eye(n, device="cuda", dtype=torch.float64)
    ou = (U.double().mT @ U.double() - eye).norm(dim=(-2, -1)).max().item()
    ov = (Vh.double() @ Vh.double().mT - eye).norm(dim=(-2, -1)).max().item()
    plan = torch_jsvd.plan([(m, n)] * b, dtype=dtype, device="cuda")["matrices"][0]["levels"]
    print(json.dumps({"case": case, "ms": times[len(times) // 2], "recon": rec.max().item(), "orth": max(ou, ov),
                      "sweeps": int(info.max().item()), "plan": plan}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--widths", default="0,8,16,32,64")
    ap.add_argument("--cases", default=CASES)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--child", default=None)
    a = ap.parse_args()
    if a.child:
        return child(a.child, a.reps)
    for case in a.cases.split(","):
        for w in a.widths.split(","):
            env = dict(os.environ, JSVD_PAIR_WIDTH=w)
            r = subprocess.run([sys.executable, __file__, "--child", case, "--reps", str(a.reps)], env=env,
                               capture_output=True, text=True, timeout=300)
            if r.returncode:
                print(case, "w", w, "FAILED", r.stderr[-400:], flush=True)
                continue
            d = json.loads(r.stdout.strip().splitlines()[-1])
            width = d["plan"][0].get("width") if d["plan"] else None
            print(f"{case:24s} w={w:>2s} (plan {width}) {d['ms']:9.2f} ms  recon {d['recon']:.1e}  orth {d['orth']:.1e}  "
                  f"sweeps {d['sweeps']}", flush=True)


if __name__ == "__main__":
    main()
