// Device helpers shared by the shared-memory Jacobi kernels.
#pragma once

#include <cuda_runtime.h>

#include "engine/engine_types.h"
#include "common/round_robin.h"

#include <c10/cuda/CUDAException.h>

#include <map>
#include <mutex>
#include <utility>

#include <cmath>
#include <cstdint>

namespace jsvd {
namespace cuda {

// The lanes of this thread's lane group of TPP lanes (TPP a power of two <= 32,
// groups aligned inside a warp).
template <int TPP>
__device__ __forceinline__ unsigned group_mask() {
  const unsigned lane = threadIdx.x & 31u;
  return TPP == 32 ? 0xffffffffu : (((1u << TPP) - 1u) << (lane & ~unsigned(TPP - 1)));
}

// Sum over the TPP lanes of a lane group. The mask names only the group's
// lanes, so groups of one warp may take different branches.
template <int TPP, typename T>
__device__ __forceinline__ T group_sum(T v) {
  const unsigned mask = group_mask<TPP>();
#pragma unroll
  for (int off = TPP / 2; off > 0; off /= 2) v += __shfl_xor_sync(mask, v, off, TPP);
  return v;
}

// The maximum of v over the block, returned to every thread, through red
// (shared memory, a slot per warp). Shared by the whole-matrix kernel and the
// blocked levels' prologue.
template <typename T>
__device__ T block_max(T v, T* red /* >= 32 */) {
  for (int off = 16; off > 0; off /= 2) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, off));
  const int w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  if ((threadIdx.x & 31) == 0) red[w] = v;
  __syncthreads();
  T m = 0;
  for (int i = 0; i < nw; ++i) m = fmax(m, red[i]);
  __syncthreads();
  return m;
}

// The sum of v over the block, returned to every thread, through red as block_max.
template <typename T>
__device__ T block_sum(T v, T* red /* >= 32 */) {
  for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  const int w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  if ((threadIdx.x & 31) == 0) red[w] = v;
  __syncthreads();
  T s = 0;
  for (int i = 0; i < nw; ++i) s += red[i];
  __syncthreads();
  return s;
}

// Apply a rotation in Rutishauser's update form
//   x' = x - s (y + tau x),  y' = y + s (x - tau y),  tau = s / (1 + c),
// which equals [x y] [[c, s], [-s, c]] but never rounds c (close to 1 for the
// small angles of late sweeps): each applied rotation is orthogonal to far
// better than eps. Measured in a model of this Jacobi at 96x96: ||V^T V - I||
// 794 eps -> 85 eps in float64 (136 -> 76 in float32).
template <typename T>
__device__ __forceinline__ void rotate_pair(T& x, T& y, T s, T tau) {
  const T x0 = x, y0 = y;
  x = x0 - s * (y0 + tau * x0);
  y = y0 + s * (x0 - tau * y0);
}

// rotate_pair of (x + a, y + b), less (a, b): a row of E = J - I, whose
// identity part enters as the shifts a, b (0 or 1) and is never added to E's
// own entries, which stay exact in relative terms however small they become.
template <typename T>
__device__ __forceinline__ void rotate_pair_shifted(T& x, T& y, T s, T tau, T a, T b) {
  const T x0 = x + a, y0 = y + b;
  x = x - s * (y0 + tau * x0);
  y = y + s * (x0 - tau * y0);
}

// Rutishauser's formulas (hierarchically-blocked-jacobi paper (4.3)-(4.6), the
// trigonometric case) for the rotation [x y] <- [x y] [[c, s], [-s, c]] that
// makes x^T y = 0, for a pair whose squared norms differ by `diff` (second
// minus first) and whose inner product is g: tan t, cos c, and (s, tau) for
// rotate_pair. zeta = diff / (2g), t = sign(zeta) / (|zeta| + sqrt(1 + zeta^2)).
// Every round-robin step waits for it, so for float32 it is built from the
// approximate reciprocal and reciprocal square root (about 2 ulp each) instead
// of IEEE division and sqrt: four dependent MUFU operations instead of five
// Newton-refined ones. The update form keeps each rotation orthogonal to a few
// ulp regardless (measured on the H100: the warp level's U and V orthogonality
// unchanged, benchmarks/RESULTS.md); float64 likewise, each seed refined once.
template <typename T>
struct StepRotation {
  T t, c, s, tau;
};

// MUFU reciprocal and reciprocal square root with subnormals flushed: the
// plain intrinsics wrap each in a subnormal guard (a compare and two scalings,
// ptxas), a tenth of a register step's instructions (SASS, 256² pair kernel).
// No operand here is subnormal but dy - dx, which then counts as 0: the
// angle of equal norms, the same to within its rounding.
__device__ __forceinline__ float rcp_ftz(float x) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ float rsqrt_ftz(float x) {
  float r;
  asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

__device__ __forceinline__ StepRotation<float> step_rotation(float diff, float g) {
  // |g| > eps^3 p where a rotation is computed (its norms exceed
  // negligible_norm2 and |g| > eps sqrt(dx dy)), so 1 / (2g) is finite.
  const float zeta = diff * rcp_ftz(2.0f * g);
  const float az = fabsf(zeta);
  const float w0 = 1.0f + az * az;
  const float ct = az > 1e18f ? 2.0f * az : az + w0 * rsqrt_ftz(w0);  // |zeta| + sqrt(1 + zeta^2)
  const float t = copysignf(rcp_ftz(ct), zeta);
  const float w = 1.0f + t * t;
  const float ir = rsqrt_ftz(w);  // 1 / sqrt(1 + t^2) = cos
  return {t, ir, t * ir, t * rcp_ftz(1.0f + w * ir)};
}

// float64: the same chain from the MUFU seeds, each refined by one third-order
// Newton step (which cubes the seed's relative error). IEEE division and sqrt
// in float64 are ~10 dependent operations and a branch to a slow path each (a
// CALL in SASS): four divisions and two square roots were on the critical path
// of every step (H100, 925b885: 10000 x 32² 4.6 -> 4.3 ms, 200 x 128² 6.2 ->
// 5.6, 1000 x 128x32 0.64 -> 0.58, with U and V as orthogonal). As in float32,
// the update form keeps each rotation orthogonal whatever the last ulp.
__device__ __forceinline__ double rcp_refined(double x) {
  double y;
  asm("rcp.approx.ftz.f64 %0, %1;" : "=d"(y) : "d"(x));
  const double e = fma(-x, y, 1.0);  // 1 - x y
  return fma(y, fma(e, e, e), y);    // y (1 + e + e^2)
}
__device__ __forceinline__ double rsqrt_refined(double x) {  // x >= 1 here
  double y;
  asm("rsqrt.approx.ftz.f64 %0, %1;" : "=d"(y) : "d"(x));
  const double h = fma(-x * y, y, 1.0);      // 1 - x y^2
  return fma(y * h, fma(0.375, h, 0.5), y);  // y (1 + h/2 + 3h^2/8)
}

__device__ __forceinline__ StepRotation<double> step_rotation(double diff, double g) {
  // |g| > eps sqrt(dx dy) with both norms above negligible_norm2 where a
  // rotation is computed, so 2g is a normal number.
  const double zeta = diff * rcp_refined(2.0 * g);
  const double az = fabs(zeta);
  const double w0 = fma(az, az, 1.0);
  const double ct = az > 1e150 ? 2.0 * az : az + w0 * rsqrt_refined(w0);  // |zeta| + sqrt(1 + zeta^2)
  const double t = copysign(rcp_refined(ct), zeta);
  const double w = fma(t, t, 1.0);
  const double ir = rsqrt_refined(w);  // 1 / sqrt(1 + t^2) = cos
  return {t, ir, t * ir, t * rcp_refined(fma(w, ir, 1.0))};
}

// Constants usable in device code (std::numeric_limits is host-only constexpr).
template <typename T> struct Limits;
template <> struct Limits<float> {
  static constexpr float eps = 1.1920928955078125e-07f;      // FLT_EPSILON
  static constexpr float min = 1.17549435082228750797e-38f;  // FLT_MIN
};
template <> struct Limits<double> {
  static constexpr double eps = 2.220446049250313080847e-16;    // DBL_EPSILON
  static constexpr double min = 2.2250738585072013830903e-308;  // DBL_MIN
};

template <typename T>
__device__ __forceinline__ T eps_of() {
  return Limits<T>::eps;
}

// Convergence: every pair passes |x^T y| <= tol ||x|| ||y||, tol the caller's
// (tol_arg > 0) or sqrt(p) eps.
template <typename T>
__device__ __forceinline__ double convergence_tol(double tol_arg, int p) {
  return tol_arg > 0 ? tol_arg : sqrt(static_cast<double>(p)) * static_cast<double>(eps_of<T>());
}

// The pair thresholds of the one-sided kernels, squared: a pair counts against
// convergence while g^2 > tol2 dx dy. Rotations are applied down to apply_tol:
// float32 inner products are summed in double, so they are exact at float32's
// scale and rotations are worth applying down to eps (the 512-row block pairs'
// cross steps sum x^T y in float32, a few ulp of |x| |y|: U's orthogonality at
// 512² was the same on the H100, 2.0e-5); the sweep that finds
// nothing above tol then leaves the columns (U) orthogonal to working
// precision, not just to tol (benchmarks/RESULTS.md has the measurements).
// float64 inner products carry rounding of order sqrt(p) eps, so smaller
// rotations would be noise: apply_tol = tol.
struct StepTolerances {
  double tol2, apply2;
};

template <typename T>
__device__ __forceinline__ StepTolerances step_tolerances(double tol_arg, int p) {
  const double tol = convergence_tol<T>(tol_arg, p);
  const double apply = sizeof(T) == sizeof(float) ? fmin(tol, static_cast<double>(eps_of<T>())) : tol;
  return {tol * tol, apply * apply};
}

// Numerically zero columns (README, "Convergence"): with the matrix scaled to
// max|a_ij| = 1, a column whose squared norm is at or below p eps^2 is at the
// level of the rounding errors the rotations leave in it. It takes no part in
// rotations and carries no direction in U (its U column is completed). In a
// rank-deficient matrix the n - r collapsing columns are such noise, which no
// rotation makes orthogonal to the columns it was cut from (each leaves a new
// eps of it in a random direction): under the relative test alone they were
// rotated sweep after sweep, shrinking by ~eps each time (0/1 graph matrices
// did not converge, float32 rotations of ~1e-38 norms overflowed to NaN).
// The same rule as the CPU engine (csrc/cpu/jacobi_cpu_solver.h).
template <typename T>
__device__ __forceinline__ double negligible_norm2(int p) {
  const double eps = static_cast<double>(Limits<T>::eps);
  return static_cast<double>(p) * eps * eps;
}

// Columns with norm at or below this carry no direction (see negligible_norm2).
template <typename T>
__device__ __forceinline__ double tiny_norm(int p) {
  return sqrt(negligible_norm2<T>(p));
}

template <typename T>
__device__ __forceinline__ T quiet_nan() {
  return static_cast<T>(__longlong_as_double(0x7ff8000000000000ULL));
}

// The register levels' load (svd_warp.cu, svd_thread.cuh): rows row0,
// row0 + row_step, ... (R of them) of matrix md into a[r][c], zeros outside
// its p x q, from the packed batch or the caller's tensor read in place
// (args.a_cs > 0); accumulates whether any entry is non-finite, and max|a|.
template <typename T, int R, int C>
__device__ __forceinline__ void load_register_rows(const EngineArgs<T>& args, const MatrixDesc& md, int row0,
                                                   int row_step, T (&a)[R][C], bool& bad, T& amax) {
  const T* Ag = args.A + md.a_off;
  const int64_t rs = args.a_cs > 0 ? args.a_rs : 1, cs = args.a_cs > 0 ? args.a_cs : md.p;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int row = row0 + r * row_step;
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const T x = (row < md.p && c < md.q) ? Ag[c * cs + row * rs] : T(0);
      bad |= !isfinite(x);
      amax = fmax(amax, fabs(x));
      a[r][c] = x;
    }
  }
}

// Divides a register-held matrix by max|a| so that squared norms neither
// overflow nor underflow (a division: 1 / max|a| overflows for subnormal
// max|a|). Returns the scale to multiply S by: max|a|, or 1 for a zero matrix.
template <typename T, int R, int C>
__device__ __forceinline__ double scale_register_rows(T (&a)[R][C], T amax) {
  if (!(amax > T(0))) return 1.0;
  const double scale = static_cast<double>(amax);
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int c = 0; c < C; ++c) a[r][c] /= amax;
  return scale;
}

// The outputs of matrix k when its input holds NaN or Inf: NaN S, U and V,
// info = -2 and rank = ucols (nothing for the completion kernel to fill).
// Written by `stride` threads, this one being number `first`.
template <typename T>
__device__ void write_non_finite(const EngineArgs<T>& args, const MatrixDesc& md, int k, int first, int stride) {
  const T nan = quiet_nan<T>();
  for (int i = first; i < md.q; i += stride) args.S[md.s_off + i] = nan;
  if (args.U)
    for (int64_t i = first; i < static_cast<int64_t>(md.p) * md.ucols; i += stride) args.U[md.u_off + i] = nan;
  if (args.V)  // (U without V: SvdOptions::want_v)
    for (int64_t i = first; i < static_cast<int64_t>(md.q) * md.q; i += stride) args.V[md.v_off + i] = nan;
  if (first == 0) {
    args.info[k] = -2;
    args.rank[k] = md.ucols;
  }
}

// The end of a whole matrix's sweeps (whole-matrix and blocked levels), with
// every thread of the block: from the exact squared column norms d[0, c) in
// shared memory, S in descending order (scaled back by `scale`), each
// column's position in it (order[l]), and the matrix's info and rank (columns
// with a direction). *s_rank (shared) must be 0 and d complete, behind a barrier.
// p: the matrix's rows (negligible_norm2).
template <typename T>
__device__ void write_descending_s(const double* d, int c, int p, double scale, T* S, int* order, int* s_rank,
                                   int32_t* info, int32_t* rank, int32_t info_value) {
  const double tiny = tiny_norm<T>(p);
  for (int l = threadIdx.x; l < c; l += blockDim.x) {
    const double dl = d[l];
    int r = 0;  // rank counting; ties by index, so r is a permutation
    for (int m = 0; m < c; ++m) r += (d[m] > dl) || (d[m] == dl && m < l);
    order[l] = r;
    const double nrm = sqrt(dl);
    S[r] = static_cast<T>(nrm * scale);
    if (nrm > tiny) atomicAdd(s_rank, 1);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    *info = info_value;
    *rank = *s_rank;
  }
}

// Dynamic shared memory above the default 48 KB (static shared memory
// included) must be opted into, per kernel and device. The attribute call costs
// a few microseconds of host time, so it is made only when a launch needs more
// than was already allowed.
template <typename Kernel>
inline void allow_dynamic_smem(Kernel kernel, size_t bytes) {
  static std::mutex mu;
  static std::map<std::pair<int, const void*>, size_t> allowed;
  int device = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(mu);
  size_t& a = allowed[{device, reinterpret_cast<const void*>(kernel)}];
  if (bytes <= a) return;
  C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  a = bytes;
}

}  // namespace cuda
}  // namespace jsvd
