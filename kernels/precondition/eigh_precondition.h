// Preconditioning by the eigenvectors of the Gram matrix (the mixed-precision
// one-sided Jacobi's starting V: an eigen-decomposition of A^T A, then
// full-precision Jacobi sweeps on A V0, whose columns start orthogonal to
// about the eigen-solver's accuracy). M^T M = V0 L V0^T by cuSOLVER's syevd
// (torch.linalg.eigh, in float64), the Jacobi on X = M V0 = U S V_x^T, so M = U S (V0 V_x)^T.
//
// H100, float32, bench_large at acb6907 against 6eca140's QR path: 1x4096² 947 -> 275 ms,
// 1x3072x768 42.5 -> 14.4, 1x1536² 61 -> 30 (a prototype counted 13 -> 3 and 10 -> 1 sweeps); with the
// eigh in float64 (stop 36) 202, 11.6 and 27.5 ms. The eigh alone is 127 ms at 4096², and batched eigh
// loops over the matrices (100x512²: 1.5 s), so one matrix a call only. Accuracy (docs/robustness.md,
// "The Gram eigenvectors' start"): X = fl(M V0) carries errors of eps |M||V0|, so a singular value far
// below eps ||M|| can lose the relative accuracy the Jacobi alone would keep: float64 never takes the start.
#pragma once

#include "core.h"
#include "qr/qr_precondition.h"  // Engine

namespace jsvd {
namespace cuda {

// Whether a uniform batch of `batch` rows x cols matrices (rows >= cols) of `elem`-byte entries takes
// it: float32, one matrix, from kEighMinCols columns; JSVD_EIGH=0 never, JSVD_EIGH=1 every uniform batch.
constexpr int64_t kEighMinCols = 768;
bool eigh_precondition_on(int64_t batch, int64_t cols, size_t elem, bool uniform);

// The SVD of a uniform packed batch A (1-D, or the 3-D (B, q, p) view) by the Jacobi `engine` on
// A V0; outputs packed as `engine`'s would be for A. Synchronises (torch.linalg.eigh checks its info
// on the host): only for calls that may (svd, svdvals; never svd_ex). Non-finite data, entries
// whose M V0 could overflow and an eigen-solver that fails leave the engine to run on A itself.
CoreResult svd_eigh_preconditioned(const at::Tensor& A, const PackedBatch& b, const SvdOptions& opt,
                                   const Engine& engine);

}  // namespace cuda
}  // namespace jsvd
