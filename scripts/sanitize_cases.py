"""Small inputs through every CUDA kernel (each level, dtype and special path), for compute-sanitizer.

Usage: compute-sanitizer --tool memcheck --error-exitcode 9 python scripts/sanitize_cases.py
(scripts/gpu_check.sh memcheck|sanitize|race-qr|race-delta run it so; the environment switches below narrow it.)
A new level or kernel path adds its cases to `cases`, named "<level> <dtype> ..." so that JSVD_SANITIZE_ONLY finds them.
"""
import os

import torch

# The GEMM level from 600 columns (read by the engine on its first call), so that small cases reach it.
os.environ.setdefault("JSVD_GEMM_MIN_COLS", "600")
# ... and a list's QR on (kernels/qr/qr_list.cpp; off by default), for the "qr list" cases
os.environ.setdefault("JSVD_LIST_QR", "1")
# ... and the polish by a warp for every factor that fits one (not only many of 17-32 columns)
os.environ.setdefault("JSVD_POLISH_WARP", "2")
import torch_jsvd  # noqa: E402

# racecheck is slow: JSVD_SANITIZE_SWEEPS=2 bounds the sweeps (every kernel still runs)
SWEEPS = int(os.environ.get("JSVD_SANITIZE_SWEEPS", "0")) or None
# JSVD_SANITIZE_ONLY=gram,rank: run only the cases whose name contains one of these (a section's cases, such as
# "start", only where a key is part of the section's name: JSVD_SANITIZE_ONLY=start, not "float32 solver")
ONLY = [k for k in os.environ.get("JSVD_SANITIZE_ONLY", "").split(",") if k]
# JSVD_SANITIZE_SKIP=delta: leave out the cases whose name contains one of these
SKIP = [k for k in os.environ.get("JSVD_SANITIZE_SKIP", "").split(",") if k]

torch.manual_seed(0)
dev = "cuda"
cases = [
    ("warp f32", torch.randn(3, 16, 16, device=dev)),
    ("warp f64", torch.randn(5, 32, 24, dtype=torch.float64, device=dev)),
    ("warp f32 two rows a lane", torch.randn(7, 64, 32, device=dev)),
    ("warp f32 one row a lane, 32 lanes", torch.randn(5, 32, 32, device=dev)),  # (128 bytes of A a lane)
    ("warp f64 one row a lane, 16 lanes", torch.randn(5, 16, 16, dtype=torch.float64, device=dev)),
    ("warp f32 four rows a lane, 8 lanes", torch.randn(9, 30, 8, device=dev)),
    ("warp f32 two rows a lane, 4 lanes", torch.randn(11, 8, 3, device=dev)),
    ("warp f64 four rows a lane, 4 lanes", torch.randn(6, 16, 4, dtype=torch.float64, device=dev)),
    ("warp f32 in place, transposed", torch.randn(3, 20, 12, device=dev).mT),  # read with the caller's strides
    ("warp f32 in place, expanded", torch.randn(1, 16, 16, device=dev).expand(3, 16, 16)),
    ("whole f32", torch.randn(3, 48, 40, device=dev)),
    ("whole f64 wide", torch.randn(2, 24, 40, dtype=torch.float64, device=dev)),
    ("whole f32 partial warp", torch.randn(2, 48, 34, device=dev)),  # 136 threads a block
    ("whole f32 registers", torch.randn(2, 100, 70, device=dev)),  # halving order, 64 lane groups
    ("whole f64 registers", torch.randn(2, 64, 64, dtype=torch.float64, device=dev)),
    ("whole f32 registers exact", torch.randn(2, 128, 128, device=dev)),  # rows split exactly (rows_exact)
    # float64 V by the log (kernel_log_v.cuh), square and odd columns on the register steps; with
    # JSVD_LOG_V=2 JSVD_WHOLE_REGS=0 all three on the shared-memory steps, 200 x 117 ending in a partial warp
    ("whole f64 log", torch.randn(2, 128, 128, dtype=torch.float64, device=dev)),
    ("whole f64 log odd", torch.randn(2, 128, 121, dtype=torch.float64, device=dev)),
    ("whole f64 log tall", torch.randn(2, 200, 117, dtype=torch.float64, device=dev)),
    ("pair f32", torch.randn(1, 300, 150, device=dev)),
    ("pair f32 exact", torch.randn(1, 256, 256, device=dev)),  # cross and intra tasks in registers, rows_exact
    ("pair f64", torch.randn(1, 200, 100, dtype=torch.float64, device=dev)),
    # carrying E = J - I (kDelta): 512 rows, 16-column blocks once a step fills the SMs (batch >= 9)
    ("pair f32 delta", torch.randn(9, 512, 512, device=dev)),
    ("gram f64", torch.randn(1, 2048, 16, dtype=torch.float64, device=dev)),
    ("gram f32", torch.randn(1, 4096, 16, device=dev)),  # float64 Gram matrix and J in shared memory
    # GEMM level (JSVD_GEMM_MIN_COLS above): batched DGEMMs around the pairs' Gram EVD, on R^T after the QR;
    # columns not a multiple of the block width, a batch of two
    ("gemm f32", torch.randn(1, 700, 650, device=dev)),
    ("gemm f64", torch.randn(2, 640, 610, dtype=torch.float64, device=dev)),
    # QR preconditioning (uniform, >= 256 columns): Householder panels of 32 and (float64, 1600 rows) 16 columns
    ("qr f32", torch.randn(2, 300, 270, device=dev)),
    ("qr f64 narrow panels", torch.randn(1, 1600, 256, dtype=torch.float64, device=dev)),
    # cuSOLVER's geqrf/ormqr where no panel fits one block (JSVD_QR_LAPACK=1 sends every blocked case there)
    ("qr f32 cusolver", torch.randn(1, 7000, 24, device=dev)),
    # a warp a panel (batches beyond two blocks an SM, panels of <= 128 rows), and float64's second QR
    ("qr f64 warp panels", torch.randn(300, 128, 128, dtype=torch.float64, device=dev)),
    # the one-launch QR of matrices in shared memory (float64 from 16 columns), tall and square
    ("qr f64 whole", torch.randn(7, 100, 40, dtype=torch.float64, device=dev)),
    ("qr f64 whole square", torch.randn(5, 64, 64, dtype=torch.float64, device=dev)),
    # ... tall, its rows sorted in the launch, graded, with zero columns (identity reflectors), Q applied to U
    # in the UT form (apply_wy.cu); and float32 tall (no row order)
    ("qr f64 whole tall graded", torch.logspace(0, -12, 1024, dtype=torch.float64, device=dev)[:, None]
     * torch.randn(3, 1024, 16, dtype=torch.float64, device=dev) * (torch.arange(16, device=dev) < 12)),
    ("qr f32 whole tall", torch.randn(4, 200, 40, device=dev)),
    # the register QR (qr_whole_regs.cu; the graded case above takes it too): 32 columns a row a thread
    # (float64), two (float32), and 5 columns padded to 8
    ("qr f64 regs 32", torch.randn(5, 200, 32, dtype=torch.float64, device=dev)),
    ("qr f32 regs 32", torch.randn(4, 300, 32, device=dev)),
    # numerically zero columns (rank deficient), subnormal entries, and S beyond the dtype's range (info -3,
    # the finite check writing it)
    ("warp f32 rank-deficient", torch.randn(3, 24, 4, device=dev) @ torch.randn(3, 4, 24, device=dev)),
    # a thread per matrix of at most 4 rows (svd_thread.cuh), rank-deficient, and a wide one read in place;
    # U's completion taking the deficient ones of 256 matrices a block
    ("thread f32 rank-deficient", torch.randn(300, 3, 1, device=dev) @ torch.randn(300, 1, 3, device=dev)),
    ("thread f64 wide in place", torch.randn(130, 4, 2, dtype=torch.float64, device=dev).mT),
    # float64 QR with its rows sorted first (row_sort.cu), graded rows
    ("qr f64 graded rows", torch.logspace(0, -12, 140, dtype=torch.float64, device=dev)[:, None]
     * torch.randn(3, 140, 130, dtype=torch.float64, device=dev)),
    ("warp f32 subnormal", torch.randn(3, 16, 16, device=dev) * 1e-40),
    ("whole f64 rank-deficient", torch.randn(2, 48, 6, dtype=torch.float64, device=dev)
     @ torch.randn(2, 6, 40, dtype=torch.float64, device=dev)),
    ("pair f32 rank-deficient", (torch.rand(1, 300, 20, device=dev) < 0.2).float()
     @ (torch.rand(1, 20, 150, device=dev) < 0.2).float()),
    ("whole f32 overflow", torch.full((2, 40, 40), 3e38, device=dev)),
    # float32's polish (kernels/engine/orth_polish.h): a warp a factor (<= 64 x 32, every such factor:
    # JSVD_POLISH_WARP=2 below; a batch not a multiple of the block's four warps) and a block a factor (U of
    # 100 rows, V of 32 by a warp)
    ("polish warp f32", torch.randn(7, 64, 32, device=dev)),
    ("polish warp f32 8 columns", torch.randn(5, 24, 8, device=dev)),
    ("polish block f32", torch.randn(3, 100, 32, device=dev)),
]
for name, A in cases:
    if (ONLY and not any(k in name for k in ONLY)) or any(k in name for k in SKIP):
        continue
    for full in (False, True):
        U, S, Vh, info = torch_jsvd.svd_ex(A, full_matrices=full, max_sweeps=SWEEPS)
        torch.cuda.synchronize()
        k = S.shape[-1]
        err = ((U[..., :k] * S[..., None, :]) @ Vh[..., :k, :] - A).norm() / A.norm()
        print(f"{name:16s} full={full!s:5s} info={info.tolist()} recon={err.item():.2e}", flush=True)
    # svd: the sweep loop that reads counts a sweep behind, to convergence (not
    # where SWEEPS bounds the sweeps: racecheck, which would take too long)
    if SWEEPS is None and ("pair" in name or "qr" in name or "gemm" in name):
        S = torch_jsvd.svd(A, full_matrices=False)[1]
        torch.cuda.synchronize()
        print(f"{name:16s} svd S[0]={S.flatten()[0].item():.4e}", flush=True)
Z = torch.zeros(2, 12, 8, device=dev)
Z[1, :, :4] = torch.randn(12, 4, device=dev)
print("rank-deficient", torch_jsvd.svd_ex(Z, full_matrices=True)[3].tolist())
Us, Ss, Vhs = torch_jsvd.svd_varlen([torch.randn(m, n, device=dev) for m, n in [(5, 3), (3, 9), (40, 40), (1, 1)]])
torch.cuda.synchronize()
print("varlen ok", [s.shape[0] for s in Ss])
# a list's polish: factors by a block on both sides of those by a warp, in one launch
if not ONLY or any(k in "polish list" for k in ONLY):
    Ss = torch_jsvd.svd_varlen([torch.randn(m, n, device=dev) for m, n in
                                [(100, 20), (40, 12), (12, 40), (64, 64), (9, 9), (200, 40)]])[1]
    torch.cuda.synchronize()
    print("polish list ok", [s.shape[0] for s in Ss])
# a list's members on the one-launch QR (JSVD_LIST_QR above), tall and wide, beside others, full U too
if not ONLY or any(k in "qr list" for k in ONLY):
    for dt in (torch.float32, torch.float64):
        shapes = [(200, 40), (40, 130), (400, 16), (64, 33), (5, 3), (60, 60), (300, 200), (0, 4)]
        As = [torch.randn(m, n, dtype=dt, device=dev) for m, n in shapes]
        As[3][:, 20:] = 0  # rank-deficient
        for full in (False, True):
            Ss = torch_jsvd.svd_varlen(As, full)[1]  # (to convergence: racecheck instruments only the QR kernels)
            torch.cuda.synchronize()
            print("qr list", dt, full, [round(s[0].item(), 3) for s in Ss if s.numel()], flush=True)
# the batched Gram eigenvectors' start (svd alone takes it: it reads its checks): float32's G and X of
# at most 16 columns by gram_products.cu, from M's own strides; long matrices' rows split over blocks,
# 12 columns padded to 16, and a column-major input read in place; Gaussian batches all pass the
# convergence check of start_converged.cu (64 columns: its largest shared memory); a tall matrix of 300
# columns passes it on the syevd route (converged_test_kernel), and 100 columns on the syevBatched route,
# whose outputs come from converged_outputs_kernel; float64's syevBatched route passes its Cholesky test
# (cholesky_checks_kernel), and a batch with a rank-one member is declined by it; near-square batches
# solve their Gram matrices in float32 (start_refine.cu's scaling, refinement and orthogonality check), those
# of at most 128 columns from 32 matrices by the engine's own solver (kernels/eigen: the tall float32 case)
if not ONLY or any(k in "start" for k in ONLY):
    for name, A in [("start f32 split rows", torch.randn(40, 30000, 16, device=dev)),
                    ("start f32 12 columns", torch.randn(2000, 512, 12, device=dev)),
                    ("start f32 column-major", torch.randn(700, 16, 1024, device=dev).mT),
                    ("start f32 64 columns", torch.randn(100, 256, 64, device=dev)),
                    ("start f32 syevd", torch.randn(1, 3000, 300, device=dev)),
                    ("start f32 syevBatched", torch.randn(20, 600, 100, device=dev)),
                    ("start f64 Cholesky", torch.randn(20, 300, 100, dtype=torch.float64, device=dev)),
                    ("start f32 float32 solver", torch.randn(32, 160, 160, device=dev)),
                    ("start f64 float32 solver", torch.randn(16, 128, 128, dtype=torch.float64, device=dev)),
                    ("start f32 tall float32 solver", torch.randn(200, 130, 65, device=dev)),
                    ("start f64 declined", torch.cat([torch.randn(19, 300, 100, dtype=torch.float64, device=dev),
                                                      torch.ones(1, 300, 100, dtype=torch.float64, device=dev)]))]:
        U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
        torch.cuda.synchronize()
        err = ((U * S[..., None, :]) @ Vh - A).norm() / A.norm()
        print(f"{name:16s} svd recon={err.item():.2e}", flush=True)
