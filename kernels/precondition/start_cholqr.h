// The start's Jacobi on X = M V0 by a Cholesky QR of X (CholeskyQR2: Fukaya, Nakatsukasa, Yanagisawa and
// Yamamoto, "CholeskyQR2: a simple and communication-avoiding algorithm for computing a tall-skinny QR
// factorization", ScalA 2014), for the long tall matrices whose X failed its converged test.
//
// Why it holds here: X's columns are orthogonal but for V0's error, about eps64 ||G|| / gap between
// eigenvalues, so X D^-1 (D: X's column norms) is well conditioned even where M is not (1e6: its column j
// mixes in others at about eps64 lambda_max / (lambda_j gap) / sigma_j, far below 1). Cholesky's pivots
// and R's inverse scale with those columns, so Q1 = X R1^-1 (R1^T R1 = X^T X, all
// in float64) is orthogonal to about eps64 cond(X D^-1)^2, and a second pass (R2^T R2 = Q1^T Q1) takes Q2
// to float64's rounding. X = Q2 R with R = R2 R1, q x q: the Jacobi then runs on R (the engine's square
// levels, a block or a warp a matrix) instead of on X's rows, and U = Q2 U_R by one product.
//
// Declined (nullopt: the caller's Jacobi on X runs) where either factorisation fails or Q1^T Q1 is
// further than kCholQrMaxDev (core.h) from I in the Frobenius norm (M rank-deficient to float64's
// rounding: its X has columns of rounding noise), and for full_matrices (U's extra columns: the QR path
// completes them). The CPU engine does the same (csrc/cpu/gram_start_cpu.h).
#pragma once

#include <optional>

#include "core.h"
#include "qr/qr_precondition.h"  // Engine

namespace jsvd {
namespace cuda {

// Whether the start's Jacobi on X of rows x cols matrices may go through CholeskyQR2:
// beyond kEighMidQrRows rows and kCholQrMinRatio rows a column, where X's Jacobi ran by the QR path or one
// block a matrix over its rows (JSVD_X_CHOLQR: -1 this rule; 0 never; 1 wherever the Jacobi on X runs).
// H100, stop 60, 2fcd686, two rounds, ms, CholeskyQR2 / the Jacobi on X as planned, singular values from 1
// to 1e-6: float32 7x200000x16 5.15, 5.29 / 20.6, 20.6 (reconstruction 3.9e-8 / 1.1e-7), 15x50000x32 3.99,
// 3.83 / 13.4, 13.5, 6x100000x64 9.47, 9.34 / 21.7, 21.9, 20x50000x16 2.66, 2.70 / 8.46, 8.85, 40x20000x32
// 3.49, 4.90 / 10.8, 11.1, 130x20000x16 4.34, 4.40 / 5.06, 5.39, 8x4096x128 2.94, 2.72 / 6.37, 6.59 (4.4e-8 /
// 1.5e-6), 20x8192x100 4.20, 4.01 / 21.6, 21.6, 1x20000x64 2.54, 2.60 / 3.62, 3.76, 1x11008x128 2.94, 3.13 /
// 3.90, 4.23, 1x20000x200 4.13, 4.29 / 7.01, 7.39; float64 7x200000x16 7.42, 7.56 / 27.1, 27.5,
// 20x100000x32 8.22, 7.98 / 35.2, 35.3, 130x20000x16 3.87, 3.76 / 8.20, 8.53, 6x100000x64 9.56, 9.41 /
// 30.6, 30.9, 1x400000x16 1.21, 1.12 / 8.46, 8.84, 1x20000x64 2.46, 2.40 / 4.42, 4.89, 30x4096x100 9.79,
// 3.84 / 51.7, 52.5; float32 7x200000x16 C=1e7 8.30, 5.25 / 20.9, 22.3, float64 6x100000x64 C=1e10 10.2,
// 10.1 / 31.1, 31.2. U and V as orthogonal (float64) or more (float32). Shorter ones, not taken: about
// equal (float32 300x900x100 C=1e4 4.07, 3.91 / 3.96, 4.23; float64 100x512x64 2.84, 2.69 / 2.90, 3.05).
// With Q by R's inverse and gram_into's split products (9a31309, as is / JSVD_X_CHOLQR=0): float32
// 7x200000x16 1.94, 1.96 / 20.2, 20.5, 15x50000x32 2.47, 2.48 / 13.3, 13.3; float64 7x200000x16 2.29,
// 2.34 / 24.9, 24.9, 20x100000x32 4.77, 4.79 / 35.1, 35.2 (docs/experiments.md, stop 60).
constexpr int64_t kCholQrMinRatio = 8;
bool x_by_cholqr(int64_t rows, int64_t cols, const SvdOptions& opt);

// Xd: (B, q, p) float64, row j holding X's column j (the start's packed X). Returns the Jacobi's packed
// outputs for X (U, S, V of X, in `dtype`, as the Jacobi on X would; V is X's V_x, not M's), or nullopt
// where declined (above). Synchronises once (the factorisations' test).
std::optional<CoreResult> jacobi_on_x_by_cholqr(const at::Tensor& Xd, at::ScalarType dtype, const SvdOptions& opt,
                                                const Engine& square);

}  // namespace cuda
}  // namespace jsvd
