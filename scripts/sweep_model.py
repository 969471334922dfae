"""A float32 model of the GPU's blocked one-sided Jacobi sweep (block pairs of w columns, round-robin
over the blocks, one inner sweep a task: the first step's tasks rotate all pairs of their 2w columns,
later tasks only the cross pairs; norms exact at each task's start and carried by eq. (6) within it;
x^T y summed in float64; rotations applied down to eps, convergence at tol = sqrt(m) eps). Counts the
sweeps for A and for preconditioned forms of it: Rᵀ of A's QR factorisation, without and with column pivoting
(Jacobi on Rᵀ, Drmač–Veselić; A = Q R = Q (U_x Σ V_xᵀ)ᵀ gives U = Q V_x and V = U_x).
Runs on the CPU with numpy (the rotation order within a task follows the kernel's only approximately).
Usage: sweep_model.py N [trials]   (N a multiple of 32; 512: about 30 s a trial)"""
import sys
import numpy as np

EPS = np.float32(2.0 ** -23)


def rr(e, s):
    """Pairs of round-robin step s over e slots (slot 0 fixed)."""
    idx = [0] + [1 + (k + s) % (e - 1) for k in range(e - 1)]
    return [(idx[k], idx[e - 1 - k]) for k in range(e // 2)]


def rotate(A, I, J, d, tol2, app2):
    x, y = A[:, I], A[:, J]
    g = np.einsum("ij,ij->j", x.astype(np.float64), y.astype(np.float64))
    dx, dy = d[I], d[J]
    above = g * g > tol2 * dx * dy
    do = (g * g > app2 * dx * dy) & (dx > 0) & (dy > 0)
    zeta = np.where(do, (dy - dx) / (2 * np.where(do, g, 1.0)), 0.0)
    t = np.where(do, np.sign(zeta + (zeta == 0)) / (np.abs(zeta) + np.sqrt(1 + zeta * zeta)), 0.0)
    c = 1 / np.sqrt(1 + t * t)
    s = (c * t).astype(np.float32)
    tau = (t / (1 + 1 / c)).astype(np.float32)  # s / (1 + c)
    A[:, I] = x - s * (y + tau * x)
    A[:, J] = y + s * (x - tau * y)
    d[I] = np.maximum(dx - t * g, 0)
    d[J] = dy + t * g
    return bool(above.any())


def sweeps(A, w=16, max_sweeps=40):
    A = A.astype(np.float32).copy()
    m, n = A.shape
    tol = np.sqrt(m) * EPS
    tol2, app2 = float(tol) ** 2, float(EPS) ** 2
    nb = n // w
    for sweep in range(1, max_sweeps + 1):
        big = False
        for st in range(nb - 1):
            pairs = rr(nb, st)
            d = np.einsum("ij,ij->j", A.astype(np.float64), A.astype(np.float64))  # exact at each task's start
            if st == 0:  # all pairs of the task's 2w columns, round robin
                for s2 in range(2 * w - 1):
                    I, J = [], []
                    for (bi, bj) in pairs:
                        cols = list(range(bi * w, bi * w + w)) + list(range(bj * w, bj * w + w))
                        for (a, b) in rr(2 * w, s2):
                            I.append(cols[a]); J.append(cols[b])
                    big |= rotate(A, np.array(I), np.array(J), d, tol2, app2)
            else:  # cross pairs: owner o meets (o + s2) mod w
                for s2 in range(w):
                    I = np.array([bi * w + o for (bi, bj) in pairs for o in range(w)])
                    J = np.array([bj * w + (o + s2) % w for (bi, bj) in pairs for o in range(w)])
                    big |= rotate(A, I, J, d, tol2, app2)
        if not big:
            return sweep
    return -1


def qrcp_r(a):
    a = a.copy(); m, n = a.shape
    for k in range(n):
        j = k + int(np.argmax((a[k:, k:] ** 2).sum(0)))
        a[:, [k, j]] = a[:, [j, k]]
        x = a[k:, k]; v = x.copy(); v[0] += np.copysign(np.linalg.norm(x), x[0]); v /= np.linalg.norm(v) or 1
        a[k:, k:] -= 2 * np.outer(v, v @ a[k:, k:])
    return np.triu(a)


if __name__ == "__main__":
    n = int(sys.argv[1]); trials = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    rng = np.random.default_rng(0)
    for t in range(trials):
        A = rng.standard_normal((n, n))
        R = np.linalg.qr(A)[1]
        Rp = qrcp_r(A)
        print(f"{n}x{n} #{t}: A {sweeps(A)}  R^T(QR) {sweeps(R.T)}  R^T(QRCP) {sweeps(Rp.T)}", flush=True)
