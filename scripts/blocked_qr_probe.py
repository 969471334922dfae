"""QR preconditioning through a blocked Householder QR built from batched torch ops, to measure before a
kernel is written: panels of nb columns factored by torch.geqrf (one call for the whole batch of panels),
compact WY (Q_k = I - Y T Y^T, T from T^-1 = diag(1/tau) + striu(Y^T Y)), trailing updates and the
application of Q as batched matmuls. Then the Jacobi on R^T (torch_jsvd.svd) and U = Q [V_x; 0], V = U_x
(Drmac-Veselic; scripts/precond_probe.py did the same with torch.linalg.qr, which loops over the batch on
CUDA: 207 ms for 100x512x512 on the H100).

What it answers: how long a batched QR (and the application of Q) takes when the panels are batched, i.e.
whether Jacobi on R^T (3 sweeps fewer at 512², 60.1 against 70.9 ms on the H100 at 55e061b) can pay.
Prints per-phase times (wall time between device synchronisations, after a warm-up), the sweeps, and the accuracy.
Checked for correctness on the CPU (small sizes).
Usage: blocked_qr_probe.py 100x512x512 [...] [--nb 32 16 64] [--panel torch cublas] [--device cuda] [--reps 3]
(The panel kernel this probe also timed, a block per panel in shared memory, became the engine's
kernels/householder_panel.cu; its probe copy is gone. Times on the H100: benchmarks/RESULTS.md.)"""
import argparse
import time

import torch

import torch_jsvd
from precond_probe import accuracy  # (scripts/ is sys.path[0] when this runs as a script)


def geqrf_cublas(P):
    """torch.geqrf's result for a batch of panels P (B, L, w) from cublas<t>geqrfBatched (through CuPy),
    which torch.geqrf uses only for at most 256 rows (ATen's geqrf_kernel; above that it loops over the
    batch with cuSOLVER)."""
    import cupy
    import numpy as np
    from cupy.cuda import cublas
    B, L, w = P.shape
    Pc = P.mT.contiguous()  # (B, w, L): each panel column-major, lda = L
    tau = torch.empty(B, w, dtype=P.dtype, device=P.device)
    es = P.element_size()
    a_ptrs = torch.arange(B, dtype=torch.int64, device=P.device) * (L * w * es) + Pc.data_ptr()
    t_ptrs = torch.arange(B, dtype=torch.int64, device=P.device) * (w * es) + tau.data_ptr()
    info = np.zeros(1, dtype=np.int32)  # host int (argument errors only)
    torch.cuda.synchronize()  # (CuPy's handle runs on its current stream: keep the two apart)
    fn = cublas.sgeqrfBatched if P.dtype == torch.float32 else cublas.dgeqrfBatched
    fn(cupy.cuda.device.get_cublas_handle(), L, w, a_ptrs.data_ptr(), L, t_ptrs.data_ptr(), info.ctypes.data, B)
    cupy.cuda.Device().synchronize()
    assert info[0] == 0, f"geqrfBatched argument error {info[0]}"
    return Pc.mT, tau


def blocked_qr(A, nb, panel="torch"):
    """A (B, m, n), m >= n, overwritten with R on and above the diagonal. Returns [(k0, Y, T)]: Y (B, m-k0, w)
    unit lower trapezoidal, T (B, w, w) upper triangular, so that the panel's Q = I - Y T Y^T.
    panel: "torch" (torch.geqrf) or "cublas" (geqrf_cublas)."""
    B, m, n = A.shape
    eye = torch.eye(nb, dtype=A.dtype, device=A.device)
    blocks = []
    for k0 in range(0, n, nb):
        w = min(nb, n - k0)
        P = A[:, k0:, k0:k0 + w]
        a, tau = {"cublas": geqrf_cublas}.get(panel, torch.geqrf)(P)
        Y = torch.tril(a, -1) + torch.eye(m - k0, w, dtype=A.dtype, device=A.device)
        Tinv = torch.triu(Y.mT @ Y, 1) + torch.diag_embed(1 / tau)  # (tau = 0 only for an exact zero column)
        T = torch.linalg.solve_triangular(Tinv, eye[:w, :w].expand(B, w, w), upper=True)
        A[:, k0:, k0:k0 + w] = torch.triu(a)
        if k0 + w < n:
            C = A[:, k0:, k0 + w:]
            C -= Y @ (T.mT @ (Y.mT @ C))  # Q_k^T C
        blocks.append((k0, Y, T))
    return blocks


def apply_q(blocks, X):
    """X (B, m, c) <- Q X, Q = Q_0 Q_1 ... (the blocks in reverse)."""
    for k0, Y, T in reversed(blocks):
        X[:, k0:] -= Y @ (T @ (Y.mT @ X[:, k0:]))
    return X


class Phases:
    def __init__(self, device):
        self.device, self.t, self.last = device, {}, None

    def mark(self, name=None):
        if self.device == "cuda":
            torch.cuda.synchronize()
        now = time.perf_counter()
        if name is not None:
            self.t[name] = self.t.get(name, 0.0) + (now - self.last) * 1e3
        self.last = now


def preconditioned_svd(A, nb, ph, panel):
    B, m, n = A.shape
    ph.mark()
    R = A.clone()
    blocks = blocked_qr(R, nb, panel)
    X = torch.triu(R[:, :n, :]).mT.contiguous()
    ph.mark("qr")
    Ux, S, Vxh = torch_jsvd.svd(X, full_matrices=False)
    ph.mark("jacobi")
    U = torch.zeros(B, m, n, dtype=A.dtype, device=A.device)
    U[:, :n] = Vxh.mT
    apply_q(blocks, U)
    ph.mark("apply_q")
    return U, S, Ux.mT, X


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cases", nargs="+")
    ap.add_argument("--nb", type=int, nargs="+", default=[32])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--panel", nargs="+", default=["torch"], choices=["torch", "cublas"])
    ap.add_argument("--profile", action="store_true", help="print torch.profiler's per-kernel GPU times of one run")
    a = ap.parse_args()
    for case in a.cases:
        b, m, n = (int(v) for v in case.split("x"))
        assert m >= n, "tall or square (a wide input is transposed first)"
        g = torch.Generator(device=a.device).manual_seed(0)
        A = torch.randn(b, m, n, device=a.device, generator=g)
        ph = Phases(a.device)
        ph.mark()
        for _ in range(a.reps):
            U0, S0, Vh0 = torch_jsvd.svd(A, full_matrices=False)
        ph.mark("plain")
        sw0 = int(torch_jsvd.svd_ex(A, full_matrices=False)[3].max())
        r0, o0 = accuracy(A, U0, S0, Vh0)
        print(f"{case} {a.device}: plain svd {ph.t['plain'] / a.reps:.1f} ms ({sw0} sweeps, recon {r0:.1e}, "
              f"orth {o0:.1e})", flush=True)
        for panel in a.panel:
            for nb in a.nb:
                try:
                    preconditioned_svd(A, nb, Phases(a.device), panel)  # warm-up
                except Exception as e:  # (no CuPy, or its cuBLAS binding differs)
                    print(f"  panel {panel}: {type(e).__name__}: {e}", flush=True)
                    break
                ph = Phases(a.device)
                for _ in range(a.reps):
                    U, S, Vh, X = preconditioned_svd(A, nb, ph, panel)
                sw = int(torch_jsvd.svd_ex(X, full_matrices=False)[3].max())
                r1, o1 = accuracy(A, U, S, Vh)
                t = {k: v / a.reps for k, v in ph.t.items()}
                if a.profile:
                    from torch.profiler import ProfilerActivity, profile
                    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                        preconditioned_svd(A, nb, Phases(a.device), panel)
                    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=25), flush=True)
                print(f"  panel {panel}, nb {nb}: QR {t['qr']:.1f} ms + Jacobi on R^T {t['jacobi']:.1f} ms "
                      f"({sw} sweeps) + apply Q {t['apply_q']:.1f} ms = {sum(t.values()):.1f} ms "
                      f"(recon {r1:.1e}, orth {o1:.1e})", flush=True)


if __name__ == "__main__":
    main()
