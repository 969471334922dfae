// The contract between the op layer (csrc/svd_wrapper.*) and the per-backend
// Jacobi engines (csrc/cpu/jacobi_cpu.cpp, kernels/).
//
// The op layer turns any input -- a batch (..., m, n) or a list of matrices of
// different shapes -- into one PackedBatch of "tall" matrices (rows >= cols),
// each stored column-major in one flat buffer (an m < n input is handed over as
// its transpose, which costs no copy for a row-major tensor). An engine computes
// W = U_w diag(S) V_w^T for every matrix W of the batch and writes packed
// outputs; the op layer maps them back to (U, S, Vh) of the caller's matrices.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "host_device.h"

namespace jsvd {

// info codes written per matrix (int32). info >= 0: sweeps taken to converge.
constexpr int32_t kInfoNotConverged = -1;  // max_sweeps reached; result is the last iterate
constexpr int32_t kInfoNonFinite = -2;     // input held NaN or Inf; outputs are NaN
constexpr int32_t kInfoNonFiniteResult = -3;  // finite input, but S, U or V not finite (S beyond the dtype's range)

// Random matrices need 10-15 sweeps; strongly row-graded ones (kappa 1e12, n = 512)
// were measured needing up to 49 on the CPU engine.
constexpr int64_t kDefaultMaxSweeps = 64;

struct SvdOptions {
  bool compute_uv = true;
  bool full_matrices = false;  // U of each tall matrix gets rows (not cols) columns
  double tol = -1.0;           // <= 0: default_tol(rows, dtype)
  int64_t max_sweeps = -1;     // <= 0: kDefaultMaxSweeps
  // The engine may read a small device flag once per sweep to stop early
  // (jsvd::svd, which synchronises anyway to check info); false for svd_ex,
  // which must never synchronise.
  bool may_sync = false;
  // With compute_uv: false asks a CUDA engine for U and S only (its levels
  // carry no V): the QR path's V by a triangular solve (qr_precondition.h).
  bool want_v = true;
};

// Machine epsilon of the engines' compute dtype (float64, else float32).
inline double eps_of(at::ScalarType dtype) {
  return dtype == at::kDouble ? std::numeric_limits<double>::epsilon()
                              : static_cast<double>(std::numeric_limits<float>::epsilon());
}

// Default convergence threshold: a pair (i, j) is orthogonal when
// |a_i^T a_j| <= tol * ||a_i|| * ||a_j||, with tol = sqrt(rows) * eps (as LAPACK's xGESVJ).
inline double default_tol(int64_t rows, at::ScalarType dtype) {
  return std::sqrt(static_cast<double>(rows < 1 ? 1 : rows)) * eps_of(dtype);
}

inline double resolve_tol(const SvdOptions& o, int64_t rows, at::ScalarType dtype) {
  return o.tol > 0 ? o.tol : default_tol(rows, dtype);
}

inline int64_t resolve_max_sweeps(const SvdOptions& o) {
  return o.max_sweeps > 0 ? o.max_sweeps : kDefaultMaxSweeps;
}

// The options for p x q matrices: a square matrix's full U and Vh are its reduced ones, so full_matrices
// asks nothing more of it and the engines do not see it (svd's default then takes the routes that return
// U from M V0, as without it).
inline SvdOptions for_shape(SvdOptions o, int64_t p, int64_t q) {
  o.full_matrices = o.full_matrices && p != q;
  return o;
}

// A batch of real matrices packed into flat buffers. Matrix k is p_k x q_k with
// p_k >= q_k >= 1, column-major: element (i, j) is A[a_off[k] + j * p_k + i].
// Outputs are packed the same way:
//   U: p_k x ucols_k column-major at u_off[k] (ucols_k = p_k if full_matrices else q_k)
//   S: q_k values, descending and non-negative, at s_off[k]
//   V: q_k x q_k column-major at v_off[k] (so the stored array, read row-major, is V^T)
struct PackedBatch {
  // Per matrix for a list; a batch made by uniform_of keeps one entry of each
  // and its count, so that a million 3 x 3 matrices cost the host no
  // per-matrix work: read them through the accessors below.
  std::vector<int64_t> rows, cols, ucols;
  std::vector<int64_t> a_off, u_off, s_off, v_off;
  int64_t a_numel = 0, u_numel = 0, s_numel = 0, v_numel = 0;
  bool uniform = true;  // every matrix has the same shape
  int64_t count = 0;

  int64_t size() const { return count; }
  int64_t p(int64_t k) const { return rows[uniform ? 0 : k]; }
  int64_t q(int64_t k) const { return cols[uniform ? 0 : k]; }
  int64_t uc(int64_t k) const { return ucols[uniform ? 0 : k]; }
  int64_t a_at(int64_t k) const { return uniform ? k * rows[0] * cols[0] : a_off[k]; }
  int64_t u_at(int64_t k) const { return uniform ? k * rows[0] * ucols[0] : u_off[k]; }
  int64_t s_at(int64_t k) const { return uniform ? k * cols[0] : s_off[k]; }
  int64_t v_at(int64_t k) const { return uniform ? k * cols[0] * cols[0] : v_off[k]; }

  // `count` matrices of one shape, p >= q >= 1.
  static PackedBatch uniform_of(int64_t count, int64_t p, int64_t q, bool full_matrices) {
    TORCH_CHECK(p >= q && q >= 1 && count >= 0, "jsvd internal: PackedBatch needs rows >= cols >= 1");
    PackedBatch b;
    b.count = count;
    b.rows = {p};
    b.cols = {q};
    b.ucols = {full_matrices ? p : q};
    b.a_off = b.u_off = b.s_off = b.v_off = {0};
    b.a_numel = count * p * q;
    b.u_numel = count * p * b.ucols[0];
    b.s_numel = count * q;
    b.v_numel = count * q * q;
    return b;
  }

  // A list (`uniform` when every shape is the same, its vectors still full).
  static PackedBatch make(const std::vector<int64_t>& rows, const std::vector<int64_t>& cols,
                          bool full_matrices) {
    PackedBatch b;
    b.rows = rows;
    b.cols = cols;
    const size_t n = rows.size();
    b.count = static_cast<int64_t>(n);
    b.ucols.resize(n);
    b.a_off.resize(n);
    b.u_off.resize(n);
    b.s_off.resize(n);
    b.v_off.resize(n);
    for (size_t k = 0; k < n; ++k) {
      TORCH_CHECK(rows[k] >= cols[k] && cols[k] >= 1, "jsvd internal: PackedBatch needs rows >= cols >= 1");
      b.ucols[k] = full_matrices ? rows[k] : cols[k];
      b.a_off[k] = b.a_numel;
      b.u_off[k] = b.u_numel;
      b.s_off[k] = b.s_numel;
      b.v_off[k] = b.v_numel;
      b.a_numel += rows[k] * cols[k];
      b.u_numel += rows[k] * b.ucols[k];
      b.s_numel += cols[k];
      b.v_numel += cols[k] * cols[k];
      if (rows[k] != rows[0] || cols[k] != cols[0]) b.uniform = false;
    }
    return b;
  }
};

// A list's members that share a shape are solved as a uniform batch of their
// own: the uniform path's QR preconditioning, auto-tuner and cached plans, which
// a list does not get (H200, lists of H-matrix-like levels: 2-3x faster;
// docs/experiments.md, stop 38). rows[k] >= cols[k] >= 1 (tall orientation).
// Returns each member's group, or -1 for the rest (solved as one list): shapes
// with at least kListGroupMin members, the kListGroupMax largest by work; no
// groups where one shape would hold every member (the list is uniform then).
constexpr int64_t kListGroupMin = 32;
constexpr size_t kListGroupMax = 8;
inline std::vector<int32_t> list_shape_groups(const std::vector<int64_t>& rows, const std::vector<int64_t>& cols,
                                              int32_t* ngroups) {
  const size_t n = rows.size();
  std::vector<int32_t> group(n, -1);
  *ngroups = 0;
  // The members of each shape counted in an open-addressing table, in one pass: sorting 2000 random shapes
  // took ~0.2 ms of host time on the H100's host (branch misses), the table ~0.02 (issue 21).
  size_t cap = 64;
  while (cap < 2 * n) cap *= 2;
  struct Shape { int64_t r = -1, c = -1, count = 0; int32_t group = -1; };
  std::vector<Shape> table(cap);
  std::vector<uint32_t> slot(n);
  for (size_t k = 0; k < n; ++k) {
    const uint64_t h = static_cast<uint64_t>(rows[k]) * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(cols[k]) * 0xC2B2AE3D27D4EB4Full;
    size_t s = (h >> 29) & (cap - 1);
    while (table[s].count > 0 && (table[s].r != rows[k] || table[s].c != cols[k])) s = (s + 1) & (cap - 1);
    table[s].r = rows[k];
    table[s].c = cols[k];
    ++table[s].count;
    slot[k] = static_cast<uint32_t>(s);
  }
  struct Run { size_t s; double work; };
  std::vector<Run> runs;  // the shapes that become groups
  for (size_t s = 0; s < cap; ++s) {
    const Shape& sh = table[s];
    if (sh.count >= kListGroupMin && static_cast<size_t>(sh.count) < n)
      runs.push_back({s, static_cast<double>(sh.count) * sh.r * sh.c * sh.c});
  }
  // Most work first; equal work by shape (rows, then columns), so that the groups do not depend on the table.
  std::sort(runs.begin(), runs.end(), [&](const Run& a, const Run& b) {
    const Shape &x = table[a.s], &y = table[b.s];
    return a.work != b.work ? a.work > b.work : x.r != y.r ? x.r < y.r : x.c < y.c;
  });
  if (runs.size() > kListGroupMax) runs.resize(kListGroupMax);
  for (const Run& r : runs) table[r.s].group = (*ngroups)++;
  for (size_t k = 0; k < n; ++k) group[k] = table[slot[k]].group;
  return group;
}

// The Gram eigenvectors' start (the Jacobi on M V0, V0 the eigenvectors of M^T M: CUDA
// kernels/precondition/eigh_precondition.h, CPU csrc/cpu/gram_start_cpu.h) is taken where the diagonal d
// of every matrix's float64 Gram matrix (M's squared column norms) holds no NaN and: cols * max d <=
// max_trace (||M||_F within range for M V0 and the Jacobi on it; by Cauchy-Schwarz no entry of G, nor a
// partial sum of the GEMM that formed it, exceeds max d, so a finite max d means G overflowed nowhere);
// max d == 0 or >= min_top (float64: squares that would lose digits to underflow); min d >= min_ratio²
// max d (float64: columns graded beyond sqrt(cols eps), whose small singular values' relative accuracy
// the start would cost; docs/start.md). A zero G (M's squares all underflow) starts from V0 = I.
struct StartLimits {
  double max_trace, min_top, min_ratio;
  // Whether one matrix passes, from its Gram diagonal's least and largest entry and whether it holds a NaN
  // (the CUDA engine's check kernel and the CPU engine's loop both call this).
  JSVD_HOST_DEVICE bool passes(double lo, double hi, bool nan, int64_t cols) const {
    return !nan && cols * hi <= max_trace && !(hi > 0 && hi < min_top) && !(lo < min_ratio * min_ratio * hi);
  }
};
inline StartLimits start_limits(bool f64, int64_t cols) {
  const double fmax_4 = std::numeric_limits<float>::max() / 4.0;
  return f64 ? StartLimits{std::ldexp(1.0, 1000), std::ldexp(1.0, -880),
                           std::sqrt(static_cast<double>(cols) * std::numeric_limits<double>::epsilon())}
             : StartLimits{fmax_4 * fmax_4, 0.0, 0.0};
}

// Whether the start's X = M V0 of a float32 matrix is already converged (the CUDA engine's
// kernels/precondition/start_converged.h gives the argument): from C = V0^T G V0 in float64, its trace
// fro = ||M||_F^2, eg = 2 (rows + cols) eps64 fro (the float64 roundings of G and C), the Jacobi's tol and
// eps32. fro must be positive and finite, every column must pass column_ok and every pair pair_ok
// (entry_ok: entry (i, j), i <= j, of the row-major q x q C). Both engines call these.
// float64 (converged_start_f64; both engines' float64 start, on C = X^T X of the formed X): the
// Jacobi's own test, with no margin for C's rounding (eg = 0; a pair within it of tol may be decided as
// the Jacobi's own dot product would not, either way within its accuracy), and columns above C's rounding
// level (col_min: a zero or rank-deficient column goes to the Jacobi, which completes U).
struct ConvergedStart {
  double eg, tol, eps, col_min;
  JSVD_HOST_DEVICE static bool fro_ok(double fro) { return fro > 0 && fro <= DBL_MAX; }  // (NaN fails both)
  JSVD_HOST_DEVICE bool column_ok(double cjj) const { return cjj >= col_min; }
  JSVD_HOST_DEVICE bool pair_ok(double cij, double cii, double cjj) const {
    return (fabs(cij) + eg) <= (tol - 1.01 * eps) * sqrt(cii * cjj);
  }
  JSVD_HOST_DEVICE bool entry_ok(const double* c, int64_t q, int64_t i, int64_t j) const {
    const double ci = c[i * (q + 1)];
    return i == j ? column_ok(ci) : pair_ok(c[i * q + j], ci, c[j * (q + 1)]);
  }
};
JSVD_HOST_DEVICE inline ConvergedStart converged_start(double fro, int64_t rows, int64_t cols, double tol) {
  const double eg = 2.0 * static_cast<double>(rows + cols) * DBL_EPSILON * fro, eps = FLT_EPSILON;
  return {eg, tol, eps, 8.0 * eg / eps};
}
JSVD_HOST_DEVICE inline ConvergedStart converged_start_f64(double fro, int64_t rows, int64_t cols, double tol) {
  return {0.0, tol, DBL_EPSILON, 16.0 * static_cast<double>(rows + cols) * DBL_EPSILON * fro};
}
// float32 on the CPU engine's near-square matrices since stop 56 (and on the CUDA engine's eigen-solvers'
// routes since stop 57): float64's test on C = X^T X of the float64 X, at float32's tol less
// float32's rounding of U. C's rounding is relative to its columns' norms (rows eps64, far below tol),
// where C = V0^T G V0 carries G's, relative to ||M||_F^2 (eg above), which turned away every matrix with a
// singular value below about 0.005 ||M||_F: every Gaussian square one. col_min (since stop 74): S_j =
// ||x_j|| within tol of itself, whatever X's forward error (||dx_j|| <= (rows + cols) eps64 ||M||_F, as eg's),
// so C_jj >= ((rows + cols) eps64 / tol)^2 ||M||_F^2. The Jacobi on X, the alternative, starts from the same
// x_j and cannot do better; float64's col_min (C's rounding level, 16 (rows + cols) eps64 ||M||_F^2) had
// turned away a Gaussian 4096² by one column (C_jj 2.1e-4 against 4.9e-4, its cosines at 2e-10 against
// tol 7.6e-6: docs/experiments.md, stop 74). A zero column still fails (col_min > 0), and a column of
// rounding noise (a rank-deficient M) fails the pairs' test, its cosines ~1/sqrt(rows) (and where one
// passed, its U column is orthogonal as tested and its S_j within M's backward error): the Jacobi on X
// takes them, and completes U.
JSVD_HOST_DEVICE inline ConvergedStart converged_start_x32(double fro, int64_t rows, int64_t cols, double tol) {
  ConvergedStart t = converged_start_f64(fro, rows, cols, tol);
  t.eps = FLT_EPSILON;
  const double r = static_cast<double>(rows + cols) * DBL_EPSILON / tol;
  t.col_min = fmax(fro * r * r, DBL_MIN);
  return t;
}
// float64 on X after the start's one-sided steps (kernels/precondition/start_x_steps.h; the CPU engine's in
// csrc/cpu/gram_start_cpu.cpp): kX64's pairs, and columns above the Jacobi's own negligible level (rows eps^2
// max|x_ij|^2, jacobi_device.cuh's negligible_norm2, here bounded by 4 rows eps^2 ||M||_F^2) rather than
// kX64's 16 (rows + cols) eps ||M||_F^2,
// which turns away a Gaussian 4096² by its least column and, in a batch of 100 512² squares, about two
// members. The Jacobi on this X, the alternative, would find no pair to rotate and return the same U, S
// and V from it: x_j's forward error (rows + cols) eps ||M||_F is the route's, not the test's (the start
// gives backward stability, not the relative accuracy of the Jacobi on M, which graded inputs keep by the
// route's pre-tests sending them elsewhere). Noise columns of a rank-deficient M fail the pairs' test.
// The steps' caps (both engines): a pair's first-order rotation at most kXStepMaxAngle (nearly equal C_jj
// are left to the Jacobi), and E scaled to ||E||_F <= kXStepMaxNorm, so that W = I + E + E^2/2 is orthogonal
// to ||E||_F^4 / 4 ~ 4e-16.
constexpr double kXStepMaxAngle = 0.1, kXStepMaxNorm = 2e-4;
JSVD_HOST_DEVICE inline ConvergedStart converged_start_f64_steps(double fro, int64_t rows, int64_t cols, double tol) {
  ConvergedStart t = converged_start_f64(fro, rows, cols, tol);
  t.col_min = fmax(4.0 * static_cast<double>(rows) * DBL_EPSILON * DBL_EPSILON * fro, DBL_MIN);
  return t;
}
// Which of the four tests (both engines): float32's on C = V0^T G V0 or on the X^T X of an eigen-solver's
// route (kG32, converged_start), float32's tol on the X^T X of the float64 X (kX32, converged_start_x32),
// float64's on its X^T X (kX64, converged_start_f64), or on X after the start's steps (kX64Steps,
// converged_start_f64_steps).
enum class StartTest { kG32, kX32, kX64, kX64Steps };
JSVD_HOST_DEVICE inline ConvergedStart converged_start(StartTest t, double fro, int64_t rows, int64_t cols,
                                                       double tol) {
  return t == StartTest::kX64        ? converged_start_f64(fro, rows, cols, tol)
         : t == StartTest::kX64Steps ? converged_start_f64_steps(fro, rows, cols, tol)
         : t == StartTest::kX32      ? converged_start_x32(fro, rows, cols, tol)
                                     : converged_start(fro, rows, cols, tol);
}

// Where the start's X = M V0 of a tall matrix fails its test, both engines may run the Jacobi on the q x q R
// of a float64 CholeskyQR2 of X (CUDA kernels/precondition/start_cholqr.h, which gives the argument; CPU
// csrc/cpu/gram_start_cpu.h), declined where a Cholesky factorisation fails or the first pass's Q1 has
// ||Q1^T Q1 - I||_F above this.
constexpr double kCholQrMaxDev = 0.5;

// LAPACK's xGESVJ stops after a sweep whose largest cosine c (|x^T y| / (|x| |y|) over the pairs it
// tested) was below sqrt(q) tol and whose rotations were so small (largest sine s) that no later one in
// it can have moved a pair back above tol (q c s < tol): the sweep that would find nothing is not run
// (docs/experiments.md, stops 52-53). Only from a matrix's second sweep, and only where rotations are
// applied down to tol (float64; on the CPU svdvals too): float32's svd applies them down to eps in that last sweep,
// which leaves U orthogonal to working precision. Both engines: the CPU's pair loop
// (jacobi_cpu_solver.h); the CUDA engine's block pairs (svd_smem_kernel.cuh), Gram EVD and GEMM levels
// (levels/gram/gram_evd.cuh), tested per matrix by end_sweep_kernel.
JSVD_HOST_DEVICE inline bool converged_by_bound(double c, double s, int64_t q, double tol) {
  const double n = static_cast<double>(q);
  return c < sqrt(n) * tol && n * c * s < tol;
}

// Packed outputs of an engine. U and V are undefined tensors when !compute_uv.
// info: int32, one per matrix (codes above), never requiring a host sync to produce.
struct CoreResult {
  at::Tensor U, S, V, info;
  // float32 U and V as a long Jacobi leaves them, about n eps from orthogonal: the CUDA engine polishes
  // them last (kernels/engine/orth_polish.h). False where they come from float64 products or a short
  // Jacobi after a start that measured as orthogonal as gesvda's without it.
  bool polish = true;
  // The engine read on the host that every matrix converged with finite outputs (info all 1): svd and
  // svdvals need not read info again, and return without waiting for the GPU (the start's converged
  // routes, eigh_precondition.cpp). JSVD_INFO_READ=0: they read it anyway.
  bool info_read = false;
};

// Engines. A: either the 1-D contiguous float or double buffer holding the
// packed batch on the engine's device, which the engine may overwrite (the op
// layer passes a private copy); or, for a uniform batch, a 3-D (B, q, p) view
// of the caller's tensor in the compute dtype (element (k, j, i) is matrix k's
// (i, j)), which an engine may read in place where it never writes its input,
// and otherwise packs with packed_input. All work is queued on the current
// stream (CUDA).
inline at::Tensor packed_input(const at::Tensor& A) {
  if (A.dim() == 1) return A;
  at::Tensor packed = at::empty(A.sizes(), A.options());  // contiguous (B, q, p): column-major p x q matrices
  packed.copy_(A);
  return packed.view({-1});
}

CoreResult jacobi_svd_cpu(const at::Tensor& A, const PackedBatch& batch, const SvdOptions& opt);
#ifdef JSVD_WITH_CUDA
CoreResult jacobi_svd_cuda(const at::Tensor& A, const PackedBatch& batch, const SvdOptions& opt);
#endif

}  // namespace jsvd
