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

// sum over rows i = from + lane + 32 k < L of x[i] y[i], four independent chains a lane in Acc,
// returned in double.
template <typename Acc, typename T>
__device__ __forceinline__ double lane_dot_in(const T* x, const T* y, int from, int L) {
  Acc s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int i = from;
  for (; i + 96 < L; i += 128) {
    s0 += Acc(x[i]) * Acc(y[i]);
    s1 += Acc(x[i + 32]) * Acc(y[i + 32]);
    s2 += Acc(x[i + 64]) * Acc(y[i + 64]);
    s3 += Acc(x[i + 96]) * Acc(y[i + 96]);
  }
  for (; i < L; i += 32) s0 += Acc(x[i]) * Acc(y[i]);
  return double((s0 + s1) + (s2 + s3));
}

// In double: the tails' norms (their squares underflow in float32 first: householder_reflector).
template <typename T>
__device__ __forceinline__ double lane_dot(const T* x, const T* y, int from, int L) {
  return lane_dot_in<double>(x, y, from, L);
}

// Products and a lane's chains in T, as LAPACK's xGEQR2: float32's conversions to double and back
// (16 a clock an SM on the H100) bounded the Householder steps (docs/experiments.md, stop 48).
template <typename T>
__device__ __forceinline__ double lane_dot_t(const T* x, const T* y, int from, int L) {
  return lane_dot_in<T>(x, y, from, L);
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

// Column j, read by nobody any more, becomes its reflector: v_j below the diagonal (the tail times
// scale), R(j, j) = beta on it; rows split over nt threads from tid.
template <typename T>
__device__ __forceinline__ void scale_to_reflector(T* x, int j, int L, double scale, double beta, int tid, int nt) {
  for (int i = j + 1 + tid; i < L; i += nt) x[i] = T(double(x[i]) * scale);
  if (tid == 0) x[j] = T(beta);
}

// Step j of a block's xGEQR2 (householder_panel.cu's block kernel, qr_whole_smem.cu): reflector j
// from column x's head and the squared norm of its tail s_tail[j], alike in every thread and
// recorded by thread 0; column j - 1 (xp, read by nobody in this step) scaled to its reflector.
template <typename T>
__device__ __forceinline__ Reflector begin_block_step(const T* x, T* xp, int j, int L, const double* s_tail,
                                                      double* s_tau, double* s_scale, double* s_beta, int tid, int nt) {
  const Reflector h = householder_reflector(double(x[j]), s_tail[j]);
  if (tid == 0) {
    s_tau[j] = h.tau;
    s_scale[j] = h.scale;
    s_beta[j] = h.beta;
  }
  if (j > 0) scale_to_reflector(xp, j - 1, L, s_scale[j - 1], s_beta[j - 1], tid, nt);
  return h;
}

}  // namespace
}  // namespace cuda
}  // namespace jsvd
