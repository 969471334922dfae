// Per-matrix one-sided (Hestenes) Jacobi SVD: the hot code of the CPU engine.
//
// This file is included by jacobi_cpu.cpp once per instruction set (inside a
// namespace and, for AVX2/AVX-512, inside `#pragma GCC target`), so that the
// engine is vectorised whatever flags the extension is built with; the engine
// picks the variant at run time. With JSVD_SOLVER_AVX2 defined, the dot and
// rotation kernels use AVX2/FMA intrinsics, with JSVD_SOLVER_AVX512 also
// defined the long-column loops use 512-bit vectors; otherwise plain loops.
//
// Where the time goes: per column pair visit, one dot product and (until
// convergence) the rotation of two columns of A and of V. The rotations are
// bound by stores, so the gains here come from vector width, from keeping the
// scalar rotation-parameter chain off the critical path (four independent
// pairs at a time), and from cheaper float32 dot products.
//
// Not a standalone header: the includer provides <ATen/Parallel.h>,
// <immintrin.h>, core.h and the standard headers, and opens the namespace.
//
// References (../shared/papers):
//  - hierarchically-blocked-jacobi-multi-gpu.txt §4.3.1: rotation formulas
//    (4.3)-(4.6) (Rutishauser's, trigonometric case) and the relative
//    orthogonality test; §2: block-columns and block pivot pairs.
//  - wcycle-svd-batched-jacobi.txt §II-B/C and eq. (6): column block pairs,
//    norms updated from the rotation and recomputed once per sweep.

#include "jacobi_cpu_kernels.h"

// ---------------------------------------------------------------------------
// Pairs.

// Rutishauser's formulas (paper (4.3)-(4.6), t = 1) for the rotation that
// orthogonalises columns i, j: returns tan; cos = 1/sqrt(1+tan^2),
// sin = tan cos, and the rotation kernels take tau = sin/(1+cos).
inline double rotation_tan(double dii, double djj, double g) {
  const double zeta = (djj - dii) / (2.0 * g);
  const double az = std::fabs(zeta);
  // For huge |zeta|, sqrt(1 + zeta^2) == |zeta| and zeta^2 may overflow.
  const double ct = az > 1e150 ? 2.0 * az : az + std::sqrt(1.0 + az * az);
  return (zeta >= 0 ? 1.0 : -1.0) / ct;
}

template <typename T>
struct Work {
  T* a;       // p x q column-major (overwritten: becomes U diag(S))
  T* v;       // q x q column-major (nullptr when !compute_uv)
  int64_t p, q;
  double tol;    // convergence: a pair counts while |x^T y| > tol ||x|| ||y||
  double* d;     // squared column norms, kept current by the rotations
  double apply;  // rotations are applied down to this (<= tol; apply_tol below)
  double negl;   // squared norms at or below this are numerically zero (negligible_norm2)
  bool stats = false;  // track SweepStats, for converged_by_bound (off where it is not used: a cost per pair)
};

// Numerically zero columns (README, "Convergence"). With the matrix scaled to
// max|a_ij| = 1, a column of norm <= sqrt(p) eps is at the level of the
// rounding errors that the rotations leave in it. In a rank-deficient matrix
// the n - r columns that collapse are such noise, and noise cannot be made
// orthogonal to the columns it was cut from (each rotation leaves a new eps of
// it, in a random direction): with the relative test alone they were rotated
// sweep after sweep, shrinking by ~eps each time, and never converged
// (0/1 graph matrices, duplicated rows: info = -1). So they take no part in
// rotations, and their U columns come from the orthonormal completion.
// Singular values above this level keep Jacobi's relative accuracy.
template <typename T>
inline double negligible_norm2(int64_t p) {
  const double eps = std::numeric_limits<T>::epsilon();
  return static_cast<double>(p) * eps * eps;
}

// Rotations are applied down to apply_tol, convergence is judged at tol (as
// the CUDA engine's step_tolerances, kernels/common/jacobi_device.cuh). float32 inner
// products are summed in double (in float lanes for four products at most,
// dot<float>), so they resolve float32's scale and rotations are worth
// applying down to its eps: the sweep that finds nothing above tol then leaves
// U orthogonal to working precision instead of to tol. Measured on this
// engine, 1x512x512 float32: ||U^T U - I||_F 4.1e-4 -> 1.9e-5 (LAPACK 3.3e-5),
// for about 20% more time (one thread): the last sweep rotates most pairs
// (benchmarks/RESULTS.md). svdvals keeps apply = tol.
// float64 inner products carry rounding of order sqrt(p) eps, so smaller
// rotations would be noise there: apply_tol = tol.
template <typename T>
inline double apply_tol(double tol) {
  return std::is_same<T, float>::value ? std::min(tol, double(std::numeric_limits<float>::epsilon())) : tol;
}

// Orthogonalise the independent column pairs (i[k], j[k]), k < n (no column
// appears twice). Pairs go in groups of four: their dot products, rotation
// parameters and rotations are independent, so the CPU overlaps the long
// latency chain dot -> test -> tan -> cos of one pair with the others'.
// Returns true if any pair rotated above tol (rotations down to m.apply are applied, but count as converged).
// Fusion: for pair k of the step, fz1[k] / fz2[k] (-1: none) name the column
// that the rotated column i / j meets in the next step, and ft1[k] / ft2[k]
// the unit-wide index of that next-step pair, whose dot product is then
// produced here into pre[ft]. pre[base + k] holds this step's pair k's dot
// product if an earlier step produced it (NaN: not produced).
struct Fusion {
  const int32_t *fz1, *ft1, *fz2, *ft2;
  double* pre;
  int64_t base;
};

constexpr double kRootEps = 1.4901161193847656e-08;  // sqrt(DBL_EPSILON)

// The largest squared cosine of a pair tested, and squared sine of a rotation applied, in a sweep (for
// converged_by_bound below; merged over the threads).
struct SweepStats {
  double cos2 = 0, sin2 = 0;
  void merge(const SweepStats& o) {
    cos2 = std::max(cos2, o.cos2);
    sin2 = std::max(sin2, o.sin2);
  }
};

// The stop by xGESVJ's bound (converged_by_bound, core.h), from kStopBoundMinCols columns: below it the
// test seldom passes before the sweep that rotates nothing, and tracking the maxima cost more than it saved
// (this machine, float64, mean sweeps and ms with / without: 1000x8² 6.08 / 6.12, 3.28 / 3.11-3.17;
// 1000x16² 7.02 / 7.13, 11.8-12.5 / 11.4-11.7; 1000x32² 7.89 / 8.05, 55.8-56.4 / 53.8-55.5; but 200x64²
// 8.38 / 8.91, 47.1-48.9 / 48.2-48.6; 50x128² 9.04 / 9.76, 50.7-52.2 / 54.0-55.7).
constexpr int64_t kStopBoundMinCols = 64;
inline bool converged_by_bound(const SweepStats& st, int64_t q, double tol) {
  return jsvd::converged_by_bound(std::sqrt(st.cos2), std::sqrt(st.sin2), q, tol);
}

// kStats: whether it tracks SweepStats (Work::stats; a template argument so that the loop without it
// compiles as it did before: float32's svd measured 5-8% slower with a run-time test in it).
template <typename T, bool kStats>
bool process_pairs_impl(const Work<T>& m, const int32_t* pi, const int32_t* pj, int64_t n, SweepStats& st,
                        const Fusion* fu) {
  constexpr int G = 8;
  bool any = false;  // a rotation above tol
  SweepStats mine = st;  // (from the sweep's maxima so far: a new maximum, and its division, is rare)
  const double tol2 = m.tol * m.tol, apply2 = m.apply * m.apply;
  for (int64_t k0 = 0; k0 < n; k0 += G) {
    const int g_n = static_cast<int>(std::min<int64_t>(G, n - k0));
    double g[G], di[G], dj[G], s[G], tau[G], tg[G];
    bool rot[G], above[G];
    for (int k = 0; k < g_n; ++k) {
      const int64_t i = pi[k0 + k], j = pj[k0 + k];
      di[k] = m.d[i];
      dj[k] = m.d[j];
      // a zero (or numerically zero) column is orthogonal to everything
      if (di[k] <= m.negl || dj[k] <= m.negl) {
        g[k] = 0.0;
      } else if (fu && !std::isnan(fu->pre[fu->base + k0 + k])) {
        g[k] = fu->pre[fu->base + k0 + k];
      } else {
        g[k] = JSVD_DOT(m.a + i * m.p, m.a + j * m.p, m.p);
      }
    }
    for (int k = 0; k < g_n; ++k) {
      // |g| > tol ||a_i|| ||a_j||; squared norms are in (negl, p] after scaling,
      // so neither side of the squared test under- or overflows.
      const double pd = di[k] * dj[k];
      rot[k] = g[k] * g[k] > apply2 * pd;
      above[k] = g[k] * g[k] > tol2 * pd;
      if constexpr (kStats) {
        if (g[k] * g[k] > mine.cos2 * pd) mine.cos2 = g[k] * g[k] / pd;  // (a division only on a new max)
      }
      if (!rot[k]) continue;
      const double t = rotation_tan(di[k], dj[k], g[k]);
      // sin and tau = sin/(1+cos) = t/(1+sqrt(1+t^2)) for the update form of
      // the rotation (see rotate()); cos itself is never formed.
      const double r = std::sqrt(1.0 + t * t);
      s[k] = t / r;
      tau[k] = t / (1.0 + r);
      tg[k] = t * g[k];
      if constexpr (kStats) mine.sin2 = std::max(mine.sin2, s[k] * s[k]);
    }
    for (int k = 0; k < g_n; ++k) {
      if (!rot[k]) continue;
      any |= above[k];
      const int64_t i = pi[k0 + k], j = pj[k0 + k];
      if (fu) {
        const int64_t kk = k0 + k;
        const int32_t z1 = fu->fz1[kk], z2 = fu->fz2[kk];
        double* g1 = z1 >= 0 ? fu->pre + fu->ft1[kk] : nullptr;
        double* g2 = z2 >= 0 ? fu->pre + fu->ft2[kk] : nullptr;
        rotate_fused(m.a + i * m.p, m.a + j * m.p, m.p, s[k], tau[k], z1 >= 0 ? m.a + z1 * m.p : nullptr,
                     z2 >= 0 ? m.a + z2 * m.p : nullptr, g1, g2);
      } else {
        JSVD_ROTATE(m.a + i * m.p, m.a + j * m.p, m.p, s[k], tau[k]);
      }
      if (m.v) JSVD_ROTATE(m.v + i * m.q, m.v + j * m.q, m.q, s[k], tau[k]);
      // eq. (6) of the W-cycle paper: the new squared norms without new inner
      // products. The one that decreases cancels when the two columns are
      // nearly parallel; where it fell below sqrt(eps) of its old value it is
      // recomputed (as LAPACK's xGESVJ does), since the later rotations of
      // the sweep take their angles and tests from it.
      const double ni = di[k] - tg[k], nj = dj[k] + tg[k];
      m.d[i] = ni < kRootEps * di[k] ? dot(m.a + i * m.p, m.a + i * m.p, m.p) : ni;
      m.d[j] = nj < kRootEps * dj[k] ? dot(m.a + j * m.p, m.a + j * m.p, m.p) : nj;
    }
  }
  if constexpr (kStats) st = mine;
  return any;
}

template <typename T>
bool process_pairs(const Work<T>& m, const int32_t* pi, const int32_t* pj, int64_t n, SweepStats& st,
                   const Fusion* fu = nullptr) {
  return m.stats ? process_pairs_impl<T, true>(m, pi, pj, n, st, fu)
                 : process_pairs_impl<T, false>(m, pi, pj, n, st, fu);
}

#include "jacobi_cpu_schedule.h"

// ---------------------------------------------------------------------------
// Finalisation.

// Orthonormal completion: given the first r columns of U (orthonormal),
// fill columns r .. ucols-1 with an orthonormal basis of their complement.
// Householder QR of U[:, :r], then Q = H_0 ... H_{r-1} applied to e_r .. e_{ucols-1}.
template <typename T>
void complete_basis(T* u, int64_t p, int64_t r, int64_t ucols) {
  if (r >= ucols) return;
  std::vector<double> w(static_cast<size_t>(p * r));
  for (int64_t k = 0; k < p * r; ++k) w[k] = double(u[k]);
  std::vector<double> beta(r, 0.0);  // H_k = I - beta_k v_k v_k^T, v_k stored in w[k:, k]
  for (int64_t k = 0; k < r; ++k) {
    double* x = w.data() + k * p;
    double nrm = 0;
    for (int64_t i = k; i < p; ++i) nrm += x[i] * x[i];
    nrm = std::sqrt(nrm);
    if (nrm == 0.0) continue;
    const double alpha = x[k] >= 0 ? -nrm : nrm;
    x[k] -= alpha;
    double vtv = 0;
    for (int64_t i = k; i < p; ++i) vtv += x[i] * x[i];
    beta[k] = vtv > 0 ? 2.0 / vtv : 0.0;
    for (int64_t c = k + 1; c < r; ++c) {
      double* y = w.data() + c * p;
      double s = 0;
      for (int64_t i = k; i < p; ++i) s += x[i] * y[i];
      s *= beta[k];
      for (int64_t i = k; i < p; ++i) y[i] -= s * x[i];
    }
  }
  std::vector<double> e(static_cast<size_t>(p));
  for (int64_t c = r; c < ucols; ++c) {
    std::fill(e.begin(), e.end(), 0.0);
    e[c] = 1.0;
    for (int64_t k = r - 1; k >= 0; --k) {
      const double* x = w.data() + k * p;
      double s = 0;
      for (int64_t i = k; i < p; ++i) s += x[i] * e[i];
      s *= beta[k];
      for (int64_t i = k; i < p; ++i) e[i] -= s * x[i];
    }
    for (int64_t i = 0; i < p; ++i) u[c * p + i] = static_cast<T>(e[i]);
  }
}

template <typename T>
bool all_finite(const T* x, int64_t n) {
  T acc = 0;  // x * 0 is NaN exactly when x is NaN or Inf
  for (int64_t k = 0; k < n; ++k) acc += x[k] * T(0);
  return acc == T(0);
}

// Block width for the sweep ordering: 2w columns of A and V should stay in
// the per-core cache while a block pair is processed; small matrices fit whole.
inline int64_t block_width(int64_t p, int64_t q, bool want_uv, size_t elem) {
  const int64_t col_bytes = (p + (want_uv ? q : 0)) * static_cast<int64_t>(elem);
  if (knobs().cpu_block_width > 0) return knobs().cpu_block_width;  // (tuning_knobs.h)
  if (q * col_bytes <= (int64_t(32) << 10)) return 1;  // whole matrix (A and V) in L1
  // 2w columns in 32 KB (L1 is 48 KB on Zen 4) where that still leaves w >= 8
  // (measured with the earlier round-robin ordering: docs/kernel-notes.md).
  const int64_t w1 = (int64_t(32) << 10) / (2 * col_bytes);
  if (w1 >= 8) return std::min<int64_t>(w1, 16);
  // 2w columns in 256 KB (a quarter of a 1 MB L2): fewer, larger units, so
  // fewer synchronisations (docs/kernel-notes.md).
  int64_t w = (int64_t(256) << 10) / (2 * col_bytes);
  return std::max<int64_t>(4, std::min<int64_t>(w, 24));
}

// Columns (of A, V and d) in order of decreasing norm before each sweep, so
// that the row-cyclic ordering meets the largest columns first: de Rijk's
// pivoting (as in LAPACK's xGESVJ), taken once per sweep instead of once per
// row so that the tiles keep their wavefront. On this machine's 2 threads
// (docs/robustness.md) it cut Gaussian sweeps by about 20% and structured
// ones by up to half (vandermonde 128^2 float64: 18 -> 10).
template <typename T>
void sort_columns(const Work<T>& m) {
  const int64_t q = m.q;
  thread_local std::vector<int64_t> order;
  thread_local std::vector<T> scratch;
  order.resize(q);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return m.d[x] > m.d[y]; });
  int64_t first = 0;
  while (first < q && order[first] == first) ++first;
  if (first == q) return;  // already in order
  auto permute = [&](T* x, int64_t rows) {
    scratch.resize(static_cast<size_t>(rows * q));
    for (int64_t k = first; k < q; ++k) std::copy(x + order[k] * rows, x + (order[k] + 1) * rows, scratch.data() + k * rows);
    std::copy(scratch.data() + first * rows, scratch.data() + q * rows, x + first * rows);
  };
  permute(m.a, m.p);
  if (m.v) permute(m.v, q);
  thread_local std::vector<double> dd;
  dd.assign(m.d, m.d + q);
  for (int64_t k = first; k < q; ++k) m.d[k] = dd[order[k]];
}

template <typename T>
int32_t svd_one(T* a, T* u, T* s_out, T* v_out, int64_t p, int64_t q, int64_t ucols, double tol,
                int64_t max_sweeps, bool parallel) {
  const bool want_uv = u != nullptr;
  // Non-finite input: report, fill with NaN (as torch's outputs would be garbage).
  if (!all_finite(a, p * q)) {
    const T nan = std::numeric_limits<T>::quiet_NaN();
    std::fill(s_out, s_out + q, nan);
    if (want_uv) {
      std::fill(u, u + p * ucols, nan);
      std::fill(v_out, v_out + q * q, nan);
    }
    return kInfoNonFinite;
  }
  // Scale so that max |a| = 1: squared norms can then neither overflow nor
  // (for representable singular values) lose everything to underflow.
  T amax = 0;
  for (int64_t k = 0; k < p * q; ++k) amax = std::max(amax, std::abs(a[k]));
  const T scale = amax > 0 ? amax : T(1);
  for (int64_t k = 0; k < p * q; ++k) a[k] /= scale;

  std::vector<T> v_work;
  std::vector<double> d(q);
  // (svdvals: S is as accurate either way, so the smaller rotations only cost time)
  Work<T> m{a, nullptr, p, q, tol, d.data(), want_uv ? apply_tol<T>(tol) : tol, negligible_norm2<T>(p)};
  if (want_uv) {
    v_work.assign(static_cast<size_t>(q * q), T(0));
    for (int64_t k = 0; k < q; ++k) v_work[k * q + k] = T(1);
    m.v = v_work.data();
  }

  int32_t info = kInfoNotConverged;
  const Schedule& sch = schedule_for(q, block_width(p, q, want_uv, sizeof(T)), !parallel);
  m.stats = m.apply == m.tol && q >= kStopBoundMinCols && knobs().cpu_stop_bound;
  for (int64_t sw = 1; sw <= max_sweeps; ++sw) {
    for (int64_t k = 0; k < q; ++k) d[k] = dot(a + k * p, a + k * p, p);  // exact, once per sweep
    sort_columns(m);
    SweepStats st;
    if (!sweep(m, sch, parallel, st) || (m.stats && sw > 1 && converged_by_bound(st, q, tol))) {
      info = static_cast<int32_t>(sw);
      break;
    }
  }

  // Finalise: S = column norms (descending), U = normalised columns, V permuted.
  std::vector<double> norms(q);
  for (int64_t k = 0; k < q; ++k) norms[k] = std::sqrt(dot(a + k * p, a + k * p, p));
  std::vector<int64_t> order(q);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return norms[x] > norms[y]; });
  // Numerically zero columns carry no direction: their U columns come from
  // the completion below.
  const double tiny = std::sqrt(m.negl);
  int64_t rank = 0;
  for (int64_t k = 0; k < q; ++k) {
    const double nk = norms[order[k]];
    s_out[k] = static_cast<T>(nk * double(scale));
    if (nk > tiny) rank = k + 1;
  }
  // Never a non-finite result reported as converged (S overflows where the
  // input's entries are near the dtype's limit).
  if (info >= 0 && !all_finite(s_out, q)) info = kInfoNonFiniteResult;
  if (!want_uv) return info;
  for (int64_t k = 0; k < q; ++k) {
    const int64_t src = order[k];
    const T* col = a + src * p;
    T* dst = u + k * p;
    if (k < rank) {
      const double inv = 1.0 / norms[src];
      for (int64_t i = 0; i < p; ++i) dst[i] = static_cast<T>(double(col[i]) * inv);
    }
    std::copy(m.v + src * q, m.v + (src + 1) * q, v_out + k * q);
  }
  complete_basis(u, p, rank, ucols);
  if (info >= 0 && !(all_finite(u, p * ucols) && all_finite(v_out, q * q))) info = kInfoNonFiniteResult;
  return info;
}

#undef JSVD_DOT
#undef JSVD_ROTATE
