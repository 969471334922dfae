// CPU engine: one-sided (Hestenes) Jacobi SVD with round-robin ordering,
// parallel over the batch (and over the pairs of a round-robin step when the
// batch is smaller than the thread pool).
//
// References (../shared/papers):
//  - hierarchically-blocked-jacobi-multi-gpu.txt §4.3.1: rotation formulas (4.3)-(4.6)
//    (Rutishauser's, trigonometric case) and the relative orthogonality test.
//  - wcycle-svd-batched-jacobi.txt §II-C and eq. (6): column norms updated from the
//    rotation instead of recomputed, and recomputed exactly once per sweep.
#include "../core.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <numeric>

namespace jsvd {
namespace {

// Dot products accumulate in double: for float32 columns the orthogonality
// test then sees the true inner product of the stored columns.
template <typename T>
double dot(const T* x, const T* y, int64_t n) {
  // Four partial sums: vectorisable and a shorter error chain than one sum.
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += double(x[i]) * double(y[i]);
    s1 += double(x[i + 1]) * double(y[i + 1]);
    s2 += double(x[i + 2]) * double(y[i + 2]);
    s3 += double(x[i + 3]) * double(y[i + 3]);
  }
  for (; i < n; ++i) s0 += double(x[i]) * double(y[i]);
  return (s0 + s1) + (s2 + s3);
}

// [x y] <- [x y] [[c, s], [-s, c]]
template <typename T>
void rotate(T* x, T* y, int64_t n, double c, double s) {
  const T cc = static_cast<T>(c), ss = static_cast<T>(s);
  for (int64_t i = 0; i < n; ++i) {
    const T xi = x[i], yi = y[i];
    x[i] = cc * xi - ss * yi;
    y[i] = ss * xi + cc * yi;
  }
}

// Round-robin (tournament) ordering: for an even number of slots `e`, step s
// pairs slot positions (k, e-1-k); between steps every slot but the first
// moves one place. Each step touches every column once, so its pairs are
// independent, and e-1 steps cover every pair exactly once (one sweep).
struct RoundRobin {
  int64_t n, e;
  std::vector<int64_t> pos;
  explicit RoundRobin(int64_t n_) : n(n_), e(n_ + (n_ & 1)), pos(e) { std::iota(pos.begin(), pos.end(), 0); }
  int64_t steps() const { return e - 1; }
  int64_t pairs() const { return e / 2; }
  // pair k of the current step; returns false if it involves the dummy column (odd n)
  bool pair(int64_t k, int64_t& i, int64_t& j) const {
    i = pos[k];
    j = pos[e - 1 - k];
    if (i > j) std::swap(i, j);
    return j < n;
  }
  void advance() { std::rotate(pos.begin() + 1, pos.end() - 1, pos.end()); }
};

template <typename T>
struct MatrixJob {
  T* a;       // p x q column-major (overwritten: becomes U diag(S))
  T* v;       // q x q column-major (nullptr when !compute_uv)
  int64_t p, q;
};

// Rutishauser's formulas (paper (4.3)-(4.6), t = 1) for the rotation that
// orthogonalises columns i, j: returns tan; cos = 1/sqrt(1+tan^2).
inline double rotation_tan(double dii, double djj, double g) {
  const double zeta = (djj - dii) / (2.0 * g);
  const double az = std::fabs(zeta);
  // For huge |zeta|, sqrt(1 + zeta^2) == |zeta| and zeta^2 may overflow.
  const double ct = az > 1e150 ? 2.0 * az : az + std::sqrt(1.0 + az * az);
  return (zeta >= 0 ? 1.0 : -1.0) / ct;
}

// One pair of a round-robin step. Returns true if it rotated.
template <typename T>
bool process_pair(const MatrixJob<T>& m, std::vector<double>& d, int64_t i, int64_t j, double tol) {
  const double di = d[i], dj = d[j];
  if (di == 0.0 || dj == 0.0) return false;  // a zero column is orthogonal to everything
  T* ai = m.a + i * m.p;
  T* aj = m.a + j * m.p;
  const double g = dot(ai, aj, m.p);
  if (!(std::fabs(g) > tol * std::sqrt(di) * std::sqrt(dj))) return false;
  const double t = rotation_tan(di, dj, g);
  const double c = 1.0 / std::sqrt(1.0 + t * t);
  const double s = c * t;
  rotate(ai, aj, m.p, c, s);
  if (m.v) rotate(m.v + i * m.q, m.v + j * m.q, m.q, c, s);
  // eq. (6) of the W-cycle paper, in the cancellation-free form that follows
  // from the choice of t: the new squared norms without new inner products.
  d[i] = std::max(di - t * g, 0.0);
  d[j] = dj + t * g;
  return true;
}

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
int32_t svd_one(T* a, T* u, T* s_out, T* v_out, int64_t p, int64_t q, int64_t ucols, double tol,
                int64_t max_sweeps, bool parallel_pairs) {
  const bool want_uv = u != nullptr;
  // Non-finite input: report, fill with NaN (as torch's outputs would be garbage).
  for (int64_t k = 0; k < p * q; ++k) {
    if (!std::isfinite(a[k])) {
      const T nan = std::numeric_limits<T>::quiet_NaN();
      std::fill(s_out, s_out + q, nan);
      if (want_uv) {
        std::fill(u, u + p * ucols, nan);
        std::fill(v_out, v_out + q * q, nan);
      }
      return kInfoNonFinite;
    }
  }
  // Scale so that max |a| = 1: squared norms can then neither overflow nor
  // (for representable singular values) lose everything to underflow.
  T amax = 0;
  for (int64_t k = 0; k < p * q; ++k) amax = std::max(amax, std::abs(a[k]));
  const T scale = amax > 0 ? amax : T(1);
  for (int64_t k = 0; k < p * q; ++k) a[k] /= scale;

  std::vector<T> v_work;
  MatrixJob<T> m{a, nullptr, p, q};
  if (want_uv) {
    v_work.assign(static_cast<size_t>(q * q), T(0));
    for (int64_t k = 0; k < q; ++k) v_work[k * q + k] = T(1);
    m.v = v_work.data();
  }

  std::vector<double> d(q);
  int32_t info = kInfoNotConverged;
  RoundRobin rr(q);
  const int64_t pair_cost = 8 * (p + (want_uv ? q : 0));
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(pair_cost, 1));
  for (int64_t sweep = 1; sweep <= max_sweeps; ++sweep) {
    for (int64_t k = 0; k < q; ++k) d[k] = dot(a + k * p, a + k * p, p);  // exact, once per sweep
    bool rotated = false;
    for (int64_t step = 0; step < rr.steps(); ++step) {
      auto run_pairs = [&](int64_t b, int64_t e) {
        bool any = false;
        for (int64_t k = b; k < e; ++k) {
          int64_t i, j;
          if (rr.pair(k, i, j)) any |= process_pair(m, d, i, j, tol);
        }
        return any;
      };
      if (parallel_pairs && rr.pairs() > grain) {
        std::atomic<bool> any{false};
        at::parallel_for(0, rr.pairs(), grain, [&](int64_t b, int64_t e) {
          if (run_pairs(b, e)) any = true;
        });
        rotated |= any.load();
      } else {
        rotated |= run_pairs(0, rr.pairs());
      }
      rr.advance();
    }
    if (!rotated) {
      info = static_cast<int32_t>(sweep);
      break;
    }
  }

  // Finalise: S = column norms (descending), U = normalised columns, V permuted.
  std::vector<double> norms(q);
  for (int64_t k = 0; k < q; ++k) norms[k] = std::sqrt(dot(a + k * p, a + k * p, p));
  std::vector<int64_t> order(q);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return norms[x] > norms[y]; });
  // Columns whose norm is zero (or so small that 1/norm would overflow) carry
  // no direction: their U columns come from the completion below.
  const double tiny = double(std::numeric_limits<T>::min()) / double(std::numeric_limits<T>::epsilon());
  int64_t rank = 0;
  for (int64_t k = 0; k < q; ++k) {
    const double nk = norms[order[k]];
    s_out[k] = static_cast<T>(nk * double(scale));
    if (nk > tiny) rank = k + 1;
  }
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
  return info;
}

template <typename T>
void run_batch(const at::Tensor& A, const PackedBatch& batch, const SvdOptions& opt, CoreResult& r) {
  T* a = A.data_ptr<T>();
  T* u = opt.compute_uv ? r.U.data_ptr<T>() : nullptr;
  T* v = opt.compute_uv ? r.V.data_ptr<T>() : nullptr;
  T* s = r.S.data_ptr<T>();
  int32_t* info = r.info.data_ptr<int32_t>();
  const int64_t max_sweeps = resolve_max_sweeps(opt);
  const int64_t nb = batch.size();
  const bool parallel_pairs = nb < at::get_num_threads();
  auto one = [&](int64_t k) {
    const double tol = resolve_tol(opt, batch.rows[k], A.scalar_type());
    info[k] = svd_one<T>(a + batch.a_off[k], u ? u + batch.u_off[k] : nullptr, s + batch.s_off[k],
                         v ? v + batch.v_off[k] : nullptr, batch.rows[k], batch.cols[k], batch.ucols[k], tol,
                         max_sweeps, parallel_pairs);
  };
  if (parallel_pairs) {
    for (int64_t k = 0; k < nb; ++k) one(k);
  } else {
    at::parallel_for(0, nb, 1, [&](int64_t b, int64_t e) {
      for (int64_t k = b; k < e; ++k) one(k);
    });
  }
}

}  // namespace

CoreResult jacobi_svd_cpu(const at::Tensor& A, const PackedBatch& batch, const SvdOptions& opt) {
  TORCH_CHECK(A.device().is_cpu() && A.dim() == 1 && A.is_contiguous() && A.numel() == batch.a_numel,
              "jsvd internal: jacobi_svd_cpu expects the packed 1-D CPU buffer");
  CoreResult r;
  r.S = at::empty({batch.s_numel}, A.options());
  r.info = at::empty({batch.size()}, A.options().dtype(at::kInt));
  if (opt.compute_uv) {
    r.U = at::zeros({batch.u_numel}, A.options());
    r.V = at::empty({batch.v_numel}, A.options());
  }
  AT_DISPATCH_FLOATING_TYPES(A.scalar_type(), "jacobi_svd_cpu", [&] { run_batch<scalar_t>(A, batch, opt, r); });
  return r;
}

}  // namespace jsvd
