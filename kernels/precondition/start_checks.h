// The Gram eigenvectors' start (eigh_precondition.h): its float64 operand and the checks that decide
// whether the start may run, in three launches. They were about twenty tensor operations, whose host
// time left the device idle in a batch of small tall matrices (H200, stop 39: 0.3 of 0.93 ms at float64
// 1000x128x32 under the profiler). Nothing synchronises; `bad` is read by the caller.
#pragma once

#include <ATen/ATen.h>

namespace jsvd {
namespace cuda {

// W: a (B, q, p) view (any strides) of float32 or float64 entries. Writes Ws (B, q, p), contiguous
// float64: W's entries, in float64 each matrix scaled by the power of two that brings max |w| into
// [1, 2) when `scale` (exact; a zero matrix is left as it is), and sets *bad (int32, on the device; the
// caller zeroes it) where a matrix holds NaN or Inf or an entry above `limit` in magnitude.
void start_operand(const at::Tensor& W, const at::Tensor& Ws, bool scale, double limit, const at::Tensor& bad);

// G: (B, q, q) contiguous float64 Gram matrices (diagonal: the squared column norms). Sets *bad where a
// matrix's smallest diagonal entry is below min_ratio² times its largest (a zero matrix passes).
void start_column_ratio(const at::Tensor& G, double min_ratio, const at::Tensor& bad);

}  // namespace cuda
}  // namespace jsvd
