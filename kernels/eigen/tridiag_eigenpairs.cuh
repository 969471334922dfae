// The eigenpairs of one symmetric tridiagonal matrix T = tridiag(e, d, e) a CTA (n <= NMAX, a thread an
// eigenpair), as the start's own eigen-solver needs them (evd_small.h), with no thread's work serialised by a
// cluster:
//   T split at negligible off-diagonals (xSTEBZ's test) into unreduced blocks;
//   bisection on Sturm counts, a thread an eigenvalue, to about eps ||T|| (xSTEBZ's default ABSTOL);
//   inverse iteration, a thread a vector, all at once (xLAGTF's factorisation, two solves, xLAGTS's
//   scaling: tridiag_solve.cuh, the factors refactored where the back substitution needs them), the vectors
//   in Zt (shared memory, entry r of thread j at r (NMAX + 1) + j);
//   each cluster (neighbours closer than 1e-3 ||T||, xSTEIN's ORTOL) orthonormalised by the whole CTA, all
//   clusters at once: as a block where its vectors are well conditioned (CholeskyQR twice), else member after
//   member (Gram-Schmidt twice: a thread a dot product, a thread a row); a member's second solve after that
//   (two in a row would square the spread of the members' amplifications, up to 1e-3 / eps, and leave them
//   numerically dependent), then the clusters orthonormalised again.
// A cluster's vectors span its invariant subspace, not its eigenvectors one by one: the Jacobi after the start
// resolves within it. Phases between the barriers, so that the host can run them thread by thread
// (cpp_tests/evd_small_test.cpp); evd_tail.cuh's tail_phases strings them together.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>

#include "eigen/tridiag_solve.cuh"
#include "host_device.h"

namespace jsvd {
namespace cuda {
namespace eigen {

// Gershgorin interval of T.
template <typename T>
JSVD_HOST_DEVICE_INLINE void gershgorin(const T* d, const T* e, int n, T& lo, T& hi) {
  lo = d[0];
  hi = d[0];
  for (int i = 0; i < n; ++i) {
    const T r = (i > 0 ? fabs(e[i - 1]) : T(0)) + (i + 1 < n ? fabs(e[i]) : T(0));
    lo = fmin(lo, d[i] - r);
    hi = fmax(hi, d[i] + r);
  }
  const T pad = (hi - lo) * T(2.0e-7) + T(1e-30);
  lo -= pad;
  hi += pad;
}

// A deterministic start vector entry in [-1, 1).
JSVD_HOST_DEVICE_INLINE float start_entry(uint32_t i, uint32_t r) {
  uint32_t h = i * 2654435761u ^ (r + 0x9e3779b9u) * 2246822519u;
  h ^= h >> 15;
  h *= 2246822519u;
  h ^= h >> 13;
  return static_cast<float>(h & 0xffffff) / 8388608.0f - 1.0f;
}

template <typename T, int NMAX>
struct EigShared {
  T d[NMAX], e[NMAX], e2[NMAX], bl[NMAX], dot[NMAX];
  int block_of[NMAX], block_start[NMAX + 1], cl_first[NMAX], cl_size[NMAX], cl_fail[NMAX];
  int multi[NMAX / 2];  // (the first members of the clusters of two or more, in no order; n_multi of them)
  int cl_cgs[NMAX];     // (at a cluster's first member: orthonormalised member by member, not as a block)
  T scale;
  int max_cluster, max_cgs, n_multi, retry;  // (max_cgs: the largest cluster member by member)
  int cl_repl[NMAX];  // (at a cluster's first member: one of its members replaced in round 0)
  int replaced;       // (a cluster kept its round-0 vectors with a replaced member: the matrix's flag)
};

// Zt's row stride (the vectors, a column a thread: Zt[r ZLD + j]): NMAX + 1, so that a warp's threads reading
// one column at 32 rows (the clusters' row updates, f_cgs_sub) hit 32 banks rather than one; a row read by
// consecutive threads stays conflict-free.
template <int NMAX>
constexpr int kZtLd = NMAX + 1;
// A cluster of up to kBlockCluster members is orthonormalised as a block (CholeskyQR twice: its Gram matrix,
// Cholesky, a triangular solve a row) where each Cholesky pivot keeps at least kBlockPivot of its member's
// squared norm; else, or when larger, member by member (Gram-Schmidt twice, which replaces or reverts a
// dependent member). The clusters of a square Gaussian M's Gram matrix (~10 eigenvalues near zero at n = 128)
// keep 0.95 of it after either solve (host emulation, stop 85); low-rank and duplicated columns' zero
// clusters fall to 6e-8 after the first.
constexpr int kBlockCluster = 32;
constexpr double kBlockPivot = 1.0 / 16;

template <typename T>
JSVD_HOST_DEVICE_INLINE T feps() { return sizeof(T) == 8 ? T(DBL_EPSILON) : T(FLT_EPSILON); }
template <typename T>
JSVD_HOST_DEVICE_INLINE T ftiny() { return sizeof(T) == 8 ? T(DBL_MIN) : T(FLT_MIN); }

JSVD_HOST_DEVICE_INLINE void smem_max(int* p, int v) {
#ifdef __CUDA_ARCH__
  atomicMax(p, v);
#else
  if (v > *p) *p = v;
#endif
}
JSVD_HOST_DEVICE_INLINE int smem_fetch_add(int* p, int v) {
#ifdef __CUDA_ARCH__
  return atomicAdd(p, v);
#else
  const int old = *p;
  *p += v;
  return old;
#endif
}

// 1. Load, a thread an entry.
template <typename T, int NMAX>
JSVD_HOST_DEVICE void f_load(EigShared<T, NMAX>& sh, const T* d, const T* e, int n, int j) {
  if (j < n) sh.d[j] = d[j];
  if (j < n - 1) sh.e[j] = e[j];
}
// 2. Negligible off-diagonals to 0 (|e_j| <= eps sqrt|d_j d_j+1|, xSTEBZ's test), their squares.
template <typename T, int NMAX>
JSVD_HOST_DEVICE void f_split(EigShared<T, NMAX>& sh, int n, int j) {
  if (j < n - 1) {
    T x = sh.e[j];
    if (fabs(x) <= feps<T>() * sqrt(fabs(sh.d[j]) * fabs(sh.d[j + 1])) + ftiny<T>()) x = 0;
    sh.e[j] = x;
    sh.e2[j] = x * x;
  }
}
// 3. The unreduced blocks, ||T||'s Gershgorin bound (thread 0).
template <typename T, int NMAX>
JSVD_HOST_DEVICE void f_blocks(EigShared<T, NMAX>& sh, int n) {
  int nblk = 0;
  sh.block_start[0] = 0;
  for (int r = 0; r < n; ++r) {
    sh.block_of[r] = nblk;
    if (r == n - 1 || sh.e[r] == 0) sh.block_start[++nblk] = r + 1;
  }
  T lo, hi;
  gershgorin(sh.d, sh.e, n, lo, hi);
  sh.scale = fmax(fabs(lo), fabs(hi));
  sh.max_cluster = 1;
  sh.max_cgs = 1;
  sh.n_multi = 0;
  sh.retry = 0;
  sh.replaced = 0;
}
// The Sturm counts of T - x_i I (the negative pivots of its LDL^T) at three shifts x_0 < x_1 < x_2 at once: three
// independent chains of divisions, which a thread's instruction stream overlaps (one chain a step is bound by
// the division's latency, not by the issue rate, at the tail's 12 warps an SM).
template <typename T>
JSVD_HOST_DEVICE_INLINE void sturm_counts(const T* d, const T* e2, int nb, T pivmin, T x0, T x1, T x2, int& c0,
                                          int& c1, int& c2) {
  T q0 = d[0] - x0, q1 = d[0] - x1, q2 = d[0] - x2;
  if (fabs(q0) < pivmin) q0 = -pivmin;
  if (fabs(q1) < pivmin) q1 = -pivmin;
  if (fabs(q2) < pivmin) q2 = -pivmin;
  c0 = q0 < 0;
  c1 = q1 < 0;
  c2 = q2 < 0;
  for (int i = 1; i < nb; ++i) {
    const T di = d[i], ei = e2[i - 1];
    q0 = di - x0 - qdiv(ei, q0);
    q1 = di - x1 - qdiv(ei, q1);
    q2 = di - x2 - qdiv(ei, q2);
    if (fabs(q0) < pivmin) q0 = -pivmin;
    if (fabs(q1) < pivmin) q1 = -pivmin;
    if (fabs(q2) < pivmin) q2 = -pivmin;
    c0 += q0 < 0;
    c1 += q1 < 0;
    c2 += q2 < 0;
  }
}
// 4. Thread j: its block's (j - bs)-th largest eigenvalue, by bisection on Sturm counts to |hi - lo| <= 2 eps
// ||T|| (||T|| by Gershgorin; bl descending within each block). Two halvings a pass: the counts at the midpoint
// and at both quarter points (sturm_counts), the quarter point of the half the first keeps being the second's
// midpoint, the same value as 0.5 (lo + hi) of that half: the intervals, the stopping test after each halving
// and the eigenvalues are one halving a pass's to the bit, for 1.5 times the divisions in half the dependent
// chain a halving.
template <typename T, int NMAX>
JSVD_HOST_DEVICE void f_bisect(EigShared<T, NMAX>& sh, int n, int j) {
  if (j >= n) return;
  const int k = sh.block_of[j], bs = sh.block_start[k], nb = sh.block_start[k + 1] - bs;
  const T* d = sh.d + bs;
  const T* e2 = sh.e2 + bs;
  T lo, hi;
  gershgorin(d, sh.e + bs, nb, lo, hi);
  if (nb == 1) {
    sh.bl[j] = d[0];
    return;
  }
  T emax2 = 0;
  for (int i = 0; i + 1 < nb; ++i) emax2 = fmax(emax2, e2[i]);
  const T pivmin = ftiny<T>() * fmax(T(1), emax2);
  const T abstol = T(2) * feps<T>() * sh.scale;
  const int idx = nb - 1 - (j - bs);  // (ascending index)
  for (int it = 0; it < 128; it += 2) {
    const T mid = T(0.5) * (lo + hi);
    if (hi - lo <= abstol + pivmin || mid == lo || mid == hi) break;
    const T lq = T(0.5) * (lo + mid), hq = T(0.5) * (mid + hi);
    int cl, cm, ch;
    sturm_counts(d, e2, nb, pivmin, lq, mid, hq, cl, cm, ch);
    const bool lower = cm > idx;
    if (lower) hi = mid;
    else lo = mid;
    const T mid2 = lower ? lq : hq;  // (0.5 (lo + hi) of the kept half)
    if (it + 1 >= 128 || hi - lo <= abstol + pivmin || mid2 == lo || mid2 == hi) break;
    if ((lower ? cl : ch) > idx) hi = mid2;
    else lo = mid2;
  }
  sh.bl[j] = T(0.5) * (lo + hi);
}
// 5. Thread j: its cluster (within its block, neighbours closer than 1e-3 ||T||): first member and size.
template <typename T, int NMAX>
JSVD_HOST_DEVICE void f_clusters(EigShared<T, NMAX>& sh, int n, int j) {
  if (j >= n) return;
  const int k = sh.block_of[j], bs = sh.block_start[k], be = sh.block_start[k + 1];
  const T tol = T(1e-3) * sh.scale;
  int first = j, last = j;
  while (first > bs && sh.bl[first - 1] - sh.bl[first] <= tol) --first;
  while (last + 1 < be && sh.bl[last] - sh.bl[last + 1] <= tol) ++last;
  sh.cl_first[j] = first;
  sh.cl_size[j] = last - first + 1;
  sh.cl_fail[j] = 0;
  sh.cl_repl[j] = 0;
  sh.cl_cgs[j] = last - first + 1 > kBlockCluster;
  if (j == first && last > first) {
    smem_max(&sh.max_cluster, last - first + 1);
    if (sh.cl_cgs[j]) smem_max(&sh.max_cgs, last - first + 1);
    sh.multi[smem_fetch_add(&sh.n_multi, 1)] = first;
  }
}

template <typename T, int NMAX>
JSVD_HOST_DEVICE void normalise_column(T* x, int nb) {
  T nrm = 0;
  for (int r = 0; r < nb; ++r) nrm += x[r * NMAX] * x[r * NMAX];
  const T f = nrm > 0 ? T(1) / sqrt(nrm) : T(0);
  for (int r = 0; r < nb; ++r) x[r * NMAX] *= f;
}

// Thread j's solve of its block's (T - bl[j] I) x = x (x: its column of Zt from the block's first row; the
// segment states in scratch: kLuSegs NMAX of them, segment g's of thread j at g NMAX + j).
template <typename T, int NMAX>
JSVD_HOST_DEVICE_INLINE void solve_own(const EigShared<T, NMAX>& sh, int j, int bs, int nb, T* x, T* scratch) {
  inverse_solve(sh.d + bs, sh.e + bs, nb, sh.bl[j], feps<T>() * sh.scale, reinterpret_cast<LuState<T>*>(scratch) + j,
                NMAX, x, kZtLd<NMAX>);
}
// 6. Thread j: its vector by inverse iteration, into column j of Zt (rows bs .. bs + nb - 1; Zt[r * ld + j],
// ld = kZtLd), normalised. scratch: solve_own's.
template <typename T, int NMAX>
JSVD_HOST_DEVICE void f_vectors(EigShared<T, NMAX>& sh, int n, int j, T* Zt, T* scratch) {
  if (j >= n) return;
  const int k = sh.block_of[j], bs = sh.block_start[k], nb = sh.block_start[k + 1] - bs;
  T* x = Zt + static_cast<size_t>(bs) * kZtLd<NMAX> + j;
  for (int r = 0; r < nb; ++r)
    x[r * kZtLd<NMAX>] = static_cast<T>(start_entry(static_cast<uint32_t>(j), static_cast<uint32_t>(r)));
  if (nb > 1) {
    solve_own(sh, j, bs, nb, x, scratch);
    // (a cluster's second solve after its members are orthonormalised, f_resolve: two solves in a row would
    // square the spread of the members' amplifications 1 / |lambda_i - lambda_j|, up to ~1e-3 / eps, and leave
    // them numerically dependent; one alone leaves each ~eps / 1e-3 off the vectors outside)
    if (sh.cl_size[j] == 1) solve_own(sh, j, bs, nb, x, scratch);
  }
  normalise_column<T, kZtLd<NMAX>>(x, nb);
}
// 7. Thread j, a member of a cluster: its second solve, normalised.
template <typename T, int NMAX>
JSVD_HOST_DEVICE void f_resolve(EigShared<T, NMAX>& sh, int n, int j, T* Zt, T* scratch) {
  if (j >= n || sh.cl_size[j] == 1) return;
  const int k = sh.block_of[j], bs = sh.block_start[k], nb = sh.block_start[k + 1] - bs;
  T* x = Zt + static_cast<size_t>(bs) * kZtLd<NMAX> + j;
  solve_own(sh, j, bs, nb, x, scratch);
  normalise_column<T, kZtLd<NMAX>>(x, nb);
}
// 8. The clusters orthonormalised as blocks, Q = Z R^-1 with R^T R = Z^T Z (one pass of CholeskyQR; two in a
// row). Cg: NMAX x kBlockCluster values, row j member j's row of its cluster's Gram matrix, then of R.
// 8a. Thread j, a member of a block cluster: its row of Z_c^T Z_c, from the diagonal on.
template <typename T, int NMAX>
JSVD_HOST_DEVICE void f_bgs_gram(const EigShared<T, NMAX>& sh, int n, int j, const T* Zt, T* Cg) {
  if (j >= n || sh.cl_size[j] == 1 || sh.cl_cgs[sh.cl_first[j]]) return;
  const int t = sh.cl_first[j], c = sh.cl_size[j], k = sh.block_of[j], bs = sh.block_start[k],
            be = sh.block_start[k + 1];
  // (the upper triangle alone, which f_bgs_chol and f_bgs_apply read; eight entries at a time, each summed over
  // the rows in order as one at a time would, so that eight independent chains share the loop)
  for (int i0 = j - t; i0 < c; i0 += 8) {
    T x[8] = {};
    for (int r = bs; r < be; ++r) {
      const T z = Zt[r * kZtLd<NMAX> + j];
#pragma unroll
      for (int q = 0; q < 8; ++q)
        if (i0 + q < c) x[q] += z * Zt[r * kZtLd<NMAX> + t + i0 + q];
    }
#pragma unroll
    for (int q = 0; q < 8; ++q)
      if (i0 + q < c) Cg[j * kBlockCluster + i0 + q] = x[q];
  }
}
// 8b. Thread t, a block cluster's first member: R over the upper triangle of its Gram matrix (rows t ..);
// a pivot below kBlockPivot of its diagonal entry sends the cluster member by member (cl_cgs, max_cgs).
template <typename T, int NMAX>
JSVD_HOST_DEVICE void f_bgs_chol(EigShared<T, NMAX>& sh, int n, int t, T* Cg) {
  if (t >= n || sh.cl_first[t] != t || sh.cl_size[t] == 1 || sh.cl_cgs[t]) return;
  const int c = sh.cl_size[t];
  T* R = Cg + t * kBlockCluster;  // (row i: R + i kBlockCluster)
  for (int i = 0; i < c; ++i) {
    T d = R[i * kBlockCluster + i];
    const T cii = d;
    for (int p = 0; p < i; ++p) d -= R[p * kBlockCluster + i] * R[p * kBlockCluster + i];
    if (!(d >= T(kBlockPivot) * cii) || !(cii > 0)) {
      sh.cl_cgs[t] = 1;
      smem_max(&sh.max_cgs, c);
      return;
    }
    const T rii = sqrt(d), inv = T(1) / rii;
    R[i * kBlockCluster + i] = rii;
    for (int q = i + 1; q < c; ++q) {
      T x = R[i * kBlockCluster + q];
      for (int p = 0; p < i; ++p) x -= R[p * kBlockCluster + i] * R[p * kBlockCluster + q];
      R[i * kBlockCluster + q] = x * inv;
    }
  }
}
// 8c. Thread r, a row: its entries of each block cluster of its block times R^-1 (y R = z, forward).
template <typename T, int NMAX>
JSVD_HOST_DEVICE void f_bgs_apply(const EigShared<T, NMAX>& sh, int n, int r, T* Zt, const T* Cg) {
  if (r >= n) return;
  const int k = sh.block_of[r];
  T* z = Zt + r * kZtLd<NMAX>;
  for (int m = 0; m < sh.n_multi; ++m) {
    const int t = sh.multi[m], c = sh.cl_size[t];
    if (sh.cl_cgs[t] || sh.block_of[t] != k) continue;
    const T* R = Cg + t * kBlockCluster;
    for (int q = 0; q < c; ++q) {
      T y = z[t + q];
      for (int p = 0; p < q; ++p) y -= z[t + p] * R[p * kBlockCluster + q];
      z[t + q] = y / R[q * kBlockCluster + q];
    }
  }
}
// 9. The other clusters member by member. Step s of their Gram-Schmidt (member s of every such cluster of more
// than s against members 0..s-1):
// 9a. thread j, an earlier member: its column's dot product with the member's.
template <typename T, int NMAX>
JSVD_HOST_DEVICE void f_cgs_dot(EigShared<T, NMAX>& sh, int n, int j, int s, const T* Zt) {
  if (j >= n || sh.cl_size[j] <= s || j - sh.cl_first[j] >= s || !sh.cl_cgs[sh.cl_first[j]]) return;
  const int k = sh.block_of[j], bs = sh.block_start[k], be = sh.block_start[k + 1], t = sh.cl_first[j] + s;
  T x = 0;
  for (int r = bs; r < be; ++r) x += Zt[r * kZtLd<NMAX> + j] * Zt[r * kZtLd<NMAX> + t];
  sh.dot[j] = x;
}
// 9b. thread r, a row: the projections off each member s of its block's clusters. (Over the list of clusters
// of two or more: walking all of the block's clusters, singletons included, cost a chain of ~n dependent
// shared-memory reads a pass, twice a step.)
template <typename T, int NMAX>
JSVD_HOST_DEVICE void f_cgs_sub(EigShared<T, NMAX>& sh, int n, int r, int s, T* Zt) {
  if (r >= n) return;
  const int k = sh.block_of[r];
  for (int c = 0; c < sh.n_multi; ++c) {
    const int t = sh.multi[c];  // (a cluster's first member)
    if (sh.cl_size[t] <= s || sh.block_of[t] != k || !sh.cl_cgs[t]) continue;
    T x = Zt[r * kZtLd<NMAX> + t + s];
    for (int i = t; i < t + s; ++i) x -= sh.dot[i] * Zt[r * kZtLd<NMAX> + i];
    Zt[r * kZtLd<NMAX> + t + s] = x;
  }
}
// 9c. thread j, member s: normalised. A member left numerically in the span of the earlier ones (its norm
// below sqrt(eps) of the unit it had: Gram-Schmidt twice is then no longer enough) is, in round 0, replaced
// by another start vector (sh.retry: the step again; round 1's solve makes it the cluster's), in round 1
// (after f_resolve) its cluster marked, which f_keep sends back to its round-0 vectors (and, where one of
// those is a replacement, never solved, flags the matrix).
template <typename T, int NMAX>
JSVD_HOST_DEVICE void f_cgs_norm(EigShared<T, NMAX>& sh, int n, int j, int s, T* Zt, int round, int attempt) {
  if (j >= n || sh.cl_size[j] <= s || j - sh.cl_first[j] != s || !sh.cl_cgs[sh.cl_first[j]]) return;
  const int k = sh.block_of[j], bs = sh.block_start[k], be = sh.block_start[k + 1];
  T nrm = 0;
  for (int r = bs; r < be; ++r) nrm += Zt[r * kZtLd<NMAX> + j] * Zt[r * kZtLd<NMAX> + j];
  if (nrm < feps<T>()) {
    if (round == 0) {
      for (int r = bs; r < be; ++r)
        Zt[r * kZtLd<NMAX> + j] = static_cast<T>(
            start_entry(static_cast<uint32_t>(j + (attempt + 1) * 7919), static_cast<uint32_t>(r - bs)));
      normalise_column<T, kZtLd<NMAX>>(Zt + static_cast<size_t>(bs) * kZtLd<NMAX> + j, be - bs);
      sh.retry = 1;
      sh.cl_repl[sh.cl_first[j]] = 1;
      return;
    }
    sh.cl_fail[sh.cl_first[j]] = 1;
  }
  const T f = nrm > 0 ? T(1) / sqrt(nrm) : T(0);
  for (int r = bs; r < be; ++r) Zt[r * kZtLd<NMAX> + j] *= f;
}
// 10. Thread j, a member of a cluster: its column kept (to = true, in X1) or, where its cluster failed round 1,
// brought back (the matrix flagged where they include a replaced member).
template <typename T, int NMAX>
JSVD_HOST_DEVICE void f_keep(EigShared<T, NMAX>& sh, int n, int j, T* Zt, T* X1, bool to) {
  if (j >= n || sh.cl_size[j] == 1 || (!to && !sh.cl_fail[sh.cl_first[j]])) return;
  if (!to && sh.cl_repl[sh.cl_first[j]]) sh.replaced = 1;
  const int k = sh.block_of[j], bs = sh.block_start[k], be = sh.block_start[k + 1];
  for (int r = bs; r < be; ++r) {
    if (to) X1[r * NMAX + j] = Zt[r * kZtLd<NMAX> + j];
    else Zt[r * kZtLd<NMAX> + j] = X1[r * NMAX + j];
  }
}
}  // namespace eigen
}  // namespace cuda
}  // namespace jsvd
