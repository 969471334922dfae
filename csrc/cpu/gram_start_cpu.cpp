// The CPU engine's Gram eigenvectors' start (gram_start_cpu.h).
#include "gram_start_cpu.h"

#include "../tuning_knobs.h"

namespace jsvd {

bool cpu_start_on(const PackedBatch& batch, at::ScalarType dtype, const SvdOptions& opt) {
  if (!batch.uniform || batch.size() == 0 || !opt.may_sync || knobs().eigh == 0) return false;
  const int64_t B = batch.size(), p = batch.p(0), q = batch.q(0);
  if (knobs().eigh == 1) return true;
  if (8.0 * B * q * (2.0 * p + 2.0 * q) > kCpuStartMaxBytes) return false;
  if (dtype == at::kDouble && (q >= kCpuStartMinColsF64 || (B >= kCpuStartBatchF64 && q >= kCpuStartBatchMinColsF64)))
    return true;
  return q >= kCpuStartMinCols || (B <= kCpuStartTallBatch && q >= kCpuStartTallMinCols && p >= 4 * q);
}

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
  at::Tensor V0;  // columns: the eigenvectors, by decreasing eigenvalue
  try {
    V0 = std::get<1>(at::linalg_eigh(G)).flip(-1);
  } catch (const c10::Error&) {
    return jacobi(A, batch, opt);  // (syevd did not converge)
  }
  const at::Tensor X = at::bmm(V0.mT(), Wd).to(A.scalar_type()).contiguous();  // packed, M V0 is V0^T W
  CoreResult r = jacobi(X.view({-1}), batch, opt);
  if (opt.compute_uv)  // packed, V^T = Vx^T V0^T, in float64
    r.V = at::bmm(r.V.view({B, q, q}).to(at::kDouble), V0.mT()).to(A.scalar_type()).contiguous().view({-1});
  return r;
}

}  // namespace jsvd
