// The CPU engine's Gram eigenvectors' start (gram_start_cpu.h).
#include "gram_start_cpu.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <tuple>
#include <vector>

#include "../tuning_knobs.h"

namespace jsvd {

bool cpu_start_on(const PackedBatch& batch, at::ScalarType dtype, const SvdOptions& opt, int64_t call_size) {
  if (!batch.uniform || batch.size() == 0 || !opt.may_sync || knobs().eigh == 0) return false;
  const int64_t B = batch.size(), p = batch.p(0), q = batch.q(0);
  if (knobs().eigh == 1) return true;
  if (8.0 * B * q * (2.0 * p + 2.0 * q) > kCpuStartMaxBytes) return false;
  if (dtype == at::kDouble && (q >= kCpuStartMinColsF64 || (B >= kCpuStartBatchF64 && q >= kCpuStartBatchMinColsF64)))
    return true;
  if (q >= kCpuStartTallMinCols && p >= std::max(4 * q, kCpuStartTallRows)) return true;
  const int64_t call = call_size < 0 ? B : call_size;
  return q >= kCpuStartMinCols || (call <= kCpuStartFewBatch && q >= kCpuStartFewMinCols) ||
         (call == 1 && q >= kCpuStartSingleMinCols);
}

bool cpu_x_by_cholqr(int64_t rows, int64_t cols, at::ScalarType dtype, const SvdOptions& opt) {
  if (opt.full_matrices || knobs().x_cholqr == 0) return false;
  return knobs().x_cholqr == 1 || (dtype == at::kDouble && rows >= kCpuCholQrMinRatio * cols);
}

namespace {

// Whether every matrix's least eigenvalue passes ConvergedStart::column_ok (on X^T X half of it, as the
// CUDA engine's eigen-solvers' routes): L (B, q), increasing.
bool might_converge(const at::Tensor& L, int64_t p, double tol, StartTest t) {
  const int64_t B = L.size(0), q = L.size(1);
  const at::Tensor Lc = L.contiguous();
  const double* l = Lc.const_data_ptr<double>();
  for (int64_t k = 0; k < B; ++k) {
    double fro = 0;
    for (int64_t j = 0; j < q; ++j) fro += l[k * q + j];
    if (!converged_start(t, fro, p, q, tol).column_ok((t == StartTest::kG32 ? 1.0 : 2.0) * l[k * q])) return false;
  }
  return true;
}

// Whether every matrix's C (B, q, q) contiguous passes the test; *order: its columns by decreasing C_jj,
// ties in order (the CUDA kernels' rank_part gives the same).
bool converged_order(const at::Tensor& C, int64_t p, double tol, StartTest t, at::Tensor* order) {
  const int64_t B = C.size(0), q = C.size(1);
  const double* c = C.const_data_ptr<double>();
  *order = at::empty({B, q}, at::kLong);
  int64_t* perm = order->mutable_data_ptr<int64_t>();
  for (int64_t k = 0; k < B; ++k) {
    const double* ck = c + k * q * q;
    double fro = 0;  // ||M||_F^2 = trace(C)
    for (int64_t j = 0; j < q; ++j) fro += ck[j * q + j];
    const ConvergedStart test = converged_start(t, fro, p, q, tol);
    if (!ConvergedStart::fro_ok(fro)) return false;
    for (int64_t i = 0; i < q; ++i)
      for (int64_t j = i; j < q; ++j)
        if (!test.entry_ok(ck, q, i, j)) return false;
    int64_t* pk = perm + k * q;
    std::iota(pk, pk + q, int64_t{0});
    std::stable_sort(pk, pk + q, [&](int64_t a, int64_t b) { return ck[a * q + a] > ck[b * q + b]; });
  }
  return true;
}

// One of the CPU engine's one-sided first-order steps on X (the CUDA engine's start_x_steps.h gives the
// argument): from C = X^T X, E_ij = C_ij / (C_jj - C_ii) where at most kXStepMaxAngle, scaled to ||E||_F <=
// kXStepMaxNorm, W = I + E + E^2/2; X <- X W (Xd packed: W^T Xd), V0 <- V0 W. Returns the new C.
at::Tensor x_step(at::Tensor& Xd, at::Tensor& V0, const at::Tensor& C, bool uv) {
  const int64_t q = C.size(1);
  const at::Tensor d = C.diagonal(0, 1, 2);
  at::Tensor E = C / (d.unsqueeze(1) - d.unsqueeze(2));  // [k][i][j]: C_ij / (C_jj - C_ii)
  E = at::where(E.abs() <= kXStepMaxAngle, E, at::zeros({}, E.options()));  // (the diagonal, inf, NaN: 0)
  // Exactly antisymmetric, which W's orthogonality rests on: C_ij and C_ji are two sums whose last bits may
  // differ, far more relatively where the pair is nearly orthogonal already (and the cap may then keep one
  // of the two): without it, a matrix of two clusters of equal singular values lost V's orthogonality
  // (reconstruction 3.5e-6, test_svd's test_repeated_singular_values_recovered).
  E = (E - E.mT()).mul_(0.5);
  E.mul_(at::clamp_max(kXStepMaxNorm / at::linalg_matrix_norm(E, "fro", {1, 2}, /*keepdim=*/true), 1.0));
  const at::Tensor W = at::baddbmm(E + at::eye(q, E.options()), E, E, /*beta=*/1, /*alpha=*/0.5);
  Xd = at::bmm(W.mT(), Xd);
  if (uv) V0 = at::bmm(V0, W);
  return at::bmm(Xd, Xd.mT()).contiguous();
}

// The Jacobi on X by CholeskyQR2 (kernels/precondition/start_cholqr.h, the CUDA engine's, gives the
// argument): X = Q2 R, the Jacobi on R (q x q), U = Q2 U_R. Xd packed (B, q, p) float64 (row j: column j
// of X). nullopt where a factorisation fails or Q1 is further than kCholQrMaxDev from orthogonal.
std::optional<CoreResult> jacobi_on_x_by_cholqr(const at::Tensor& Xd, at::ScalarType dtype, const SvdOptions& opt,
                                                const CpuJacobi& square) {
  const int64_t B = Xd.size(0), q = Xd.size(1), p = Xd.size(2);
  // One pass: L L^T = Y Y^T, and Y's Q packed, L^-1 Y (R = L^T). Returns an undefined Q where potrf fails.
  const auto pass = [](const at::Tensor& Y, at::Tensor* L, at::Tensor* C) {
    *C = at::bmm(Y, Y.mT());
    at::Tensor info;
    std::tie(*L, info) = at::linalg_cholesky_ex(*C);
    return info.ne(0).any().item<bool>() ? at::Tensor() : at::linalg_solve_triangular(*L, Y, /*upper=*/false);
  };
  at::Tensor L1, L2, C1, C2;
  const at::Tensor Q1 = pass(Xd, &L1, &C1);
  if (!Q1.defined()) return std::nullopt;
  const at::Tensor Q2 = pass(Q1, &L2, &C2);
  if (!Q2.defined() ||
      !at::linalg_matrix_norm(C2 - at::eye(q, C2.options())).le(kCholQrMaxDev).all().item<bool>())
    return std::nullopt;
  SvdOptions xo = opt;
  xo.full_matrices = false;
  xo.tol = resolve_tol(opt, p, dtype);  // (X's own threshold)
  // R = R2 R1 = (L1 L2)^T, packed (its columns as rows): L1 L2
  CoreResult r = square(at::bmm(L1, L2).to(dtype).contiguous().view({-1}), PackedBatch::uniform_of(B, q, q, false), xo);
  if (opt.compute_uv)  // U = Q2 U_R; packed, U_R^T Q2^T
    r.U = at::bmm(r.U.view({B, q, q}).to(at::kDouble), Q2).to(dtype).contiguous().view({-1});
  return r;
}

// sqrt(C_jj) of each matrix's columns in `order`, (B, q) float64, by IEEE square roots: ATen's CPU sqrt is not
// correctly rounded (1 ulp off on 3 of a seeded float64 16x512x64 batch's 1024 values, stop 88), and S's bits
// then would depend on which of the outputs' two branches ran.
at::Tensor ordered_norms(const at::Tensor& C, const at::Tensor& order) {
  const int64_t B = C.size(0), q = C.size(1);
  at::Tensor d = at::empty({B, q}, C.options());
  const double* c = C.const_data_ptr<double>();
  const int64_t* o = order.const_data_ptr<int64_t>();
  double* dv = d.mutable_data_ptr<double>();
  for (int64_t k = 0; k < B; ++k)
    for (int64_t j = 0; j < q; ++j) dv[k * q + j] = std::sqrt(c[(k * q + o[k * q + j]) * q + o[k * q + j]]);
  return d;
}

// U and V^T packed from X (Xd, (B, q, p) float64), V0 (B, q, q) and d (ordered_norms) in one pass each on the
// calling thread: U's row j = X's row order[j] / d_j, V^T's row j = V0's column order[j], each rounded once
// to T; the same bits as the ATen operations they replace (two gathers, a division, two roundings and copies:
// about 0.14 ms of a 1.7 ms float32 128² call on this machine, stop 88).
template <typename T>
void factors_from_x(const at::Tensor& order, const at::Tensor& d, const at::Tensor& Xd, const at::Tensor& V0,
                    CoreResult& r) {
  const int64_t B = Xd.size(0), q = Xd.size(1), p = Xd.size(2);
  const auto opts = at::TensorOptions().dtype(c10::CppTypeToScalarType<T>::value);
  r.U = at::empty({B * q * p}, opts);
  r.V = at::empty({B * q * q}, opts);
  const at::Tensor Xc = Xd.contiguous(), Vc = V0.contiguous();  // (read through raw pointers below)
  const double *x = Xc.const_data_ptr<double>(), *v = Vc.const_data_ptr<double>(), *dv = d.const_data_ptr<double>();
  const int64_t* o = order.const_data_ptr<int64_t>();
  T *u = r.U.mutable_data_ptr<T>(), *vt = r.V.mutable_data_ptr<T>();
  for (int64_t k = 0; k < B; ++k)
    for (int64_t j = 0; j < q; ++j) {
      const int64_t src = o[k * q + j], row = k * q + j;
      const double* xr = x + (k * q + src) * p;
      for (int64_t l = 0; l < p; ++l) u[row * p + l] = static_cast<T>(xr[l] / dv[row]);
      const double* vk = v + k * q * q;
      for (int64_t i = 0; i < q; ++i) vt[row * q + i] = static_cast<T>(vk[i * q + src]);
    }
}

}  // namespace

CoreResult svd_gram_start_cpu(const at::Tensor& A, const PackedBatch& batch, const SvdOptions& opt,
                              const CpuJacobi& jacobi, const CpuJacobi& jacobi_x) {
  const int64_t B = batch.size(), p = batch.p(0), q = batch.q(0);
  const bool f64 = A.scalar_type() == at::kDouble;
  // Packed: row j of W is column j of M. The Gram matrix, V0 and X in float64 (float32's products are
  // exact there), X rounded once.
  const at::Tensor Wd = A.view({B, q, p}).to(at::kDouble);
  const at::Tensor G = at::bmm(Wd, Wd.mT());
  const StartLimits lim = start_limits(f64, q);
  const at::Tensor d = G.diagonal(0, 1, 2).contiguous();
  const double* dv = d.const_data_ptr<double>();
  for (int64_t k = 0; k < B; ++k) {  // (as the CUDA engine's start_checks kernel: fmin/fmax skip NaN)
    double lo = INFINITY, hi = 0;
    bool nan = false;
    for (int64_t j = 0; j < q; ++j) {
      const double x = dv[k * q + j];
      nan |= std::isnan(x);
      lo = std::fmin(lo, x);
      hi = std::fmax(hi, x);
    }
    if (!lim.passes(lo, hi, nan, q)) return jacobi(A, batch, opt);
  }
  at::Tensor V0, L;  // columns: the eigenvectors, by decreasing eigenvalue; L: the eigenvalues, increasing
  try {
    std::tie(L, V0) = at::linalg_eigh(G);
    V0 = V0.flip(-1);
  } catch (const c10::Error&) {
    return jacobi(A, batch, opt);  // (syevd did not converge)
  }
  // svd (reduced U) and svdvals: where M V0 is already converged in every matrix (ConvergedStart, core.h),
  // S, U and V without the Jacobi on X. Near-square float32 matrices (rows < 2 cols) by the Jacobi's own
  // test on C = X^T X of the formed float64 X at float32's tol less U's rounding (converged_start_x32,
  // since stop 56; this machine, 2-thread Xeon, ms, now / before, LAPACK: 1x1024² 109 / 120 / 121, 100x128²
  // 82 / 91 / 99, 1x128² 1.01 / 1.08 / 1.01); taller float32 ones on C = V0^T G V0, two products of G's size
  // where X^T X would cost one of X's, by the bound on G's rounding (converged_start), which tall
  // Gaussian ones pass (1x4000x300: 13.2 ms, 17.5 by X^T X); float64's tall ones on X^T X
  // (converged_start_f64). (The eigenvalues rule out first the matrices whose smallest column would fail.)
  const double tol = resolve_tol(opt, p, A.scalar_type());
  const StartTest kind = f64 ? StartTest::kX64 : p < 2 * q ? StartTest::kX32 : StartTest::kG32;
  const bool test = (!opt.compute_uv || !opt.full_matrices) &&
                    (f64 ? knobs().start_converged_f64 && p >= 2 * q : knobs().start_converged) &&
                    might_converge(L, p, tol, kind);
  at::Tensor Xd;  // X = M V0 in float64, packed as V0^T W
  if (kind != StartTest::kG32) Xd = at::bmm(V0.mT(), Wd);
  // S, U and V from a C that passed (its columns in `order`): what the Jacobi's one sweep on X would give.
  const auto outputs = [&](const at::Tensor& C, const at::Tensor& order) {
    const at::Tensor d = ordered_norms(C, order);
    CoreResult r;
    r.S = d.to(A.scalar_type()).contiguous().view({-1});
    r.info = at::ones({B}, A.options().dtype(at::kInt));  // (the Jacobi's one sweep on X)
    if (!opt.compute_uv) return r;
    if (kind != StartTest::kG32 && B * q * (p + q) <= kCpuStartFusedOutputs) {  // (few matrices: one pass)
      if (f64) factors_from_x<double>(order, d, Xd, V0, r);
      else factors_from_x<float>(order, d, Xd, V0, r);
      return r;
    }
    const at::Tensor Vp = V0.gather(2, order.unsqueeze(1).expand({B, q, q}));  // V0's columns in that order
    const at::Tensor U = kind == StartTest::kG32 ? at::bmm((Vp / d.unsqueeze(1)).mT(), Wd)
                                             : Xd.gather(1, order.unsqueeze(2).expand({B, q, p})) / d.unsqueeze(2);
    r.U = U.to(A.scalar_type()).contiguous().view({-1});
    r.V = Vp.mT().to(A.scalar_type()).contiguous().view({-1});  // packed V^T
    return r;
  };
  at::Tensor order, C;
  if (test) {
    C = (kind == StartTest::kG32 ? at::bmm(V0.mT(), at::bmm(G, V0)) : at::bmm(Xd, Xd.mT())).contiguous();
    if (converged_order(C, p, tol, kind, &order)) return outputs(C, order);
  }
  if (!Xd.defined()) Xd = at::bmm(V0.mT(), Wd);
  // float64 where X failed the test or was not tested (squares): up to JSVD_START_X_STEPS one-sided steps
  // on X first (x_step), each tested by kX64Steps (core.h); the Jacobi on the last X where they do not pass.
  if (f64 && (!opt.compute_uv || !opt.full_matrices) && knobs().start_converged_f64 && knobs().start_x_steps > 0 &&
      might_converge(L, p, tol, StartTest::kX64Steps)) {
    if (!C.defined()) C = at::bmm(Xd, Xd.mT()).contiguous();
    for (int k = 0; k < knobs().start_x_steps; ++k) {
      C = x_step(Xd, V0, C, opt.compute_uv);
      if (converged_order(C, p, tol, StartTest::kX64Steps, &order)) return outputs(C, order);
    }
  }
  // Tall matrices: CholeskyQR2 on X, where it is not declined (cpu_x_by_cholqr)
  std::optional<CoreResult> by_cholqr;
  if (cpu_x_by_cholqr(p, q, A.scalar_type(), opt)) by_cholqr = jacobi_on_x_by_cholqr(Xd, A.scalar_type(), opt, jacobi_x);
  const at::Tensor X = by_cholqr ? at::Tensor() : (f64 ? Xd : Xd.to(A.scalar_type())).contiguous();  // packed, M V0 is V0^T W
  CoreResult r = by_cholqr ? std::move(*by_cholqr) : jacobi_x(X.view({-1}), batch, opt);
  if (opt.compute_uv)  // packed, V^T = Vx^T V0^T, in float64
    r.V = at::bmm(r.V.view({B, q, q}).to(at::kDouble), V0.mT()).to(A.scalar_type()).contiguous().view({-1});
  return r;
}

}  // namespace jsvd
