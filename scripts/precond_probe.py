"""Jacobi on Rᵀ (QR preconditioning, Drmač–Veselić) through torch ops, to measure before building it into the
engine: A = Q R; Rᵀ = U_x Σ V_xᵀ (torch_jsvd); then U = Q V_x and Vh = U_xᵀ. Times torch.linalg.qr, the Jacobi
on Rᵀ and the product against torch_jsvd.svd(A), with the sweeps taken (svd_ex's info) and the accuracy.
scripts/sweep_model.py predicts 13 -> 10 sweeps at 512²; this says what the QR costs on the device.
Usage: precond_probe.py 100x512x512 [...] [--device cuda] [--reps 3]"""
import argparse
import time

import torch

import torch_jsvd


def timed(f, device, reps):
    ts = []
    for _ in range(reps + 1):
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = f()
        if device == "cuda":
            torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) * 1e3)
    return sorted(ts[1:])[len(ts[1:]) // 2], out


def accuracy(A, U, S, Vh):
    Ad, Ud, Vd = A.double(), U.double(), Vh.double().mT
    recon = ((Ud * S.double()[..., None, :]) @ Vd.mT - Ad).norm(dim=(-2, -1)) / Ad.norm(dim=(-2, -1))
    eye = torch.eye(U.shape[-1], dtype=torch.float64, device=A.device)
    orth = torch.maximum((Ud.mT @ Ud - eye).norm(dim=(-2, -1)), (Vd.mT @ Vd - eye).norm(dim=(-2, -1)))
    return recon.max().item(), orth.max().item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cases", nargs="+")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    for case in a.cases:
        b, m, n = (int(v) for v in case.split("x"))
        assert m == n, "square matrices (the case this is for)"
        g = torch.Generator(device=a.device).manual_seed(0)
        A = torch.randn(b, m, n, device=a.device, generator=g)
        t_plain, (U0, S0, Vh0) = timed(lambda: torch_jsvd.svd(A, full_matrices=False), a.device, a.reps)
        t_qr, (Q, R) = timed(lambda: torch.linalg.qr(A), a.device, a.reps)
        X = R.mT.contiguous()
        t_jac, (Ux, S, Vxh) = timed(lambda: torch_jsvd.svd(X, full_matrices=False), a.device, a.reps)
        t_mul, U = timed(lambda: Q @ Vxh.mT, a.device, a.reps)
        Vh = Ux.mT
        sw_plain = int(torch_jsvd.svd_ex(A, full_matrices=False)[3].max())
        sw_pre = int(torch_jsvd.svd_ex(X, full_matrices=False)[3].max())
        r0, o0 = accuracy(A, U0, S0, Vh0)
        r1, o1 = accuracy(A, U, S, Vh)
        print(f"{case} {a.device}: plain {t_plain:.1f} ms ({sw_plain} sweeps, recon {r0:.1e}, orth {o0:.1e}); "
              f"QR {t_qr:.1f} + Jacobi on R^T {t_jac:.1f} ({sw_pre} sweeps) + Q V_x {t_mul:.1f} = "
              f"{t_qr + t_jac + t_mul:.1f} ms (recon {r1:.1e}, orth {o1:.1e})", flush=True)


if __name__ == "__main__":
    main()
