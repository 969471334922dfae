// The back-transformation of the start's own eigen-solver (evd_small.h): V0 = H_0 ... H_{n-3} Z, Z the
// tridiagonal eigenvectors (tridiag_eigenpairs.cuh) and H_k tridiag_reduce.cuh's reflectors, a thread a column
// of Z held in its registers (float32: NMAX values), each reflector's v zero-padded in shared memory (rows <= k
// and >= n zero) and double-buffered (one barrier a reflector), the chunks of 32 rows above the reflector
// skipped; V0 and the eigenvalues written as syev_batched's: V0 (n x n row-major, column c the eigenvector of
// the c-th largest eigenvalue), w increasing.
#pragma once

#include "eigen/smem_vec4.cuh"
#include "eigen/tridiag_eigenpairs.cuh"

namespace jsvd {
namespace cuda {
namespace eigen {

// Thread j: its column zero off its block's rows (the back-transformation reads every row).
template <typename T, int NMAX>
JSVD_HOST_DEVICE void t_zero(const EigShared<T, NMAX>& sh, int n, int j, T* Zt) {
  if (j >= n) return;
  const int k = sh.block_of[j], bs = sh.block_start[k], be = sh.block_start[k + 1];
  for (int r = 0; r < n; ++r)
    if (r < bs || r >= be) Zt[r * kZtLd<NMAX> + j] = T(0);
}
// Thread j: its pair's place in descending order (ties by index).
template <typename T, int NMAX>
JSVD_HOST_DEVICE int t_rank(const EigShared<T, NMAX>& sh, int n, int j) {
  const T v = sh.bl[j];
  int rank = 0;
  for (int i = 0; i < n; ++i) rank += sh.bl[i] > v || (sh.bl[i] == v && i < j);
  return rank;
}
// The back-transformation with Z's column in one thread's registers (float32: NMAX values), each reflector's v
// zero-padded in shared memory (rows <= k and >= n zero), chunks of 32 rows above the reflector skipped.
template <typename T, int NMAX>
struct BtThread {
  T z[NMAX];
};
template <typename T, int NMAX>
JSVD_HOST_DEVICE_INLINE void bt_regs_load(BtThread<T, NMAX>& t, const T* Zt, int n, int j) {
#pragma unroll
  for (int r = 0; r < NMAX; ++r) t.z[r] = r < n ? Zt[r * kZtLd<NMAX> + j] : T(0);
}
template <typename T, int NMAX>
JSVD_HOST_DEVICE_INLINE void bt_regs_v(T* vbuf, const T* V, int n, int k, int r) {
  vbuf[r] = r == k + 1 ? T(1) : (r > k + 1 && r < n ? V[static_cast<size_t>(k) * n + r] : T(0));
}
// (vbuf 16-byte aligned: its values four a load, smem_vec4.cuh)
template <typename T, int NMAX>
JSVD_HOST_DEVICE_INLINE void bt_regs_apply(BtThread<T, NMAX>& t, const T* vbuf, T tau, int k) {
  T p0 = 0, p1 = 0, p2 = 0, p3 = 0;
#pragma unroll
  for (int c = 0; c < NMAX / 32; ++c) {
    if (k + 1 >= 32 * (c + 1)) continue;
#pragma unroll
    for (int r = 32 * c; r < 32 * (c + 1); r += 4) {
      const Vec4<T> v = load4(vbuf + r);
      p0 += v.x * t.z[r];
      p1 += v.y * t.z[r + 1];
      p2 += v.z * t.z[r + 2];
      p3 += v.w * t.z[r + 3];
    }
  }
  const T dot = tau * ((p0 + p1) + (p2 + p3));
#pragma unroll
  for (int c = 0; c < NMAX / 32; ++c) {
    if (k + 1 >= 32 * (c + 1)) continue;
#pragma unroll
    for (int r = 32 * c; r < 32 * (c + 1); r += 4) {
      const Vec4<T> v = load4(vbuf + r);
      t.z[r] -= dot * v.x;
      t.z[r + 1] -= dot * v.y;
      t.z[r + 2] -= dot * v.z;
      t.z[r + 3] -= dot * v.w;
    }
  }
}
template <typename T, int NMAX>
JSVD_HOST_DEVICE_INLINE void bt_regs_out(const EigShared<T, NMAX>& sh, const BtThread<T, NMAX>& t, int n,
                                         int j, int rank, T* V0, T* w) {
  if (j >= n) return;
  w[n - 1 - rank] = sh.bl[j];
#pragma unroll
  for (int r = 0; r < NMAX; ++r)
    if (r < n) V0[static_cast<size_t>(r) * n + rank] = t.z[r];
}

// Values of global scratch a matrix for tail_phases: inverse iteration's segment states (tridiag_solve.cuh), the
// clusters' round-0 vectors X1 and their Gram matrices Cg.
template <int NMAX>
JSVD_HOST_DEVICE_INLINE size_t tail_scratch(int n) {
  return static_cast<size_t>(2) * kLuSegs<NMAX> * NMAX + static_cast<size_t>(NMAX) * n +
         static_cast<size_t>(NMAX) * kBlockCluster;
}

// The tail's phases in order, for one matrix: tail_kernel (evd_small.cu) runs them a thread each, the host test
// (cpp_tests/evd_small_test.cpp) every thread in turn. Cta: all(f) runs f(j) for each of the NMAX threads and
// then a barrier, first(f) f() on thread 0 alone, sync() a barrier; bt(j): thread j's registers. Zt: kZtLd n
// values (shared memory); scratch: tail_scratch<NMAX>(n) (inverse iteration's states, the clusters' round-0 vectors X1,
// their Gram matrices Cg); vbuf: 2 NMAX (the reflectors' buffers).
template <typename T, int NMAX, typename Cta, typename Bt>
JSVD_HOST_DEVICE void tail_phases(Cta& cta, Bt&& bt, EigShared<T, NMAX>& sh, const T* d, const T* e, const T* tau,
                                  const T* V, int n, T* Zt, T* vbuf, T* scratch, T* V0, T* w) {
  T* X1 = scratch + static_cast<size_t>(2) * kLuSegs<NMAX> * NMAX;
  T* Cg = X1 + static_cast<size_t>(NMAX) * n;
  cta.all([&](int j) { f_load(sh, d, e, n, j); });
  cta.all([&](int j) { f_split(sh, n, j); });
  cta.first([&] { f_blocks(sh, n); });
  cta.sync();
  cta.all([&](int j) { f_bisect(sh, n, j); });
  cta.all([&](int j) { f_clusters(sh, n, j); });
  cta.all([&](int j) {
    t_zero(sh, n, j, Zt);
    f_vectors(sh, n, j, Zt, scratch);
  });
  for (int round = 0; round < 2 && sh.max_cluster > 1; ++round) {
    if (round == 1)
      cta.all([&](int j) {
        f_keep(sh, n, j, Zt, X1, true);
        f_resolve(sh, n, j, Zt, scratch);
      });
    for (int pass = 0; pass < 2; ++pass) {
      cta.all([&](int j) { f_bgs_gram(sh, n, j, Zt, Cg); });
      cta.all([&](int j) { f_bgs_chol(sh, n, j, Cg); });
      cta.all([&](int j) { f_bgs_apply(sh, n, j, Zt, Cg); });
    }
    for (int s = 1; s < sh.max_cgs; ++s) {
      for (int attempt = 0; attempt < 3; ++attempt) {
        for (int pass = 0; pass < 2; ++pass) {
          cta.all([&](int j) { f_cgs_dot(sh, n, j, s, Zt); });
          cta.all([&](int j) { f_cgs_sub(sh, n, j, s, Zt); });
        }
        cta.all([&](int j) { f_cgs_norm(sh, n, j, s, Zt, round, attempt); });
        const bool again = sh.retry;
        cta.sync();  // (every thread has read it)
        cta.first([&] { sh.retry = 0; });
        if (!again) break;
      }
    }
    if (round == 1) cta.all([&](int j) { f_keep(sh, n, j, Zt, X1, false); });
  }
  cta.all([&](int j) {
    bt_regs_load(bt(j), Zt, n, j);
    if (n >= 3) bt_regs_v<T, NMAX>(vbuf + ((n - 3) & 1) * NMAX, V, n, n - 3, j);
  });
  // (v_k in its buffer; the barrier after each reflector: every column done with v_k+1, whose buffer v_k-1 takes)
  for (int k = n - 3; k >= 0; --k)
    cta.all([&](int j) {
      if (k > 0) bt_regs_v<T, NMAX>(vbuf + ((k - 1) & 1) * NMAX, V, n, k - 1, j);
      bt_regs_apply(bt(j), vbuf + (k & 1) * NMAX, tau[k], k);
    });
  cta.all([&](int j) { bt_regs_out(sh, bt(j), n, j, j < n ? t_rank(sh, n, j) : 0, V0, w); });
}

}  // namespace eigen
}  // namespace cuda
}  // namespace jsvd
