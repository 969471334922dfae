// The CPU engine's Gram eigenvectors' start: the CUDA engine's (kernels/precondition/eigh_precondition.h,
// the argument and its accuracy rule in docs/start.md) for the CPU. M^T M = V0 L V0^T by LAPACK's syevd
// (torch.linalg.eigh, float64), then this engine's Jacobi on X = M V0 = U S Vx^T, so M = U S (V0 Vx)^T:
// the Jacobi starts from columns orthogonal to about the eigen-solver's accuracy and takes two or three
// sweeps instead of ten or more.
#pragma once

#include <functional>

#include "../core.h"

namespace jsvd {

// Whether svd / svdvals (opt.may_sync: svd_ex plans without it, as on CUDA) of a uniform batch of rows x cols
// matrices take it: from kCpuStartMinCols columns (float64 kCpuStartMinColsF64, and batches of at least
// kCpuStartBatchF64 from kCpuStartBatchMinColsF64), up to kCpuStartFewBatch matrices from kCpuStartFewMinCols
// and one from kCpuStartSingleMinCols (below); JSVD_EIGH=0 never, =1 every uniform batch. Measured (stop 40,
// 2-thread AMD EPYC, best of 3, start / Jacobi on M / LAPACK's torch.linalg.svd, ms): float32 1x160² 5.7 /
// 6.9 / 3.9, 1x256² 15.8 / 27.4 / 9.5, 1x512² 88 / 155 / 61, 1x1024² 386 / 1523 / 308, 4x160² 14.0 / 20.2 /
// 12.2, 1x2000x64 5.7 / 12.4 / 3.7; float64 1x160² 5.6 / 14.6 / 5.4, 1x512² 100 / 376 / 115, 4x256² 61 / 227
// / 63, 1x2000x64 5.4 / 18.1 / 4.0, 1x500x100 5.1 / 14.4 / 5.2; not below (float32 1x128² 5.3 / 3.9,
// 100x500x32 40.5 / 36.7, 1000x128x16 58 / 32; float32 batches tie below 160: 100x128² 231 / 227, 100x96² 93
// / 95). float64 (at ebbbd10, JSVD_EIGH=1 / 0): 1x128² 5.8 / 7.0, 100x128² 247 / 418, 20x96² 35 / 56, 100x96²
// 104 / 199, 100x64² 69 / 88, but 1x96² 4.2 / 3.5.
// Since stop 49 float32 also takes it for tall batches of any size (rows >= max(4 cols, kCpuStartTallRows),
// from kCpuStartTallMinCols columns), float64 since stop 55: where M V0 is already converged (ConvergedStart,
// core.h; float32 since stop 56 by float64's test at float32's tol, converged_start_x32) no Jacobi runs at
// all. This machine (2-thread Intel Xeon, best of 5, JSVD_EIGH=1 / 0, ms):
// 100x500x32 8.9 / 19.8, 20x1000x64 7.1 / 29.2, 500x512x16 14.4 / 25.4, 200x256x16 4.3 / 6.8, 100x200x48 15.0
// / 20.0, but 100x128x32 6.5 / 6.8, 1000x128x16 20.3 / 18.2, 1000x64x16 18.9 / 12.3; with every member
// rank-deficient (the Jacobi on M V0 then runs) 500x512x16 46.8 / 43.4, 100x500x32 28.4 / 34.8, 20x1000x64
// 33.7 / 49.6. Since stop 52 float64 tall matrices (rows >= 2 cols) whose formed X passes the Jacobi's own
// test (converged_start_f64 on X^T X) skip the Jacobi on X too. This machine, two rounds, ms,
// JSVD_START_CONVERGED_F64=1 / 0: 1x4000x300 19.9-21.4 / 39.4-40.5, 1x3000x128 3.95-4.09 / 6.80-6.87,
// 16x512x64 5.33 / 7.37-7.39, 4x1000x128 6.31-6.36 / 8.59-8.76, 1x2000x200 6.1-7.5 / 8.8-9.2; ties where it
// fails (singular values over 3 or 6 decades: 16x512x64 10.1-11.5 / 10.7-11.9, 1x2000x200 19.5-19.6 /
// 19.1-19.7), and U, V and the residual identical to two digits.
// Its float64 work buffers (M, M V0 and two Gram-sized matrices a matrix) are capped at kCpuStartMaxBytes:
// a larger batch runs the Jacobi on M rather than hold several times its own size in memory.
// Since stop 55 (with the Jacobi on X of a few matrices on the calling thread, kCpuStartSerialMaxCols
// below) float32 batches from 128 columns (was 160) and up to 4 matrices of any shape from 64 (was tall
// ones only). This machine (2-thread Intel Xeon, median, ms, the start / the Jacobi on M / LAPACK's gesdd
// through torch.linalg.svd): float32 1x64² 0.26 / 0.35 / 0.27, 1x96² 0.58 / 0.84 / 0.58, 1x128² 1.08 /
// 1.65 / 1.01, 4x96² 2.79 / 3.69 / 2.26, 4x128² 4.55 / 5.83 / 4.04; float64 1x64² 0.28 / 0.58 / 0.35,
// 1x96² 0.64 / 1.52 / 0.81, 4x96² 3.12 / 5.46 / 3.06; float32 batches at 128 columns about equal (100x128²
// 94.7-96.7 / 95.0-101.7 / 99.5-101.2), with U, V and the residual ten times closer to working precision
// (recon 5.9e-8 against 9.2e-7, ||U^T U - I||_F 7.2e-7 against 4.7e-6).
constexpr int64_t kCpuStartMinCols = 128;
constexpr int64_t kCpuStartMinColsF64 = 128;
constexpr int64_t kCpuStartBatchMinColsF64 = 64;
constexpr int64_t kCpuStartBatchF64 = 16;
constexpr int64_t kCpuStartFewMinCols = 64;
constexpr int64_t kCpuStartFewBatch = 4;
// One matrix from 40 columns (this machine, median, ms, the start / the Jacobi on M / LAPACK): float64 1x40²
// 0.14 / 0.17 / 0.14, 1x48² 0.19 / 0.32-0.34 / 0.21-0.22, 1x56² 0.26 / 0.43 / 0.29, float32 1x56² 0.23 /
// 0.32 / 0.23, 1x100x40 0.14 / 0.18 / 0.30; not 1x32² (float32 0.10 / 0.09), nor two matrices (2x56² float64
// 0.46 / 0.42, float32 0.38 / 0.36).
constexpr int64_t kCpuStartSingleMinCols = 40;
// float64's tall batches since stop 55 (this machine, median, ms, the start / the Jacobi on M / LAPACK):
// 1x4000x16 0.23 / 2.96 / 0.36, 1x1000x40 0.27 / 4.53 / 0.48, 4x4000x16 0.84 / 5.24 / 1.40, 8x300x24 0.44 /
// 2.39 / 1.35, 20x1000x40 3.96 / 20.6 / 10.0, 100x500x32 10.3 / 43.6 / 23.7, 1000x256x16 29.9 / 52.1 / 48.2,
// 100x200x16 2.40 / 5.33 / 4.31 (recon 1.5e-15 against 1.0e-15); not with fewer rows (1000x64x16 22.0 /
// 17.3).
constexpr int64_t kCpuStartTallRows = 200;
constexpr int64_t kCpuStartTallMinCols = 16;
constexpr double kCpuStartMaxBytes = 4.0 * 1024 * 1024 * 1024;
// Up to kCpuStartFewBatch matrices of at most this many columns run their Jacobi on X on the calling
// thread, not on the engine's pool: LAPACK's eigh just before it leaves its OpenMP threads spinning on the
// same cores for a while. This machine (2-thread Intel Xeon, median of 40, ms, eigh then the Jacobi on
// a converged X, pool / calling thread; LAPACK's gesdd of the matrix): 96² float32 1.05 / 0.48 (gesdd
// 0.57), 128² 1.43 / 0.93 (0.98), 160² 1.89 / 1.44 (1.50), 200² 2.86 / 2.28 (2.56), 256² 3.96 / 3.76
// (4.58), but 384² 8.38 / 8.95, 512² 16.9 / 18.8.
constexpr int64_t kCpuStartSerialMaxCols = 256;
// U and V of an X that passed its test by one pass on the calling thread (factors_from_x) up to this many
// elements of X and V0 together (B q (p + q)); beyond, ATen's operations on its threads.
constexpr int64_t kCpuStartFusedOutputs = 1 << 20;
// Where X = M V0 fails its test, tall float64 matrices (rows >= kCpuCholQrMinRatio cols; not
// full_matrices) run the Jacobi on the R of a float64 CholeskyQR2 of X (core.h, kCholQrMaxDev), as the CUDA
// engine does (JSVD_X_CHOLQR: -1 this rule, 0 never, 1 always). This machine (2-thread Intel Xeon, stop 60,
// median of 5, two rounds, ms, CholeskyQR2 / the Jacobi on X, singular values from 1 to 1e-6): float64
// 1x2000x200 23.8, 23.3 / 88.0, 49.9, 16x512x64 19.8, 19.8 / 24.3, 25.9, 20x1000x64 37.0, 33.3 / 47.0, 40.1,
// 4x4000x16 2.53, 2.47 / 5.86, 5.72, 1x600x100 3.35, 3.55 / 5.38, 4.89; not float32, whose Jacobi on X runs
// in float32 (1x2000x200 23.7, 25.1 / 17.5, 17.4, 16x512x64 19.2, 22.9 / 15.0, 15.7, 1x4000x300 82.0, 82.8 /
// 66.0, 56.2; 100x500x32 and 1x1000x100 about equal).
constexpr int64_t kCpuCholQrMinRatio = 6;
bool cpu_x_by_cholqr(int64_t rows, int64_t cols, at::ScalarType dtype, const SvdOptions& opt);
// call_size: the matrices of the whole call where `batch` is a group of a list's members (jacobi_cpu.cpp):
// the few matrices' and single matrix's rules hold only where nothing else could share the threads.
bool cpu_start_on(const PackedBatch& batch, at::ScalarType dtype, const SvdOptions& opt, int64_t call_size = -1);

// The SVD of the packed uniform batch A by `jacobi_x` on A V0, outputs packed as jacobi's for A; a batch
// whose Gram diagonals fail start_limits (core.h: non-finite data, entries out of range, float64
// columns graded beyond sqrt(n eps)) or whose eigen-solver fails is solved by `jacobi` on A itself.
using CpuJacobi = std::function<CoreResult(const at::Tensor&, const PackedBatch&, const SvdOptions&)>;
CoreResult svd_gram_start_cpu(const at::Tensor& A, const PackedBatch& batch, const SvdOptions& opt,
                              const CpuJacobi& jacobi, const CpuJacobi& jacobi_x);

}  // namespace jsvd
