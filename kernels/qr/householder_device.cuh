// Device helpers of the Householder QR kernels (householder_panel.cu: panels of the blocked QR;
// qr_whole_smem.cu: whole matrices in shared memory): xLARFG's reflector and the warp's sums.
#pragma once

#include <cuda_runtime.h>

namespace jsvd {
namespace cuda {
namespace {

__device__ __forceinline__ double warp_sum(double v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// sum over rows i = from + lane + 32 k < L of x[i] y[i], in double, four
// independent chains a lane.
template <typename T>
__device__ __forceinline__ double lane_dot(const T* x, const T* y, int from, int L) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int i = from;
  for (; i + 96 < L; i += 128) {
    s0 += double(x[i]) * double(y[i]);
    s1 += double(x[i + 32]) * double(y[i + 32]);
    s2 += double(x[i + 64]) * double(y[i + 64]);
    s3 += double(x[i + 96]) * double(y[i + 96]);
  }
  for (; i < L; i += 32) s0 += double(x[i]) * double(y[i]);
  return (s0 + s1) + (s2 + s3);
}

// xLARFG from column j's head alpha and the squared norm of its tail: H_j = I
// - tau v v^T, v = [1; scale x_tail], R(j, j) = beta (tau = 0 where the tail
// is already zero, and then v = e_j). A tail whose squares fall below
// DBL_MIN / eps has lost their precision to underflow, and a reflector built
// on it is not orthogonal (applied to the larger columns on its right, that
// spoiled A = QR: graded float64 columns, 1e-4 - 0.15 relative error). The
// matrix was scaled to max|a| = 1, so such a tail (norm < 1e-146) is left in
// place and dropped with R, as zero.
struct Reflector {
  double tau = 0, scale = 0, beta;
};

__device__ __forceinline__ Reflector householder_reflector(double alpha, double tail) {
  constexpr double kTinyTail = 1.0e-292;  // DBL_MIN / DBL_EPSILON
  Reflector r;
  r.beta = alpha;
  if (tail > kTinyTail) {
    const double nrm = sqrt(alpha * alpha + tail);
    r.beta = alpha >= 0 ? -nrm : nrm;
    r.tau = (r.beta - alpha) / r.beta;
    r.scale = 1.0 / (alpha - r.beta);
  }
  return r;
}

}  // namespace
}  // namespace cuda
}  // namespace jsvd
