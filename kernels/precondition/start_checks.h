// Whether the Gram eigenvectors' start (eigh_precondition.h) may run on a batch, decided from the Gram
// matrices' diagonals (M's squared column norms) in one launch, with nothing synchronised: the caller
// reads *bad once. Every entry of M lands in a diagonal entry, so a NaN or Inf in M shows there; and by
// Cauchy-Schwarz no entry of G, nor any partial sum of the GEMM that formed it, exceeds the largest
// diagonal entry, so G overflowed nowhere if that is finite. No pass over M of its own, and no scaled
// copy: these checks were about twenty tensor operations, whose host time left the device idle in a
// batch of small tall matrices (H200, stop 40, float64 1000x128x32 0.89 -> 0.70 ms; with the input read
// in place, planner.cpp, 0.63, and 1000x1024x16 1.05 -> 0.75).
#pragma once

#include <ATen/ATen.h>

namespace jsvd {
namespace cuda {

// G: (B, q, q) contiguous float64 Gram matrices of M (p x q). Sets *bad (int32 on the device, zeroed by
// the caller) for a matrix whose diagonal d holds a NaN, or where q max d > max_trace (the bound on
// ||M||_F² that keeps M V0 and the Jacobi on it within range; Inf fails it), or 0 < max d < min_top
// (squares below it lose digits to underflow; a G of zeros, M's entries all below sqrt(tiny), starts
// from V0 = I), or min d < min_ratio² max d (float64's graded columns; 0 for none).
void start_checks(const at::Tensor& G, double max_trace, double min_top, double min_ratio, const at::Tensor& bad);

}  // namespace cuda
}  // namespace jsvd
