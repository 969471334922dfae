// The CPU engine's Gram eigenvectors' start (gram_start_cpu.h).
#include "gram_start_cpu.h"

#include <algorithm>
#include <numeric>
#include <tuple>
#include <vector>

#include "../tuning_knobs.h"

namespace jsvd {

bool cpu_start_on(const PackedBatch& batch, at::ScalarType dtype, const SvdOptions& opt) {
  if (!batch.uniform || batch.size() == 0 || !opt.may_sync || knobs().eigh == 0) return false;
  const int64_t B = batch.size(), p = batch.p(0), q = batch.q(0);
  if (knobs().eigh == 1) return true;
  if (8.0 * B * q * (2.0 * p + 2.0 * q) > kCpuStartMaxBytes) return false;
  if (dtype == at::kDouble && (q >= kCpuStartMinColsF64 || (B >= kCpuStartBatchF64 && q >= kCpuStartBatchMinColsF64)))
    return true;
  if (dtype == at::kFloat && q >= kCpuStartTallMinColsF32 && p >= std::max(4 * q, kCpuStartTallRowsF32)) return true;
  return q >= kCpuStartMinCols || (B <= kCpuStartTallBatch && q >= kCpuStartTallMinCols && p >= 4 * q);
}

namespace {

// Whether every matrix's least eigenvalue passes ConvergedStart::column_ok: L (B, q), increasing.
bool might_converge(const at::Tensor& L, int64_t p, double tol) {
  const int64_t B = L.size(0), q = L.size(1);
  const at::Tensor Lc = L.contiguous();
  const double* l = Lc.const_data_ptr<double>();
  for (int64_t k = 0; k < B; ++k) {
    double fro = 0;
    for (int64_t j = 0; j < q; ++j) fro += l[k * q + j];
    if (!converged_start(fro, p, q, tol).column_ok(l[k * q])) return false;
  }
  return true;
}

}  // namespace

CoreResult svd_gram_start_cpu(const at::Tensor& A, const PackedBatch& batch, const SvdOptions& opt,
                              const CpuJacobi& jacobi) {
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
  // float32 svd (reduced U) and svdvals: where M V0 is already converged in every matrix (the CUDA
  // engine's test, kernels/precondition/start_converged.h; ConvergedStart, core.h), S, U and V from
  // C = V0^T G V0 and one product, without the Jacobi on X.
  // (C costs two products of the Gram matrix's size, so the eigenvalues rule out first the matrices whose
  // smallest column would fail: near-square ones, whose small singular values sit far below ||M||_F)
  const double tol = resolve_tol(opt, p, A.scalar_type());
  if (!f64 && (!opt.compute_uv || !opt.full_matrices) && knobs().start_converged && might_converge(L, p, tol)) {
    const at::Tensor C = at::bmm(V0.mT(), at::bmm(G, V0)).contiguous();
    const double* c = C.const_data_ptr<double>();
    std::vector<int64_t> perm(B * q);
    bool pass = true;
    for (int64_t k = 0; k < B && pass; ++k) {
      const double* ck = c + k * q * q;
      double fro = 0;  // ||M||_F^2 = trace(C)
      for (int64_t j = 0; j < q; ++j) fro += ck[j * q + j];
      const ConvergedStart test = converged_start(fro, p, q, tol);
      pass = ConvergedStart::fro_ok(fro);
      for (int64_t i = 0; i < q && pass; ++i)
        for (int64_t j = i; j < q && pass; ++j) pass = test.entry_ok(ck, q, i, j);
      int64_t* pk = perm.data() + k * q;  // the columns by decreasing C_jj, ties in order
      std::iota(pk, pk + q, int64_t{0});
      std::stable_sort(pk, pk + q, [&](int64_t a, int64_t b) { return ck[a * q + a] > ck[b * q + b]; });
    }
    if (pass) {
      const at::Tensor order = at::from_blob(perm.data(), {B, q}, at::kLong);
      const at::Tensor Vp = V0.gather(2, order.unsqueeze(1).expand({B, q, q}));  // V0's columns in that order
      const at::Tensor d = C.diagonal(0, 1, 2).gather(1, order).sqrt();
      CoreResult r;
      r.S = d.to(A.scalar_type()).contiguous().view({-1});
      r.info = at::ones({B}, A.options().dtype(at::kInt));  // (the Jacobi's one sweep on X)
      if (!opt.compute_uv) return r;
      r.U = at::bmm((Vp / d.unsqueeze(1)).mT(), Wd).to(A.scalar_type()).contiguous().view({-1});
      r.V = Vp.mT().to(A.scalar_type()).contiguous().view({-1});  // packed V^T
      return r;
    }
  }
  const at::Tensor X = at::bmm(V0.mT(), Wd).to(A.scalar_type()).contiguous();  // packed, M V0 is V0^T W
  CoreResult r = jacobi(X.view({-1}), batch, opt);
  if (opt.compute_uv)  // packed, V^T = Vx^T V0^T, in float64
    r.V = at::bmm(r.V.view({B, q, q}).to(at::kDouble), V0.mT()).to(A.scalar_type()).contiguous().view({-1});
  return r;
}

}  // namespace jsvd
