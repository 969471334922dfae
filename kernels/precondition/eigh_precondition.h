// Preconditioning by the eigenvectors of the Gram matrix (the mixed-precision
// one-sided Jacobi's starting V: an eigen-decomposition of A^T A, then
// full-precision Jacobi sweeps on A V0, whose columns start orthogonal to
// about the eigen-solver's accuracy). M^T M = V0 L V0^T in float64 by cuSOLVER's syevd (torch.linalg.eigh;
// syevBatched for batches, syev_batched.h; this engine's Jacobi for Gram matrices of at most 64 columns),
// the Jacobi on X = M V0 = U S V_x^T, so M = U S (V0 V_x)^T.
//
// H100, float32, bench_large at acb6907 against 6eca140's QR path: 1x4096² 947 -> 275 ms,
// 1x3072x768 42.5 -> 14.4, 1x1536² 61 -> 30 (a prototype counted 13 -> 3 and 10 -> 1 sweeps); with the
// eigh in float64 (stop 36) 202, 11.6 and 27.5 ms. H200, stop 39 (docs/experiments.md), the start against
// the QR path, ms: float64 1x256² 10.4 -> 4.8, 1x512² 25.1 -> 9.3, 1x2048² 249 -> 67, 1x4096² 822 -> 397,
// 1x2000x300 15.4 -> 11.1; float32 1x256² 4.7 -> 3.2, 1x512² 20.2 -> 7.8, 1x2000x300 9.4 -> 4.7. Batched
// eigh loops over the matrices (100x512²: 1.5 s for the eigh alone; 10x1024² float64 163 -> 152, float32
// 74 -> 132 in stop 29's prototype), so a few large matrices only: float64 4x2048² 413 -> 212, 2x1024²
// 43.7 -> 30.8; float32 2x2048² 282 -> 89, 4x1024² 54.5 -> 49.1.
// Accuracy (docs/robustness.md, "The Gram eigenvectors' start"): X = fl(M V0) has errors of eps |M||V0|.
// With V0 exact, column j's are at most about eps sqrt(q) ||D v_j|| (D: M's column norms), which the
// Jacobi's own bound for M already allows (a column-graded matrix keeps its small singular values). But
// the eigen-solver resolves V0 only to its backward error, about q eps ||M^T M||: a column whose squared
// norm is below that is mixed with larger ones, whose share the Jacobi must then cancel out of it, at the
// cost of the small column's relative accuracy (the QR path keeps it). So float64 takes the start only
// where min_j ||m_j|| >= sqrt(q eps) max_j ||m_j|| in every matrix (start_limits, core.h; a zero matrix
// passes), and a batch with a matrix graded beyond it, or with a zero column, is solved without it.
#pragma once

#include <cfloat>

#include "core.h"
#include "qr/qr_precondition.h"  // Engine

namespace jsvd {
namespace cuda {

// Whether a uniform batch of `batch` rows x cols matrices (rows >= cols) of `elem`-byte entries takes
// it: one matrix of at least kEighMinCols columns, or up to kEighMaxBatch of at least kEighBatchMinCols,
// or large enough batches of near-square ones up to kSyevBatchedMaxCols (below), or batches of 65 to
// kEighMidMaxCols columns (below; tall ones, float64 near-square ones too), or batches of near-square ones
// of 129 (float64 128) to 256 columns (evd32_route_on, below: their Gram matrices solved in float32), or
// tall ones (rows >= kEighTallRatio cols; float64 kEighTallRatioF64) of kEighTallMinCols to
// kEighJacobiMaxCols columns whose work batch x rows x cols² pays the route's fixed cost (two engine
// calls, three GEMMs and the checks' launch). H200, `scripts/ab_knob.sh JSVD_EIGH` (VALUES="1 0", two
// rounds, ms, start / QR path) at 2c2bf8d: float64 1000x256x16 0.41-0.42 / 0.69-0.74, 100x512x32
// 0.45-0.46 / 0.55-0.62, 2000x64x32 1.09 / 1.38-1.51, but 100x256x32 0.45-0.50 / 0.47-0.50, 200x300x20
// 0.45-0.50 / 0.42-0.45, 1000x64x16 about equal; float32 1000x128x32 0.70-0.77 / 0.78-0.79, 300x900x32
// 0.88-0.97 / 1.14-1.24, but 100x512x32 0.51-0.62 / 0.40-0.47, 2000x64x16 0.31-0.34 / 0.14-0.17. To 64
// columns (at 087797a): float64 100x512x64 1.02 / 1.55-1.72, 200x256x64 1.39 / 2.09-2.20, 1000x256x48
// 3.20-3.24 / 4.98-5.14; float32 100x512x64 0.94-0.95 / 1.00-1.01, 200x256x64 1.32-1.34 / 1.39-1.42,
// 1000x256x48 3.08-3.11 / 3.73-3.86; beyond it the Gram matrices' own Jacobi costs more than the QR path
// saves (float32 300x900x100 12.0 / 8.1-8.2, 200x512x128 15.2 / 4.6-4.7). float64 from 2 rows a column
// (at 8e48451): 1000x64x32 0.55 / 0.75, 500x128x64 2.44 / 3.26, 100x160x64 0.83 / 1.13, 300x96x32 0.40 /
// 0.57; float32 not (1000x64x32 0.53 / 0.26, 200x100x40 0.96 / 0.57), nor square batches (10000x32²
// float32 4.3 / 1.6). float64: the data may still decline it (above). JSVD_EIGH=0 never, JSVD_EIGH=1
// every uniform batch. float32 takes it for at least cols / 2 matrices (kEighTallBatchPerCol), or beyond
// kEighMidQrRows rows: the Jacobi on A V0 solves each matrix in one block, in time linear in its rows,
// where the QR path spreads a few long ones over the device (H100, stop 43, float32 ms, start / QR path:
// 1x400000x16 27.8 / 6.0, 1x400000x32 66.1 / 3.5, 1x1000000x16 87.9 / 19.7, 4x200000x16 16.3 / 11.6, but
// 20x50000x16 5.5 / 15.0), so long matrices fewer than their columns run it by the QR path (start_x_by_qr,
// since stop 60). float64 keeps it: its QR path's U, through Householder reflectors of 400000 rows, lost
// orthogonality (1x400000x16: ||U^T U - I||_F 4.1e-13 in 8.3 ms, against 3.5e-15 in 33.9 by the start).
constexpr int64_t kEighMinCols = 256;
constexpr int64_t kEighMaxBatch = 4;
constexpr int64_t kEighBatchMinCols = 1024;
// Batches of near-square matrices (rows < 2 cols; only squares were measured) of kEighMinCols to
// kSyevBatchedMaxCols columns (float32 kSyevBatchedMaxColsF32) take it with V0 from cuSOLVER's
// syevBatched, all the Gram matrices in one call (syev_batched.h), where the batch is large enough:
// syevBatched's time hardly depends on the batch up to one matrix an SM (200x256² 20.6 ms, 100x512² 56,
// 12x768² 65-101, 10x1024² 95-120 float64), so it pays only where the Jacobi without it takes longer.
// H100, stop 47, `scripts/ab_knob.sh JSVD_EIGH` (two rounds, ms, start / QR path): float64 100x512²
// 107.8-108.3 / 189.6-189.7, 200x256² 30.1-30.3 / 62.4-62.5, 50x384² 27.7-30.9 / 51.0-51.6, 12x768²
// 70.6-80.6 / 130.5-131.1, 10x1024² 112-138 / 161; float32 100x512² 60.1-60.9 / 63.7-63.8, 200x256²
// 22.8-23.3 / 24.1-24.4, 12x768² 51.3-62.3 / 73.5-73.7, with U and V 20-40 times closer to orthogonal
// (100x512²: ||U^T U - I||_F 3.3e-5 -> 1.8e-6). Slower, so below the minimum batches: float64 20x300² 26-27
// / 16, 5x512² 43-45 / 25-26, 5x1024² 120-128 / 88-90; float32 20x512² 30-51 / 16, 30x256² 11-14 / 5.2-5.5,
// 8x384² 19.5-27 / 13.2-13.4, 5x768² 64-93 / 38, 10x1024² (syevBatched alone 95 ms, the Jacobi 75 in all),
// 200x128² 3.61-3.75 / 3.22-3.27 (fewer than kEighMinCols columns). A few large matrices keep the loop of
// syevd (2x2048² float32 71 -> 202-247 ms with syevBatched).
constexpr int64_t kSyevBatchedMaxCols = 1024;
constexpr int64_t kSyevBatchedMaxColsF32 = 768;
constexpr int64_t kSyevBatchedLargeCols = 768;  // from here the smaller minimum batch
constexpr int64_t kSyevBatchedMinBatchF64 = 40, kSyevBatchedMinBatchLargeF64 = 10;
constexpr int64_t kSyevBatchedMinBatchF32 = 100, kSyevBatchedMinBatchLargeF32 = 12;
constexpr int64_t kEighTallMinCols = 16;
constexpr int64_t kEighJacobiMaxCols = 64;
constexpr int64_t kEighTallRatio = 4;
constexpr int64_t kEighTallRatioF64 = 2;
constexpr double kEighTallMinWorkF64 = 4e7;
constexpr double kEighTallMinWork = 1e8;
constexpr int64_t kEighTallBatchPerCol = 2;
// float32 also from 300 matrices, 5 rows a column and 3e7 of work (H100, stop 50, `ab_knob.sh JSVD_EIGH`
// VALUES="1 -1", two or three rounds, ms, start / QR path, measured before kGramTolF32 below made the start
// faster still): 300x256x32 0.38-0.60 / 0.58-0.59, 500x256x16 0.19-0.30 / 0.25-0.26, 1000x128x24 0.56-0.70 / 0.72-0.76, 300x512x16 0.26-0.28 /
// 0.36, 1000x128x16 0.25 / 0.26-0.28, 400x256x24 0.48-0.62 / 0.51; not with fewer matrices (100x256x48
// 1.12-1.19 / 0.61-0.71, 50x512x32 0.45-0.47 / 0.36-0.41, 200x256x32 and 200x200x32 about equal) or
// fewer rows (300x128x32 0.49-0.59 / 0.48, 2000x64x16 0.25-0.34 / 0.14-0.16, 1000x64x32 0.50-0.58 /
// 0.25-0.31).
constexpr int64_t kEighManyMinBatch = 300;
constexpr int64_t kEighManyRatio = 5;
constexpr double kEighManyMinWork = 3e7;
// Batches (syevBatched: more than kEighMaxBatch matrices) of 65 to kEighMidMaxCols columns, between the
// engine's Gram Jacobi and kEighMinCols: float32 tall ones (rows >= kEighMidRatio cols), where the converged
// test mostly skips the Jacobi on X and U and V are float64's rounded; float64 also near-square ones
// below kEighMidMaxCols columns (below).
// Matrices beyond kEighMidQrRows rows run the Jacobi on X by the QR path (below). H100, stop 51,
// `ab_knob.sh JSVD_EIGH` (two rounds, ms, the start forced or by this rule / QR path, ||U^T U - I||_F of
// the start / of the QR path; 300x900x100, 37x300x77, 5x2000x100, 6x500x128 and the C= cases with
// converged_outputs_kernel, the rest before it):
// 300x900x100 4.44-4.47 / 6.35-6.52 (1.3e-7 / 1.5e-5), 37x300x77 1.13-1.21 / 1.16-1.18 (1.7e-7 / 7.0e-6),
// 10x1000x100 1.26-1.41 / 1.95-2.17, 100x200x100 1.79-1.90 / 2.43-2.60, 100x400x100 1.92 / 2.17-2.25,
// 200x1000x128 4.51-4.87 / 5.98-6.09, 300x400x80 3.27-3.34 / 4.06-4.23, 1000x256x128 14.9 / 31.4-31.6,
// 5x2000x100 1.07-1.17 / 2.42-2.65, 6x500x128 1.15-1.51 / 2.22-2.41; ill-conditioned (singular values
// from 1 to 1/C, `measure.py :cond=C`): 100x400x100 C=1e5 1.71 / 2.19, 300x900x100 C=1e4 6.26-6.32 /
// 6.55-6.60, 20x600x100 C=1e6 1.67-1.72 / 1.87-1.99, 10x300x77 C=1e6 1.16-1.50 / 1.22-1.36. Not taken:
// longer matrices, whose Jacobi on X runs one block a matrix where it still has to rotate (8x4096x128
// 1.37-1.52 / 6.18-6.41 Gaussian, but C=1e6 17.4-17.5 / 6.26-6.55; 30x4096x100 C=1e6 16.4-16.8 /
// 6.29-6.44; 40x2000x128 C=1e6 4.51-4.68 / 4.35-4.42: kEighMidQrRows, below); near-square ones (500x96²
// 5.13-5.28 / 3.95-4.15, 1000x128x80 8.07-8.20 / 5.47-5.63, 200x128² 3.74-3.82 / 3.37-3.92); beyond 128
// columns (20x600x150 8.3-10.8 / 5.5-5.7, 50x2000x200 10.5-12.9 / 10.5-10.7; stop 52: 64x200² 11.3-13.0 /
// 7.3-7.7, and float64 40x160² 12.5-13.5 / 7.5-8.5, 64x200² 15.0-15.8 / 13.9-14.9).
// float64: Gaussian batches gain (stop 52, two rounds, ms, start / QR path: 200x100² 3.67-3.79 /
// 7.19-7.22, 200x112² 4.37-4.66 / 9.63-9.89, 200x120² 4.84-5.19 / 8.58-8.83, 500x96² 6.76 / 13.1,
// 200x256x128 4.55-4.89 / 6.17-6.58, 100x512x128 3.06-3.07 / 4.42-4.62, 10x300x77 1.07-1.59 / 2.51-2.52,
// 200x100² C=1e6 3.60-3.62 / 6.13-6.31), save squares of 128 columns, where the QR path's kernels are
// faster (200x128² 5.88-6.18 / 5.72-6.33, 500x128² 12.9-13.1 / 12.2-12.6). Ill-conditioned ones lost
// where syevBatched's eigenvalues declined them only after it (kEighMinEigRatioF64: 200x100² C=1e12
// 7.54-7.57 / 5.76-5.79, 100x1000x100 C=1e10 6.41-6.42 / 5.17-5.18, 10x300x77 C=1e8 7.37-7.40 /
// 6.56-6.60): float64's V0 there leaves the Jacobi on X as many sweeps as on M. So float64's Gram matrices
// are first factored by Cholesky (cholesky_checks, start_checks.h), which declines most such batches
// before syevBatched (with it: C=1e12 6.42-6.59 / 6.05-6.15, C=1e10 5.60-5.69 / 5.32-5.37; C=1e8, whose
// pivots do not show it, 7.92-8.02 / 6.71-6.83).
constexpr int64_t kEighMidMaxCols = 128;
constexpr int64_t kEighMidRatio = 2;
inline bool eigh_mid_cols(int64_t cols) { return cols > kEighJacobiMaxCols && cols <= kEighMidMaxCols; }
// The Jacobi on X of matrices beyond kEighMidQrRows rows (65 to kEighMidMaxCols columns) by the QR path
// (JSVD_START_X_QR=0 never): X's Jacobi otherwise runs a block a matrix where it still has to rotate.
// H100, stop 52, `ab_knob.sh JSVD_START_X_QR` with the start forced (two rounds, ms, QR path on X /
// Jacobi on X / the QR path without the start; ||U^T U - I||_F): 8x4096x128 1.22-1.23 / 1.24 / 6.22
// (7.4e-8 / 7.4e-8 / 2.8e-5); C=1e6 6.15-6.16 / 17.4 / 6.17 (2.8e-6 / 1.9e-6 / 3.1e-5); 30x4096x100
// C=1e6 6.62-6.65 / 16.4-16.6 / 6.21; 20x8192x100 1.64-2.07 / 1.66-1.67 / 20.6; C=1e6 21.4 / 33.7-34.0 /
// 20.7.
// Also fewer matrices than columns beyond kEighMidQrRows rows, where rows >= kEighMidRatio cols (a square
// X's R costs the Jacobi what X would: H200, stop 62, 1x4096² float32 272 ms on the QR path against 170):
// the one block a matrix costs time linear in its rows and the QR path time linear in the batch's rows, so
// the QR path wins on few matrices, and float32 takes the start there too (below cols / 2 matrices it had kept the QR path,
// kEighTallBatchPerCol). H100, stop 60, fe6802a, two rounds, ms, the start forced with the Jacobi on X by
// the QR path / by one block a matrix / the QR path without the start (`JSVD_EIGH=0`): Gaussian float32
// (X passes its test) 7x200000x16 0.40-0.47 / 20.4-21.0 (the QR path), 15x50000x32 0.98-1.13 / 12.4-12.5,
// 6x100000x64 1.82-1.89 / 19.4-19.8; singular values from 1 to 1e-6, float32 7x200000x16 20.5 / 29.8-30.2
// / 20.1-20.7, 15x50000x32 13.4-13.8 / 25.4-25.5 / 12.4-12.6, 6x100000x64 21.9-22.2 / 135 / 19.4-19.6,
// but 20x50000x16 15.3-15.4 / 8.4-8.5 / 15.2-15.6, 40x20000x32 26.5-26.7 / 11.1 / 25.3-25.4, 130x20000x16
// 37.5-37.8 / 5.1-5.4 / 36.9-37.0; float64 7x200000x16 27.2-27.6 / 69.9-70.2 / 24.3-24.4, 15x50000x32
// 18.2-18.5 / 41.3 / 16.9-17.0, 20x100000x32 35.6-35.9 / 80.8-80.9 / 33.8-34.0, 6x100000x64 30.8-31.1 /
// 223 / 28.2-28.6, but 40x20000x32 33.2-33.5 / 17.5-17.7 / 32.0-32.1, 130x20000x16 53.7-53.9 / 8.6-9.3 /
// 52.9-53.1.
constexpr int64_t kEighMidQrRows = 2048;
// A few tall matrices (up to kEighMaxBatch, rows >= kEighTallRatioF64 cols) of kEighTallMinCols to
// kEighMinCols columns, float32 and float64, whose work batch x rows x cols² reaches kEighFewMinWork: V0
// from syevd (the engine's Gram Jacobi to 64 columns), and the Jacobi on X, where X's test fails, by the
// QR path (start_x_by_qr): one block a matrix on X's rows is what made an ill-conditioned long matrix
// slow (float64 1x400000x16 C=1e6 76 ms; 8.6 through the QR path, below). H100, stop 59, `ab_knob.sh
// JSVD_EIGH` (two rounds, ms, start forced / the rule before, the Jacobi on X of 65-128 columns beyond
// 2048 rows already by the QR path; ||U^T U - I||_F): float32 1x11008x128 2.49, 2.19 / 3.12, 3.37 (4.4e-8
// / 1.2e-5), 1x20000x200 2.82, 2.35 / 7.82, 7.94, 1x3000x200 2.35, 2.34 / 5.00, 5.32, 1x400x200 2.14 / 5.21,
// 5.44, 1x260x128 2.01 / 4.17, 4.19, 1x400000x16 0.32, 0.29 / 6.08, 6.27, 4x400000x16 0.42 / 23.0,
// 1x100000x32 0.49, 0.41 / 1.69, 1.76, 1x1000x16 0.17 / 0.22, 0.25, 1x300x64 0.65 / 0.70, 0.74, 2x20000x200
// 4.27 / 12.0, 12.2; about equal 4x11008x128 7.60, 7.25 / 7.41, 7.58, 4x3000x200, 1x500x100, 1x2000x100;
// float64 1x11008x128 2.39, 2.18 / 5.92, 6.38, 1x20000x200 2.41, 2.24 / 12.7, 13.2, 1x400x200 2.22 / 8.26,
// 8.88, 1x1000x100 1.87 / 4.27, 4.48, 4x3000x200 7.51 / 13.6, 14.0, 1x512x64 0.74 / 1.24, 1.35. Forced
// before start_x_by_qr, singular values from 1 to 1e-6 (X fails its test) ran the one-block Jacobi on X:
// float32 1x20000x200 72 / 7.9, float64 1x20000x200 247 / 10.8, 1x3000x200 40 / 7.9. With it (the rule /
// the QR path, JSVD_EIGH=0): float32 1x20000x200 7.12 / 8.03, 1x3000x200 4.14 / 4.82, 1x400000x16 6.21 /
// 6.01, 1x11008x128 3.89 / 3.09, 1x100000x32 2.07 / 1.61, 1x20000x64 3.44 / 1.98 (U 1.4e-6 / 5.4e-6);
// float64 1x20000x200 9.64 / 11.0, 1x3000x200 6.76 / 8.15, 1x400000x16 8.55 / 8.33 (76 with the batches'
// rule before), 1x100000x32 2.68 / 2.19 (61), 1x20000x64 4.46 / 3.06 (40), 1x11008x128 6.27 / 5.33: such
// inputs pay the eigen-solver for nothing, up to 75%.
constexpr double kEighFewMinWork = 2.5e5;
bool eigh_few_tall(int64_t batch, int64_t rows, int64_t cols);
// Whether the start's Jacobi on X runs by the QR path (kEighMidQrRows, eigh_few_tall; JSVD_START_X_QR=0
// never, 1 always).
bool start_x_by_qr(int64_t batch, int64_t rows, int64_t cols);
// float64 batches on syevBatched's route are declined after it where a matrix's least eigenvalue is below
// kEighMinEigRatioF64 of its largest. V0 resolves the eigenvector of G's eigenvalue lambda_j to about
// eps lambda_max / lambda_j, so X's columns start that far from orthogonal; where that nears 1 the Jacobi
// on X takes as many sweeps as on M, each dearer than the QR path's (V carried along). Eigenvalues below a
// few eps lambda_max are the solver's rounding, so the test cannot tell cond(M) = 1e9, where keeping the
// start still pays, from 1e12, where it costs twice the QR path; 32 eps declines both. H100, stop 51,
// 200x256², ms, singular values from 1 to 1/C (with this test / without it), `ab_knob.sh JSVD_EIGH_COND`:
// C=1e6 34.5 / 34.4 (both kept), 1e7 39.7 / 38.6 (kept), 1e8 69.1 / 44.9, 1e9 67.7 / 55.1, 1e10 66.8 /
// 67.8, 1e12 65.1 / 97.7; the QR path (JSVD_EIGH=0) 50.7 at 1e6, 47.4 at 1e12; Gaussian 30.3 / 30.3 (QR path
// 62.2). 1e12 also: 40x300x256 22.1 / 32.5 (QR path 12.3), 100x512² 368 / 381 (321). A batch declined
// there paid the Gram matrices and syevBatched for nothing, so the Gram matrices' Cholesky pivots are
// tested first (cholesky_checks, start_checks.h: a pivot below the ratio bounds the least eigenvalue below
// it; JSVD_EIGH_COND=2 only the eigenvalues, 0 neither): stop 52, 200x256² C=1e12 48.1-48.2 / 64.3-64.7
// (JSVD_EIGH_COND 1 / 2), at a cost of 30.4-30.5 -> 31.0-31.1 on a Gaussian batch. (float32 keeps the
// start: 100x512² C=1e6 58.2 against 65.5 on the QR path, 200x256² 23.0 against 24.9.)
constexpr double kEighMinEigRatioF64 = 32 * DBL_EPSILON;
// float32's Gram matrices (float64) need their Jacobi only to eps32 / 8, not to float64's tolerance: the
// one-sided Jacobi on G stops where every pair of G V0's columns is within tol of orthogonal, which leaves
// C = V0^T G V0's pairs within about tol / 2 of it, below the float32 rounding of X = M V0 (V0 stays
// orthogonal to float64's rounding either way). It saves about a sweep (H100, stop 50, three rounds, ms,
// eps32 / 8 / float64's default): 1000x1024x16 0.32-0.34 / 0.39-0.43, 1000x128x32 0.49-0.50 / 0.58-0.87,
// 100x512x64 0.69-0.79 / 0.96-1.19, 200x256x64 0.98-1.02 / 1.26-1.51; ||U^T U - I||_F 2.5e-8 -> 4.1e-8,
// 1.2e-7 -> 1.3e-7, 1.1e-7 -> 1.5e-7, 1.5e-7 -> 1.9e-7.
constexpr double kGramTolF32 = FLT_EPSILON / 8.0;
bool eigh_precondition_on(int64_t batch, int64_t rows, int64_t cols, size_t elem, bool uniform);
// The start with float64 Gram eigen-solvers (eigh_precondition_on's rules before stop 54; the float32
// solver's routes below are the others).
bool start_f64_gram_on(int64_t batch, int64_t rows, int64_t cols, size_t elem);

// Batches of near-square matrices (rows < 2 cols) of kEvd32MinColsF32 (float64 kEvd32MinColsF64) to
// kEvd32MaxCols columns, float32 from kEvd32MinBatchF32 matrices and float64 from kEvd32MinBatchF64, solve
// their Gram matrices in float32 on syevBatched (evd32_route_on): each G (formed in float64) scaled by its
// trace, rounded and solved, V0 then made orthogonal to float64's rounding by Newton-Schulz steps
// (newton_schulz_step: ||V0^T V0 - I||_F
// ~3e-5 -> ~1e-9 -> float64's rounding; one step for float32, two for float64), so that V = V0 V_x keeps
// the working precision's orthogonality. X = M V0 then starts about eps32 lambda_max / gap from
// orthogonal, not converged, and its Jacobi takes two sweeps more (3 against 1 in float32, 4 against 2 in
// float64); the result is the Jacobi's either way (before the refinement below, float32's U was as
// orthogonal as the QR path's: 200x256² ||U^T U - I||_F 1.1e-5, 1.3e-6 from float64's converged X,
// gesvda's 9.5e-6). It pays because syevBatched
// has a step at 256 columns: H100, stop 54, syevBatched alone (a probe at 8d6c443, float64 / float32 Gram
// matrices, ms): 64x200² 12.0 / 3.0, 100x160² 18.0 / 2.8, 200x256² 20.3 / 8.2, but 100x320² 23.5 / 23.7,
// 100x384² 30.2 / 24.8, 100x512² 55.3 / 40.4, 12x768² 53.7 / 51.8, where the extra sweeps cost more than
// the solver saves (to 512 columns, ms: 100x384² 37.4-38.5 / 34.7-34.8, 100x512² 57.2-57.4 / 61.1-61.5
// but with singular values from 1 to 1e-3 65.2-65.3 / 57.4-57.7). `ab_knob.sh JSVD_START_EVD32` (two
// rounds, ms, this route / JSVD_START_EVD32=0: the float64 solver's route where its rule takes the batch,
// else the QR path), stop 54 at 50bb1fb: float64 64x200² 7.4-7.7 / 13.6-14.3, 16x200² 5.2 / 8.8-9.4,
// 100x160² 6.1-6.5 / 7.8-8.2, 40x300x256 7.9-8.0 / 12.7-13.0, 200x256² 26.8 / 28.1; float32 64x200²
// 5.1-5.2 / 7.3, 32x200² 4.2-4.3 / 5.0-5.1, 100x160² 4.5-4.6 / 5.6-5.8, 32x256² 4.9-5.1 / 5.3-5.8; at 52ee076
// 200x256² 14.9-15.4 / 22.8-23.4, 300x256² 22.1-22.2 / 32.5-32.6, 100x300x256 9.7 / 15.1-15.7 (there
// float64's X passed the converged test: U to 5.4e-7, here 1.2e-5). JSVD_START_EVD32=0 never, =1 on
// every batch syevBatched solves, without the pre-test below.
// float64 from 128 columns, where the float64 solver's route ends (kEighMidMaxCols; the QR path took its
// squares of 128). H100, stop 58, `ab_knob.sh JSVD_START_EVD32` (two rounds, ms, with the pre-test / =0):
// float64 200x128² 5.37, 5.38 / 5.81, 5.72 (||U^T U - I||_F 2.3e-14 / 7.5e-14), 16x128² 2.48, 2.52 / 3.29,
// 3.13, with singular values from 1 to 1e-6 (declined by the pre-test) 200x128² 5.62, 5.51 / 5.42, 5.38;
// by bench_gpu.py's timing, same build, 5.38, 5.72 / 5.59, 5.57. Not below: float64 50x112² 2.69, 2.68 /
// 2.42, 2.27, 200x97² 3.74, 3.76 / 3.93, 3.77 (its own solver then). Not float32 below 129 columns: 200x128²
// measured 3.23, 3.27 / 3.56, 3.55 by measure.py but 3.69, 3.22 / 3.56, 3.64 by bench_gpu.py, and 64x128²
// 2.16, 2.10 / 1.82, 1.88; its U then 1.4e-6 from orthogonal against the whole-matrix Jacobi's 4.2e-7 and
// gesvda's 4.3e-7 (issue 20 asks for better than gesvda's).
constexpr int64_t kEvd32MinColsF32 = 129, kEvd32MinColsF64 = 128, kEvd32MaxCols = 256;
constexpr int64_t kEvd32MinBatchF32 = 32, kEvd32MinBatchF64 = 16;
// Ill-conditioned batches leave it: float32's solver leaves the eigenvectors of eigenvalues below about
// eps32 lambda_max unresolved, and X's Jacobi then takes nearly as many sweeps as M's (H100, stop 54,
// singular values from 1 to 1e-6, ms, float32 / float64 Gram matrices: 200x256² 32.2-32.7 / 23.0-23.1,
// 100x512² 103.2-103.6 / 58.4-59.5). A matrix with more than q / kEvd32ColsPerSmallPivot of its Gram
// matrix's Cholesky pivots below kEvd32PivotRatio times its largest diagonal entry (cholesky_checks,
// start_checks.h) sends the batch to the float64 solver's route where float32's rule for it takes it,
// else to the QR path (float64's rule would decline such a batch by its pivots or eigenvalues); G is
// shifted by kEvd32Shift times that entry, far below the ratio but above float64's rounding of G, so that
// a singular G's factorisation does not stop at its first zero pivot (two equal columns are one small
// pivot). The test's cost (the factorisation and its read), ms, with it / JSVD_START_EVD32=0: 200x256²
// float32 to 1e-6 23.8-24.2 / 22.9-23.5, float64 64x200² to 1e-6 11.9-12.1 / 11.5.
constexpr double kEvd32PivotRatio = 1e-5;
constexpr double kEvd32Shift = 1e-10;
constexpr int64_t kEvd32ColsPerSmallPivot = 32;
// V0 refined by one first-order step before X is formed (refine_eigenvectors: Ogita and Aishima's, each
// pair's rotation S_ij / (S_jj - S_ii) of S = V0^T G V0 where at most kRefineMaxAngle, the whole scaled to
// a Frobenius norm of at most kRefineMaxNorm), which takes X's largest cosine from ~1e-2 to ~2e-6 (this
// machine's CPU engine, Gaussian 200² and 256²). H100, stop 54, `ab_knob.sh JSVD_START_REFINE` before the norm's cap
// (two rounds, ms, on / off, ||U^T U - I||_F): float32 200x256² 14.8-15.2 / 15.3-15.6 (2.4e-6 / 1.1e-5;
// recon 6.4e-8 / 1.3e-7), 64x200² 5.2-5.8 / 5.5-5.8 (1.8e-6 / 8.8e-6), 100x160² 4.7-5.2 / 4.8-5.1 (1.5e-6
// / 7.1e-6); float64 64x200² 7.1-7.6 / 7.8-8.0, 16x200² 5.5-6.1 / 5.8-6.2, 100x160² 6.0-6.6 / 6.6-6.9
// (recon 1.2e-15 / 1.6e-15). The cap (and a Newton-Schulz step more) came after, from an emulation: an
// uncapped E on a matrix of equal singular values left V0 far from orthogonal. Stop 55, with the cap (at
// 75de322, on / off, two rounds): float32 200x256² 15.3-15.9 / 15.4-15.8 (U 2.4e-6 / 1.1e-5), float64
// 64x200² 7.0-7.9 / 7.5-8.2; every singular value 1 (one sweep on X either way) float32 64x200² 4.4-5.1 /
// 4.1-4.7, float64 16x200² 3.9-4.0 / 3.7-4.2; tests/test_start_evd32.py passed both ways. On by default
// since stop 55 (JSVD_START_REFINE=0 off).
constexpr double kRefineMaxAngle = 0.1, kRefineMaxNorm = 0.25;
// The largest ||V0^T V0 - I||_F the route keeps (a solver's eigenvectors to ~3.6e-4 from orthogonal pass,
// in float64 to ~1.2e-3 after its two steps; float64's rounding leaves ~1e-14 at 200 columns).
constexpr double kEvd32MaxOrthF32 = 1e-7, kEvd32MaxOrthF64 = 1e-12;
// Whether a uniform batch (rows >= cols) takes the start on that route (JSVD_START_EVD32=1: every batch on
// syevBatched's routes), before its data's pre-test.
// x_tested (svd's reduced U, svdvals: X = M V0 tested for convergence): float32's tall batches too (rows >=
// kEighMidRatio cols, 65 to kEighMidMaxCols columns, from kEvd32TallMinBatch matrices; near-square ones
// too, JSVD_START_EVD32_SQUARE, below), V0 refined N times
// (JSVD_START_EVD32_TALL=N, 2; 0: the float64 solver) and X tested as the float64 solver's is; their
// pivots' test asks more (kEvd32TallPivotRatio), since X short of converged after the refinements costs
// the Jacobi on X after the start: at stop 65 (H200, N = 0 / 2 / 1, ms) 40x300x77 with singular values from
// 1 to 1/300 1.42 / 3.38 / 2.17, 300x900x100 to 1/100 4.05 / 3.99 / 7.35. Stop 66, with the element-wise
// steps in one kernel each (start_refine.h), one build, two rounds, `--reps 7`, ms, N = 0 / 1 / 2: Gaussian
// 300x900x100 4.31, 4.75 / 3.64, 3.63 / 3.93, 3.86; 200x1000x128 4.04, 3.91 / 3.21, 3.26 / 3.53, 3.59;
// 300x400x80 3.20, 3.02 / 2.48, 2.50 / 2.75, 2.62; to 1/100 300x900x100 4.00, 4.01 / 7.15, 7.16 / 3.67, 3.69
// (the ratio 1e-5's pivots' test); 37x300x77 1.01, 1.09 / 1.12, 1.15 / 1.25, 1.17; at stop 65, unfused,
// 100x400x100 1.83 / 2.10 / 2.08 and 100x200x100 1.66 / 2.09 / 2.22: the solver's saving grows with the
// batch, the refinements' launches do not. Two refinements, not one: one left X unconverged to 1/100.
// Stop 89, with the own eigen-solver (evd_small, from 32 matrices) in place of syevBatched: H200 at 4fa5615,
// one build, two rounds, ms, limit 64 / 200: 64x300x77 1.01, 1.01 / 1.44, 1.43; 150x1000x65 1.31, 1.31 /
// 2.13, 2.05; 100x260x128 1.38, 1.37 / 2.14, 2.12; 199x300x77 1.26, 1.28 / 2.31, 2.25; same accuracy. Below
// 64 no gain (limit 32: 37x300x77 and 48x300x77 within noise, slower with a member to 1/100; host-bound,
// 0.63 ms of GPU work in 1.1 ms; docs/start.md). Stop 90, with the route's one read (eigh_precondition.cpp):
// from 32, the own solver's least batch (kEvdSmallMinBatch), below which syevBatched cannot skip a declined
// batch's work.
constexpr int64_t kEvd32TallMinBatch = 32;
// Gram eigenvalues below 1e-3 lambda_max (more than q / kEvd32ColsPerSmallPivot pivots below it) send a
// tall batch to the float64 solver: a spectrum to 1/100 (1e-4 in G) is declined, Gaussian tall members
// (rows >= 2 cols: lambda_min / lambda_max >= ~0.03) pass, and so do a few zero singular values.
// Near-square ones (rows < 2 cols; JSVD_START_EVD32_SQUARE=0: not on the route), whose Gaussian members
// have eigenvalues to 1e-7 lambda_max and a dozen below 1e-3, keep kEvd32PivotRatio: their alternative is the Jacobi on M,
// not the float64 solver. Two refinements left X converged in 48 of 48 Gaussian 128² and 100² members
// (largest cosine 4e-11 and 5e-9 against kX32's 1.2e-6), 200 of 200 128² and 198 of 200 100² (a CPU
// emulation, .scratch/s67_square_evd32.py). H200, stop 67, two rounds, ms, on / off: 200x128² 3.17, 3.09 /
// 3.48, 3.49, with singular values to 1/100 2.97, 2.93 / 4.29, 4.22, 200x100² 2.56, 2.71 / 2.59, 2.51; but
// ||U^T U - I||_F 9.5e-7 / 4.2e-7 (gesvda's 4.3e-7 at 200x128²), the unpolished Jacobi's level (r.polish
// is off after the start; the Jacobi on M's U is polished): presumably some member's X failed its test and
// the batch ran the Jacobi on X, not looked into on the GPU. Not adopted then; that U is polished since
// (svd_eigh_preconditioned's last step): H200, stop 68, on / off, ms, two rounds, U 3.7e-7 to 4.5e-7 from
// orthogonal either way, reconstruction 5e-8 against 9e-7: 200x128² 3.69, 3.48 / 3.69, 3.63; 200x120²
// 3.44, 3.28 / 3.30, 3.34; 200x112² 2.96, 2.87 / 3.02, 2.82; 200x100² 3.06, 2.76 / 2.55, 2.50 (the one
// loss); 200x96² 2.37, 2.38 / 2.35, 2.19; 400x112² 4.94, 4.95 / 5.28, 5.45; not quite square, where the
// Jacobi on M is slow, 200x160x112 2.73, 2.48 / 5.39, 5.46, 200x200x120 2.80, 3.03 / 6.90, 6.93; singular
// values to 1/100: 200x128² 3.44, 3.48 / 4.27, 4.43, 200x120² 2.62, 2.83 / 4.01, 3.98, 200x100² 2.21,
// 2.42 / 3.05, 3.03. On by default.
constexpr double kEvd32TallPivotRatio = 1e-3;
// Near-square batches of at least kEvd32SquareLongRatio rows a column take that route from 40 matrices
// (JSVD_START_EVD32_SQUARE), squarer ones from kEvd32SquareMinBatch: H200, stop 68, route / without, ms, two
// rounds: 40x200x120 1.45, 1.51 / 3.69, 3.72; 100x160x112 2.00, 2.18 / 2.79, 3.00; but Gaussian squares,
// whose Jacobi on M fills one wave, lose below 200: 100x128² 2.30, 2.44 / 2.02, 1.94; 100x100² 1.92, 2.11 /
// 1.34, 1.37; 40x100² 1.38, 1.44 / 1.30, 1.28; 40x128² 1.53, 1.80 / 1.79, 1.78 (with singular values to
// 1/100 1.67, 1.85 / 2.23, 2.12; 16x128² 1.44, 1.33 / 1.74, 1.74).
constexpr double kEvd32SquareLongRatio = 1.4;
constexpr int64_t kEvd32SquareMinBatch = 200;
// And from kEvd32SquareMidCols columns, from kEvd32SquareMidRatio rows a column: H200, stop 70, route / not
// (JSVD_START_EVD32_SQUARE_RATIO 100 / 140), ms, two rounds: 100x150x120 1.98, 2.19 / 3.66, 3.58 (to 1/100
// 2.17, 2.12 / 4.75, 4.62); 100x140x112 1.87, 1.88 / 2.07, 2.08; 40x140x112 1.74, 1.59 / 2.01, 2.15;
// 100x130x112 2.00, 2.11 / 2.17, 2.23; but 100x120x100 1.82, 2.13 / 1.38, 1.36 and 40x120x100 1.63, 1.43 /
// 1.23, 1.41 (the Jacobi on M's 220 rows with V's fill one register bucket at 16 lanes a rotation).
constexpr int64_t kEvd32SquareMidCols = 112;
constexpr double kEvd32SquareMidRatio = 1.15;
bool evd32_route_on(int64_t batch, int64_t rows, int64_t cols, size_t elem, bool x_tested = false);

// Whether a batch's Gram eigenvectors come from syevBatched (syev_batched.h), not a loop of syevd: more
// than kEighMaxBatch matrices, where this build's cuSOLVER has it.
bool syev_batched_on(int64_t batch);

// Whether a rows x cols matrix (rows >= cols) is of the near-square shapes syevBatched's start takes
// (kEighMinCols to kSyevBatchedMaxCols columns, float32 kSyevBatchedMaxColsF32, rows < 2 cols), and the
// fewest such matrices of `cols` columns a batch needs for it (kSyevBatchedMinBatch*, from
// kSyevBatchedLargeCols the smaller minimum). A list's members take the same rule (list_start.h).
bool syev_batched_square(int64_t rows, int64_t cols, size_t elem);
int64_t syev_batched_min_batch(int64_t cols, size_t elem);

// Whether the Gram matrices' eigenvectors come from this engine's Jacobi (a batch in one call, the warp
// or shared-memory level: at most kEighJacobiMaxCols columns) rather than torch.linalg.eigh (syevd, one
// matrix at a time). JSVD_GRAM_EIG_JACOBI_COLS may move that bound down, or up to kGramJacobiKnobMaxCols
// (float64 A and V of 96 columns fit one block, as do start_converged's three q x q), for an A/B against
// syevBatched on the batches of 65 to 96 columns it would take. Measured (H200, stops 68 and 73; 64 / 96, ms):
// float32 37x300x77 1.05-1.24 / 1.91-2.19, float64 1.24-1.47 / 2.01-2.27, float32 40x256x80 1.03-1.29 /
// 2.02-2.24: a block a Gram matrix on 37 of 132 SMs is slower than syevBatched.
constexpr int64_t kGramJacobiKnobMaxCols = 96;
bool gram_eig_by_jacobi(int64_t cols);

// The engines the start runs: `jacobi`, the call's planned Jacobi (on A V0); `without_start`, the call
// planned as if the start did not exist (QR included); `alone`, the Jacobi on a batch as it is (no QR,
// no start: the Gram matrices).
struct StartEngines {
  Engine jacobi, without_start, alone;
};

// The SVD of a uniform packed batch A (1-D, or the 3-D (B, q, p) view) by the Jacobi on A V0; outputs
// packed as the Jacobi's would be for A. Synchronises (torch.linalg.eigh checks its info on the host;
// the batched route reads its checks last): only for calls that may (svd, svdvals; never svd_ex).
// Non-finite data, entries whose M V0 could overflow, an eigen-solver that fails and float64 columns
// graded beyond start_limits' ratio go to `without_start`. evd32_ok = false: not the float32 solver's route
// (a batch its pivots' test declined after the solver ran, the one-read form of that route).
CoreResult svd_eigh_preconditioned(const at::Tensor& A, const PackedBatch& b, const SvdOptions& opt,
                                   const StartEngines& e, bool evd32_ok = true);

}  // namespace cuda
}  // namespace jsvd
