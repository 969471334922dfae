"""python -m torch_jsvd: SVD of a batch of variable-size matrices and of a
uniform batch on the best available device, next to torch.linalg.svd.

Accuracy (max over the batch, computed in float64):
  recon  ||A - U diag(S) Vh||_F / ||A||_F
  orth   max(||U^T U - I||_F, ||Vh Vh^T - I||_F)
  S err  max_i |S_i - S_ref_i| / S_ref_1, S_ref = torch.linalg.svdvals(A in float64)
"""

import argparse
import time

import torch

import torch_jsvd
from torch_jsvd._device import device_name


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(fn, device, repeat):
    fn()  # warm-up (and CUDA context / kernel loading)
    _sync(device)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        _sync(device)
        best = min(best, time.perf_counter() - t0)
    return out, best


def _quality(As, Us, Ss, Vhs):
    recon = orth = serr = 0.0
    for A, U, S, Vh in zip(As, Us, Ss, Vhs):
        A, U, S, Vh = (t.double() for t in (A, U, S, Vh))
        k = S.shape[-1]
        R = (U[..., :k] * S.unsqueeze(-2)) @ Vh[..., :k, :]
        recon = max(recon, (torch.linalg.matrix_norm(A - R) / torch.linalg.matrix_norm(A)).max().item())
        eU = torch.linalg.matrix_norm(U.mT @ U - torch.eye(U.shape[-1], dtype=U.dtype, device=U.device))
        eV = torch.linalg.matrix_norm(Vh @ Vh.mT - torch.eye(Vh.shape[-2], dtype=U.dtype, device=U.device))
        orth = max(orth, eU.max().item(), eV.max().item())
        ref = torch.linalg.svdvals(A)
        serr = max(serr, ((S - ref).abs().amax(-1) / ref[..., 0]).max().item())
    return recon, orth, serr


def _row(name, t, q):
    return f"  {name:<28} {t * 1e3:10.2f} ms   recon {q[0]:.1e}   orth {q[1]:.1e}   S err {q[2]:.1e}"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--count", type=int, default=2000, help="variable-size matrices (default 2000)")
    p.add_argument("--min-size", type=int, default=4)
    p.add_argument("--max-size", type=int, default=64)
    p.add_argument("--batch", default="1000x32x32", help="uniform batch BxMxN (default 1000x32x32)")
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    device = torch.device(args.device)
    dtype = getattr(torch, args.dtype)
    g = torch.Generator().manual_seed(args.seed)
    print(f"torch_jsvd {torch_jsvd.__version__} demo on {device.type}: {device_name(device)}")
    print(f"torch {torch.__version__}, dtype {args.dtype}, best of {args.repeat} runs after a warm-up\n")

    # 1. Variable-size batch: one svd_varlen call vs a loop of torch.linalg.svd calls.
    shapes = torch.randint(args.min_size, args.max_size + 1, (args.count, 2), generator=g).tolist()
    As = [torch.randn(m, n, generator=g, dtype=dtype).to(device) for m, n in shapes]
    print(f"{args.count} matrices of random shapes m, n in [{args.min_size}, {args.max_size}] (full_matrices=False)")
    (U, S, Vh), t = _timed(lambda: torch_jsvd.svd_varlen(As), device, args.repeat)
    print(_row("torch_jsvd.svd_varlen", t, _quality(As, U, S, Vh)))
    ref, t_ref = _timed(lambda: [torch.linalg.svd(A, full_matrices=False) for A in As], device, args.repeat)
    print(_row("torch.linalg.svd (loop)", t_ref, _quality(As, *zip(*ref))))
    print(f"  speed-up {t_ref / t:.2f}x\n")

    # 2. Uniform batch.
    b, m, n = (int(x) for x in args.batch.split("x"))
    A = torch.randn(b, m, n, generator=g, dtype=dtype).to(device)
    print(f"uniform batch {b} x {m} x {n} (full_matrices=False)")
    (U, S, Vh, info), t = _timed(lambda: torch_jsvd.svd_ex(A, full_matrices=False), device, args.repeat)
    print(_row("torch_jsvd.svd_ex", t, _quality([A], [U], [S], [Vh])))
    print(f"  {'':<28} sweeps: min {info.min().item()}, max {info.max().item()}")
    (U2, S2, Vh2), t_ref = _timed(lambda: torch.linalg.svd(A, full_matrices=False), device, args.repeat)
    print(_row("torch.linalg.svd", t_ref, _quality([A], [U2], [S2], [Vh2])))
    print(f"  speed-up {t_ref / t:.2f}x")


if __name__ == "__main__":
    main()
