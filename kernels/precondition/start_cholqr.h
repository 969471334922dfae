// The start's Jacobi on X = M V0 by a Cholesky QR of X (CholeskyQR2: Fukaya, Nakatsukasa, Yanagisawa and
// Yamamoto, "CholeskyQR2: a simple and communication-avoiding algorithm for computing a tall-skinny QR
// factorization", ScalA 2014), for the long tall matrices whose X failed its converged test.
//
// Why it holds here: X's columns are orthogonal but for V0's error, about eps64 ||G|| / gap between
// eigenvalues, so X D^-1 (D: X's column norms) is well conditioned even where M is not (1e6: its column j
// mixes in others at about eps64 lambda_max / (lambda_j gap) / sigma_j, far below 1). Cholesky's pivots
// and the triangular solve are invariant under that column scaling, so Q1 = X R1^-1 (R1^T R1 = X^T X, all
// in float64) is orthogonal to about eps64 cond(X D^-1)^2, and a second pass (R2^T R2 = Q1^T Q1) takes Q2
// to float64's rounding. X = Q2 R with R = R2 R1, q x q: the Jacobi then runs on R (the engine's square
// levels, a block or a warp a matrix) instead of on X's rows, and U = Q2 U_R by one product.
//
// Declined (nullopt: the caller's Jacobi on X runs) where either factorisation fails or Q1^T Q1 is
// further than kCholQrMaxDev from I in the Frobenius norm (M rank-deficient to float64's rounding: its X
// has columns of rounding noise), and for full_matrices (U's extra columns: the QR path completes them).
#pragma once

#include <optional>

#include "core.h"
#include "qr/qr_precondition.h"  // Engine

namespace jsvd {
namespace cuda {

constexpr double kCholQrMaxDev = 0.5;

// Whether the start's Jacobi on X of a batch of `batch` rows x cols matrices may go through CholeskyQR2
// (JSVD_X_CHOLQR: -1 the rule, where start_x_by_qr sends X to the QR path; 0 never; 1 wherever the Jacobi
// on X runs).
bool x_by_cholqr(int64_t batch, int64_t rows, int64_t cols, const SvdOptions& opt);

// Xd: (B, q, p) float64, row j holding X's column j (the start's packed X). Returns the Jacobi's packed
// outputs for X (U, S, V of X, in `dtype`, as the Jacobi on X would; V is X's V_x, not M's), or nullopt
// where declined (above). Synchronises once (the factorisations' test).
std::optional<CoreResult> jacobi_on_x_by_cholqr(const at::Tensor& Xd, at::ScalarType dtype, const SvdOptions& opt,
                                                const Engine& square);

}  // namespace cuda
}  // namespace jsvd
