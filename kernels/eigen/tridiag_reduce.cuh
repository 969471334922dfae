// The tridiagonal reduction (LAPACK xSYTD2's lower form, Householder reflectors H_k = I - tau v v^T) of one
// symmetric matrix of n <= NMAX columns a CTA, each row in one thread's registers: row k, the step's column by
// symmetry, goes through shared memory from its owner; the trailing block's symv and rank-2 update read only
// the broadcast v and w (3 n shared values a step). Phases between the CTA's barriers and sums, so that the
// host can run them thread by thread (cpp_tests/evd_small_test.cpp); reduce_phases, below, strings them together.
#pragma once

#include <cmath>

#include "eigen/smem_vec4.cuh"
#include "host_device.h"

namespace jsvd {
namespace cuda {
namespace eigen {

// (each array 16-byte aligned, as the CTA's copy is: smem_vec4.cuh's four values a load or store)
template <typename T, int NMAX>
struct RegsShared {
  alignas(16) T xs[NMAX];
  alignas(16) T v[NMAX];
  alignas(16) T w[NMAX];
};

template <typename T, int NMAX>
struct RegsThread {
  T a[NMAX];  // row t (zeros beyond n)
  T xt, vt, p, wt, tau;
};

// Row t of the lower-stored G (row-major n x n).
template <typename T, int NMAX>
JSVD_HOST_DEVICE_INLINE void regs_load(RegsThread<T, NMAX>& s, const T* g, int n, int t) {
#pragma unroll
  for (int j = 0; j < NMAX; ++j) s.a[j] = (t < n && j < n) ? (t >= j ? g[t * n + j] : g[j * n + t]) : T(0);
}

// 1. The owner of row k broadcasts it.
template <typename T, int NMAX>
JSVD_HOST_DEVICE_INLINE void regs_owner(const RegsThread<T, NMAX>& s, RegsShared<T, NMAX>& sh, int k,
                                        int t) {
  if (t == k) {
#pragma unroll
    for (int j = 0; j < NMAX; j += 4) store4(sh.xs + j, s.a[j], s.a[j + 1], s.a[j + 2], s.a[j + 3]);
  }
}

// 2. This thread's share of sigma = ||x(2:)||^2 (x: column k below the diagonal).
template <typename T, int NMAX>
JSVD_HOST_DEVICE_INLINE T regs_sigma_part(RegsThread<T, NMAX>& s, const RegsShared<T, NMAX>& sh, int k,
                                          int t) {
  s.xt = sh.xs[t];
  return t >= k + 2 ? s.xt * s.xt : T(0);
}

// 3. The reflector (xLARFG), in every thread; v_t to shared memory; the outputs.
template <typename T, int NMAX>
JSVD_HOST_DEVICE_INLINE void regs_reflector(RegsThread<T, NMAX>& s, RegsShared<T, NMAX>& sh, int k,
                                            int t, T sigma, int n, T* d, T* e, T* tau_out, T* V) {
  const T alpha = sh.xs[k + 1];
  // (a column below rtmin = sqrt(tiny / eps) is left as it is: alpha^2 + sigma there has lost digits to
  // underflow, and tau would not match v (xLARFG rescales instead). The dropped entries are below 4.4e-16 of
  // ||G|| in float32, where G comes scaled by its trace.)
  const T rtmin = sizeof(T) == 8 ? T(1.4156865331029228e-146) : T(4.440892e-16f);
  T tau = 0, beta = alpha;
  bool reflect = false;
  if (sigma > 0) {
    const T b = -copysign(sqrt(alpha * alpha + sigma), alpha);
    if (fabs(b) >= rtmin) {
      beta = b;
      tau = (beta - alpha) / beta;
      reflect = true;
    }
  }
  const T scale = reflect ? T(1) / (alpha - beta) : T(0);
  s.tau = tau;
  s.vt = t == k + 1 ? T(1) : (t >= k + 2 ? s.xt * scale : T(0));
  sh.v[t] = s.vt;
  if (t > k && t < n) V[static_cast<size_t>(k) * n + t] = s.vt;  // (row k: the threads' stores coalesce)
  if (t == 0) {
    d[k] = sh.xs[k];
    e[k] = beta;
    tau_out[k] = tau;
  }
}

// 4. p_t = tau (A22 v)_t; returns this thread's share of p^T v. Chunks of 32 columns left of the trailing
// block skipped (v is 0 there).
template <typename T, int NMAX>
JSVD_HOST_DEVICE_INLINE T regs_symv(RegsThread<T, NMAX>& s, const RegsShared<T, NMAX>& sh, int k) {
  T p = 0;
#pragma unroll
  for (int c = 0; c < NMAX / 32; ++c) {
    if (k + 1 >= 32 * (c + 1)) continue;
#pragma unroll
    for (int j = 32 * c; j < 32 * (c + 1); j += 4) {
      const Vec4<T> v = load4(sh.v + j);
      p += s.a[j] * v.x;
      p += s.a[j + 1] * v.y;
      p += s.a[j + 2] * v.z;
      p += s.a[j + 3] * v.w;
    }
  }
  s.p = p * s.tau;
  return s.p * s.vt;
}

// 5. w_t = p_t - K v_t, K = tau p^T v / 2.
template <typename T, int NMAX>
JSVD_HOST_DEVICE_INLINE void regs_w(RegsThread<T, NMAX>& s, RegsShared<T, NMAX>& sh, int k, int t,
                                    T pv) {
  const T K = T(0.5) * s.tau * pv;
  s.wt = t > k ? s.p - K * s.vt : T(0);
  sh.w[t] = s.wt;
}

// 6. A22 -= v w^T + w v^T, row t.
template <typename T, int NMAX>
JSVD_HOST_DEVICE_INLINE void regs_update(RegsThread<T, NMAX>& s, const RegsShared<T, NMAX>& sh, int k,
                                         int t) {
  if (t <= k) return;
#pragma unroll
  for (int c = 0; c < NMAX / 32; ++c) {
    if (k + 1 >= 32 * (c + 1)) continue;
#pragma unroll
    for (int j = 32 * c; j < 32 * (c + 1); j += 4) {
      const Vec4<T> w = load4(sh.w + j), v = load4(sh.v + j);
      s.a[j] -= s.vt * w.x + s.wt * v.x;
      s.a[j + 1] -= s.vt * w.y + s.wt * v.y;
      s.a[j + 2] -= s.vt * w.z + s.wt * v.z;
      s.a[j + 3] -= s.vt * w.w + s.wt * v.w;
    }
  }
}

// The end: rows n-2 and n-1 to shared memory (xs, w), then thread 0 writes the last d and e.
template <typename T, int NMAX>
JSVD_HOST_DEVICE_INLINE void regs_end_rows(const RegsThread<T, NMAX>& s, RegsShared<T, NMAX>& sh, int n,
                                           int t) {
  if (t == n - 2) {
#pragma unroll
    for (int j = 0; j < NMAX; ++j) sh.xs[j] = s.a[j];
  }
  if (t == n - 1) {
#pragma unroll
    for (int j = 0; j < NMAX; ++j) sh.w[j] = s.a[j];
  }
}

template <typename T, int NMAX>
JSVD_HOST_DEVICE_INLINE void regs_end_out(const RegsShared<T, NMAX>& sh, int n, T* d, T* e, T* tau_out) {
  d[n - 2] = sh.xs[n - 2];
  d[n - 1] = sh.w[n - 1];
  e[n - 2] = sh.w[n - 2];
  tau_out[n - 2] = 0;
}

// reduce_kernel's sequence for one matrix (evd_small.cu; the host test runs it thread by thread): Cta as
// evd_tail.cuh's tail_phases takes it, and sum(f), the sum of f(t) over the threads, which every thread gets
// (never two sums without a phase between them: evd_small.cu's block_sum has no barrier before its own
// writes); regs(t): thread t's rows. Five barriers a step.
template <typename T, int NMAX, typename Cta, typename Regs>
JSVD_HOST_DEVICE void reduce_phases(Cta& cta, Regs&& regs, RegsShared<T, NMAX>& sh, const T* G, int n, T* d, T* e,
                                    T* tau, T* V) {
  cta.all([&](int t) { regs_load(regs(t), G, n, t); });
  if (n == 1) {
    cta.first([&] { d[0] = regs(0).a[0]; });
    return;
  }
  if (n > 2) cta.all([&](int t) { regs_owner(regs(t), sh, 0, t); });
  for (int k = 0; k < n - 2; ++k) {
    const T sigma = cta.sum([&](int t) { return regs_sigma_part(regs(t), sh, k, t); });
    cta.all([&](int t) { regs_reflector(regs(t), sh, k, t, sigma, n, d, e, tau, V); });
    const T pv = cta.sum([&](int t) { return regs_symv(regs(t), sh, k); });
    cta.all([&](int t) { regs_w(regs(t), sh, k, t, pv); });
    // (the next step's owner broadcasts its updated row in the same phase: this step's reads of xs, in the
    // reflector's phase, are two sums' barriers behind; one barrier a step fewer)
    cta.all([&](int t) {
      regs_update(regs(t), sh, k, t);
      if (k + 1 < n - 2) regs_owner(regs(t), sh, k + 1, t);
    });
  }
  cta.all([&](int t) { regs_end_rows(regs(t), sh, n, t); });
  cta.first([&] { regs_end_out(sh, n, d, e, tau); });
}

}  // namespace eigen
}  // namespace cuda
}  // namespace jsvd
