// The start's own eigen-solver (kernels/eigen/evd_small.h) checked on the host, without a GPU: its two kernels'
// own sequences (tridiag_reduce.cuh's reduce_phases, evd_tail.cuh's tail_phases) run thread by thread, on
// float32 Gram matrices scaled by their trace as the route scales them (Gaussian tall and square, orthonormal
// columns, low rank, graded and duplicated columns, zero, diagonal; 1 to 128 columns). Each must give
// ||G V0 - V0 L||_F / ||G||_F within 8 n eps32 and ||V0^T V0 - I||_F within max(8 n eps32, 1e-3) (in double),
// eigenvalues increasing, and no flag (the caller declines a batch by it). Vectors of eigenvalues
// more than 1e-3 ||T|| apart are not orthogonalised against each other (xSTEIN's ORTOL), and inverse iteration
// leaves them up to ~10 eps / 1e-3 apart: of 2600 seeded square Gaussian Gram matrices of 8 to 128 columns
// (stop 85) the worst, at 100 columns, was 6.0e-4 off (one pair 2.7e-3 ||T|| apart), others of 8 to 32 columns
// 350 - 790 eps32, above 8 n eps32; the route takes the solver from 65 columns, and its Newton-Schulz steps
// follow.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "eigen/evd_tail.cuh"
#include "eigen/tridiag_reduce.cuh"

using namespace jsvd::cuda::eigen;

namespace {

constexpr int N = 128;  // the kernels' threads

// A CTA on the host: each phase thread by thread (evd_small.cu's DeviceCta, a thread each).
struct HostCta {
  template <typename F>
  float sum(F f) {
    float s = 0;
    for (int t = 0; t < N; ++t) s += f(t);
    return s;
  }
  template <typename F>
  void all(F f) {
    for (int j = 0; j < N; ++j) f(j);
  }
  template <typename F>
  void first(F f) {
    f();
  }
  void sync() {}
};

// evd_small.cu's reduce_kernel.
void reduce(const float* G, int n, float* d, float* e, float* tau, float* V) {
  static std::vector<RegsThread<float, N>> s(N);
  static RegsShared<float, N> sh;
  HostCta cta;
  reduce_phases<float, N>(cta, [&](int t) -> RegsThread<float, N>& { return s[t]; }, sh, G, n, d, e, tau, V);
}

// evd_small.cu's tail_kernel; returns its flag, and sets *replaced where a cluster replaced a member.
bool tail(const float* d, const float* e, const float* tau, const float* V, int n, float* V0, float* w,
          bool* replaced) {
  static EigShared<float, N> sh;
  std::vector<float> Zt(static_cast<size_t>(kZtLd<N>) * n, -7.0f), scratch(tail_scratch<N>(n)), vbuf(2 * N);
  std::vector<BtThread<float, N>> bt(N);
  HostCta cta;
  tail_phases<float, N>(cta, [&](int j) -> BtThread<float, N>& { return bt[j]; }, sh, d, e, tau, V, n, Zt.data(),
                        vbuf.data(), scratch.data(), V0, w);
  *replaced = std::any_of(sh.cl_repl, sh.cl_repl + n, [](int r) { return r != 0; });
  return sh.replaced != 0;
}

// M (m x n, row-major, double) of a kind.
std::vector<double> matrix(const std::string& kind, int m, int n, std::mt19937& rng) {
  std::normal_distribution<double> N01;
  std::vector<double> A(static_cast<size_t>(m) * n, 0.0);
  if (kind == "zero") return A;
  if (kind == "diagonal") {
    for (int j = 0; j < std::min(m, n); ++j) A[j * n + j] = 1.0 + j % 7;
    return A;
  }
  if (kind == "low_rank") {  // rank n / 4 + 1
    const int r = n / 4 + 1;
    std::vector<double> X(static_cast<size_t>(m) * r), Y(static_cast<size_t>(r) * n);
    for (auto& x : X) x = N01(rng);
    for (auto& y : Y) y = N01(rng);
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j)
        for (int t = 0; t < r; ++t) A[i * n + j] += X[i * r + t] * Y[t * n + j];
    return A;
  }
  for (auto& a : A) a = N01(rng);
  if (kind == "orthonormal") {  // (modified Gram-Schmidt twice on the columns)
    for (int pass = 0; pass < 2; ++pass)
      for (int j = 0; j < n; ++j) {
        for (int k = 0; k < j; ++k) {
          double dot = 0;
          for (int i = 0; i < m; ++i) dot += A[i * n + k] * A[i * n + j];
          for (int i = 0; i < m; ++i) A[i * n + j] -= dot * A[i * n + k];
        }
        double nr = 0;
        for (int i = 0; i < m; ++i) nr += A[i * n + j] * A[i * n + j];
        for (int i = 0; i < m; ++i) A[i * n + j] /= std::sqrt(nr);
      }
  } else if (kind == "graded") {
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) A[i * n + j] *= std::pow(10.0, -3.0 * j / std::max(n - 1, 1));
  } else if (kind == "duplicated") {
    for (int i = 0; i < m; ++i)
      for (int j = 1; j < n; j += 2) A[i * n + j] = A[i * n + j - 1];
  }
  return A;
}

constexpr double kEps = 1.1920928955078125e-07;

// The solver on M's Gram matrix over its trace: whether its V0 and eigenvalues pass (printed when `print`);
// *replaced as tail's.
bool check(const std::vector<double>& A, int m, int n, const std::string& kind, bool print, bool* replaced) {
  std::vector<double> G(static_cast<size_t>(n) * n, 0.0);
  double trace = 0;
  for (int r = 0; r < n; ++r)
    for (int c = 0; c < n; ++c) {
      for (int i = 0; i < m; ++i) G[r * n + c] += A[i * n + r] * A[i * n + c];
      if (r == c) trace += G[r * n + c];
    }
  std::vector<float> Gf(G.size());
  for (size_t i = 0; i < G.size(); ++i) Gf[i] = static_cast<float>(trace > 0 ? G[i] / trace : G[i]);
  std::vector<float> d(n), e(std::max(n - 1, 1)), tau(std::max(n - 1, 1)), V(static_cast<size_t>(n) * n),
      V0(static_cast<size_t>(n) * n), w(n);
  reduce(Gf.data(), n, d.data(), e.data(), tau.data(), V.data());
  const bool flagged = tail(d.data(), e.data(), tau.data(), V.data(), n, V0.data(), w.data(), replaced);
  double res = 0, gn = 0, orth = 0;
  bool increasing = true;
  for (int c = 0; c < n; ++c) {
    if (c > 0 && w[c] < w[c - 1]) increasing = false;
    for (int r = 0; r < n; ++r) {
      gn += double(Gf[r * n + c]) * Gf[r * n + c];
      double gv = 0, vv = 0;
      for (int t = 0; t < n; ++t) {
        gv += double(Gf[r * n + t]) * V0[t * n + c];
        vv += double(V0[t * n + r]) * V0[t * n + c];
      }
      const double x = gv - double(V0[r * n + c]) * w[n - 1 - c];
      res += x * x;
      orth += (vv - (r == c)) * (vv - (r == c));
    }
  }
  res = gn > 0 ? std::sqrt(res / gn) : std::sqrt(res);
  orth = std::sqrt(orth);
  const double lim = 8 * n * kEps, lim_orth = std::max(8 * n * kEps, 1e-3);
  const bool ok = res <= lim && orth <= lim_orth && increasing && !flagged && std::isfinite(res + orth);
  if (print || !ok)
    std::printf("%s n=%3d %-11s residual %.2e (limit %.2e) orthogonality %.2e (limit %.2e)%s%s%s\n",
                ok ? "ok  " : "FAIL", n, kind.c_str(), res, lim, orth, lim_orth,
                increasing ? "" : " eigenvalues not increasing", flagged ? " flagged" : "",
                *replaced ? " (a member replaced)" : "");
  return ok;
}

}  // namespace

int main() {
  std::mt19937 rng(84);
  int failures = 0, checked = 0;
  bool replaced = false;
  for (const int n : {1, 2, 3, 17, 64, 77, 100, 128})
    for (const std::string kind :
         {"gaussian", "square", "orthonormal", "low_rank", "graded", "duplicated", "zero", "diagonal"}) {
      // ("square": a Gaussian n x n M, whose Gram matrix has clusters of ~10 eigenvalues near zero at n = 128,
      // within 1e-3 ||T|| of each other: the clusters' Gram-Schmidt takes ~20 steps, the others' ~2)
      const int m = kind == "square" ? n : n + n / 2 + 8;
      failures += !check(matrix(kind, m, n, rng), m, n, kind, true, &replaced);
      ++checked;
    }
  // Low-rank Gram matrices whose zero cluster's inverse iteration leaves a member dependent now and then: a new
  // start replaces it, the cluster's second solve makes it an eigenvector, and the matrix passes unflagged.
  // (Stop 85: 4 of ~750 low-rank matrices of 2 to 128 columns did; until then each was flagged and its batch
  // declined.) At least one of these must replace a member, or the test no longer reaches that path.
  int with_replacement = 0;
  for (int k = 0; k < 400; ++k) {
    const int n = 16, m = n + n / 2 + 8;
    failures += !check(matrix("low_rank", m, n, rng), m, n, "low_rank", false, &replaced);
    with_replacement += replaced;
    ++checked;
  }
  std::printf("%d of 400 low-rank 16-column matrices replaced a member\n", with_replacement);
  if (with_replacement == 0) ++failures;
  std::printf("%d of %d cases failed\n", failures, checked);
  return failures == 0 ? 0 : 1;
}
