// Whether the Gram eigenvectors' start (eigh_precondition.h) may run on a batch, decided from the Gram
// matrices' diagonals (M's squared column norms; the rule: start_limits, core.h) in one launch, with
// nothing synchronised: the caller reads *bad once. Every entry of M lands in a diagonal entry, so a NaN
// or Inf in M shows there. No pass over M of its own, and no scaled copy: these checks were about twenty tensor operations, whose host time left the device idle in a
// batch of small tall matrices (H200, stop 40, float64 1000x128x32 0.89 -> 0.70 ms; with the input read
// in place, planner.cpp, 0.63, and 1000x1024x16 1.05 -> 0.75).
#pragma once

#include <ATen/ATen.h>

#include "core.h"

namespace jsvd {
namespace cuda {

// G: (B, q, q) contiguous float64 Gram matrices of M (p x q). Sets *bad (int32 on the device, zeroed by
// the caller) for a matrix whose diagonal fails the rule of `limits` (start_limits, core.h); with B entries
// in `bad`, bad[b] for matrix b.
void start_checks(const at::Tensor& G, const StartLimits& limits, const at::Tensor& bad);

// Tests on the Gram matrices' Cholesky factorisations (L, info: potrf_batched, syev_batched.h) before
// syevBatched, which costs many times more: sets *bad for a matrix whose factorisation failed, or with
// more than `max_small` pivots L_jj^2 below `ratio` times its largest diagonal entry G_jj; a zero matrix
// passes. float64's early test (eigh_precondition.h, kEighMinEigRatioF64), max_small 0: as lambda_min <=
// L_jj^2 and lambda_max >= G_jj, such a matrix's eigenvalues span more than `ratio`, which the test after
// syevBatched would find too. float32's choice of the eigen-solver's precision (kEvd32PivotRatio): the
// pivots of a Gram matrix track its eigenvalues (the leading minors' determinants are products of the
// largest ones, times factors of a random orientation's), so their count below the ratio estimates how
// many eigenvectors a float32 solver cannot resolve.
void cholesky_checks(const at::Tensor& G, const at::Tensor& L, const at::Tensor& info, double ratio,
                     const at::Tensor& bad, int64_t max_small = 0);

}  // namespace cuda
}  // namespace jsvd
