// Inverse iteration's solve for the start's own eigen-solver (tridiag_eigenpairs.cuh's f_vectors and
// f_resolve): x <- (T - lambda I)^-1 x for one thread's lambda, by xLAGTF's factorisation (P L U, rows swapped
// where the subdiagonal is the larger, pivots below pivtol nudged to it) and xLAGTS's solve with its scaling
// (their methods, not their code), without storing the factors. The forward pass factors and eliminates at
// once and keeps only the factorisation's state (a, c) at the first row of each segment of kLuSeg rows; the
// back substitution, last segment first, factors each segment again from its state into registers. Until
// stop 87 the factors went to global scratch (four values a row, 2 KB a thread at n = 128) and each solve
// read them back at an L2 latency every four rows; refactoring a row costs one chain of a reciprocal and
// a few FMAs, and the results are the stored factors' to the bit (host: cpp_tests/evd_small_test.cpp).
#pragma once

#include <cmath>

#include "host_device.h"

namespace jsvd {
namespace cuda {
namespace eigen {

// x / y: float32's by the hardware reciprocal (two ulps: bisection and inverse iteration are indifferent to
// it; H200, stop 84: a third off the bisection), float64's IEEE.
template <typename T>
JSVD_HOST_DEVICE_INLINE T qdiv(T x, T y) {
#ifdef __CUDA_ARCH__
  if constexpr (sizeof(T) == 4) return __fdividef(x, y);
#endif
  return x / y;
}

// A pivot below pivtol in magnitude nudged to it, its sign kept (xLAGTF's perturbation).
template <typename T>
JSVD_HOST_DEVICE_INLINE T nudged_pivot(T a, T pivtol) {
  return fabs(a) < pivtol ? (a < 0 ? -pivtol : pivtol) : a;
}

// Rows a segment of the back substitution refactors into registers, and the segments of n <= NMAX rows.
constexpr int kLuSeg = 16;
template <int NMAX>
constexpr int kLuSegs = (NMAX - 1 + kLuSeg - 1) / kLuSeg;

// The factorisation's state at row i: the pivot candidate a and the row's superdiagonal entry c.
template <typename T>
struct alignas(2 * sizeof(T)) LuState {
  T a, c;
};

// Row i of the factorisation from its state (a, c), which it advances to row i + 1: u0 the pivot's reciprocal,
// u1 the first superdiagonal of U, l the multiplier, piv whether the rows were swapped (U's second
// superdiagonal is then e[i + 1]).
template <typename T>
JSVD_HOST_DEVICE_INLINE void lu_row(const T* d, const T* e, int n, T lambda, T pivtol, int i, LuState<T>& st, T& u0,
                                    T& u1, T& l, bool& piv) {
  const T sub = e[i], dn = d[i + 1] - lambda, cn = i + 1 < n - 1 ? e[i + 1] : T(0);
  if (fabs(st.a) >= fabs(sub)) {
    const T p = nudged_pivot(st.a, pivtol);
    const T m = qdiv(sub, p);
    u0 = qdiv(T(1), p);
    u1 = st.c;
    l = m;
    piv = false;
    st.a = dn - m * st.c;
    st.c = cn;
  } else {
    const T m = qdiv(st.a, sub);
    u0 = qdiv(T(1), sub);
    u1 = dn;
    l = m;
    piv = true;
    st.a = st.c - m * dn;
    st.c = -m * cn;
  }
}

// x <- (T - lambda I)^-1 x (n >= 2, T = tridiag(e, d, e); x stride sx), then scaled by its largest entry (only
// its direction matters), and scaled down on the way where it grows past big (xLAGTS's scaling). ck: the
// segments' states (kLuSegs entries of stride s: one thread's of a CTA's interleaved).
template <typename T>
JSVD_HOST_DEVICE void inverse_solve(const T* d, const T* e, int n, T lambda, T pivtol, LuState<T>* __restrict__ ck,
                                    int s, T* __restrict__ x, int sx) {
  LuState<T> st{d[0] - lambda, e[0]};
  T prev = x[0];  // (x[i] after its update: in a register, not read back)
  for (int i = 0; i < n - 1; ++i) {
    if (i % kLuSeg == 0) ck[(i / kLuSeg) * s] = st;
    T u0, u1, l;
    bool piv;
    lu_row(d, e, n, lambda, pivtol, i, st, u0, u1, l, piv);
    const T nxt = x[(i + 1) * sx];
    x[i * sx] = piv ? nxt : prev;
    prev = piv ? prev - l * nxt : nxt - l * prev;
  }
  // Back substitution, the whole of x (solved part and right-hand side) scaled down after each chunk of four
  // rows (counted from row n - 2) whose largest entry passed big: a step grows x by at most ~3 / eps, and four
  // from big stay finite.
  const T big = sizeof(T) == 8 ? T(1e100) : T(1e6);
  T x1 = prev * qdiv(T(1), nudged_pivot(st.a, pivtol)), x2 = 0;  // x[r + 1], x[r + 2]
  x[(n - 1) * sx] = x1;
  T amax = fabs(x1), cmax = 0;
  for (int s0 = (n - 2) / kLuSeg * kLuSeg; s0 >= 0; s0 -= kLuSeg) {
    LuState<T> ss = ck[(s0 / kLuSeg) * s];
    T u0[kLuSeg], u1[kLuSeg];
    bool piv[kLuSeg];
#pragma unroll
    for (int q = 0; q < kLuSeg; ++q) {
      T l;
      if (s0 + q < n - 1) lu_row(d, e, n, lambda, pivtol, s0 + q, ss, u0[q], u1[q], l, piv[q]);
    }
#pragma unroll
    for (int q = kLuSeg - 1; q >= 0; --q) {
      const int r = s0 + q;
      if (r >= n - 1) continue;
      const T u2 = piv[q] && r + 1 < n - 1 ? e[r + 1] : T(0);  // (a swap's second superdiagonal)
      const T xr = (x[r * sx] - u1[q] * x1 - u2 * x2) * u0[q];
      x[r * sx] = xr;
      cmax = fmax(cmax, fabs(xr));
      x2 = x1;
      x1 = xr;
      if (((n - 2 - r) & 3) == 3 || r == 0) {  // (a chunk's last row)
        if (cmax > big) {
          const T f = T(1) / cmax;
          for (int i = 0; i < n; ++i) x[i * sx] *= f;  // (the rows still to solve too: their right-hand side)
          x1 *= f;
          x2 *= f;
          amax *= f;
          cmax = 1;
        }
        amax = fmax(amax, cmax);
        cmax = 0;
      }
    }
  }
  const T f = amax > 0 ? T(1) / amax : T(0);
  for (int i = 0; i < n; ++i) x[i * sx] *= f;
}

}  // namespace eigen
}  // namespace cuda
}  // namespace jsvd
