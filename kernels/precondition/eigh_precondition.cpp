// The Gram eigenvectors as the Jacobi's starting V (eigh_precondition.h).
#include "precondition/eigh_precondition.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>

#include <cmath>
#include <limits>

#include "tuning_knobs.h"

namespace jsvd {
namespace cuda {

bool eigh_precondition_on(int64_t batch, int64_t rows, int64_t cols, bool uniform) {
  if (!uniform || knobs().eigh == 0) return false;
  if (knobs().eigh == 1) return true;
  if (cols >= kEighMinCols) return batch == 1 || (batch <= kEighMaxBatch && cols >= kEighBatchMinCols);
  return cols >= kEighTallMinCols && cols <= kEighJacobiMaxCols && rows >= kEighTallRatio * cols;
}

double eigh_min_column_ratio(int64_t cols) {
  return std::sqrt(static_cast<double>(cols) * std::numeric_limits<double>::epsilon());
}

bool gram_eig_by_jacobi(int64_t cols) { return cols <= kEighJacobiMaxCols; }

CoreResult svd_eigh_preconditioned(const at::Tensor& A, const PackedBatch& b, const SvdOptions& opt,
                                   const Engine& engine, const Engine& without_start) {
  const int64_t B = b.size(), p = b.rows[0], q = b.cols[0];
  TORCH_CHECK(b.uniform && A.numel() == B * p * q, "jsvd internal: eigh preconditioning needs a uniform batch");
  const at::NoTF32Guard no_tf32;  // (full-precision GEMMs whatever allow_tf32 says)
  const at::Tensor W = A.dim() == 3 ? A : A.view({B, q, p});  // row j of W: column j of the matrix M
  // Each M scaled by a power of two to max|m_ij| in [1, 2) (exactly) for its Gram matrix, which must
  // neither overflow nor underflow. Where M V0 could overflow (or M is not finite) the start declines.
  const at::Tensor amax = W.abs().amax({1, 2}, /*keepdim=*/true);
  const at::Tensor scale = at::where(amax > 0, at::exp2(at::floor(at::log2(amax.to(at::kDouble)))),
                                     at::ones_like(amax, amax.options().dtype(at::kDouble)));
  const at::Tensor Wd = W.to(at::kDouble) / scale;
  // float64: the smallest column norm over the largest (NaN for a zero matrix), read with max|m_ij|.
  const bool f64 = A.scalar_type() == at::kDouble;
  at::Tensor stats = amax.max().to(at::kDouble).reshape({1});
  if (f64) {
    const at::Tensor norms = at::linalg_vector_norm(Wd, 2, {2});
    stats = at::cat({stats, (norms.amin(1) / norms.amax(1)).min().reshape({1})});
  }
  const at::Tensor host = stats.cpu();  // (a host read: svd reads its info anyway)
  const double top = host.data_ptr<double>()[0];
  const double limit = static_cast<double>(f64 ? std::numeric_limits<double>::max() : std::numeric_limits<float>::max());
  if (!std::isfinite(top) || top > limit / (4 * std::sqrt(static_cast<double>(p) * q))) return without_start(A, b, opt);
  if (f64 && !(host.data_ptr<double>()[1] >= eigh_min_column_ratio(q))) return without_start(A, b, opt);
  // The Gram matrix, its eigenvectors and X = M V0 in float64 (products of float32 entries are exact
  // there), X rounded once: its columns start orthogonal to about float32's rounding. float64 syevd costs
  // about what float32's does up to 2048² (H100: 19.4 against 18.7 ms at 1536², 127 against 97 at 4096²),
  // and the float32 route's V0, an approximation, left the Jacobi more sweeps: same build (a9e2a25,
  // JSVD_EIGH_F64), 1x4096² 276 -> 202 ms with the residual 1.1e-6 -> 6.1e-8, 1x1024² 18.3 -> 14.2,
  // 1x3072x768 14.9 -> 12.6, 1x1536² 31.1 -> 29.2, 1x11008x4096 unchanged.
  const at::Tensor G = at::matmul(Wd, Wd.mT());
  at::Tensor V0;  // columns: the eigenvectors, by decreasing eigenvalue
  if (gram_eig_by_jacobi(q)) {
    // A batch of small Gram matrices: this engine's one-sided Jacobi on them, in one call (the warp
    // level), where torch.linalg.eigh would loop over them. Its V is orthogonal to working precision
    // whether or not it converged, which is all X = M V0 needs (the Jacobi on X does the rest).
    SvdOptions go;
    go.may_sync = false;  // (no early stop to read: the warp level sweeps to convergence in one launch)
    const CoreResult g = without_start(G.contiguous().view({-1}), PackedBatch::uniform_of(B, q, q, false), go);
    V0 = g.V.view({B, q, q}).mT();  // (packed V holds V^T)
  } else {
    try {
      V0 = std::get<1>(at::linalg_eigh(G)).flip(-1);
    } catch (const c10::Error&) {
      return without_start(A, b, opt);  // (syevd did not converge)
    }
  }
  const at::Tensor X = (at::matmul(V0.mT(), Wd) * scale).to(A.scalar_type());  // packed, M V0 is V0^T W
  CoreResult r = engine(X.contiguous().view({-1}), b, opt);
  // V = V0 V_x; packed, V^T = V_x^T V0^T. In float64: a float32 product's errors of about q eps
  // would cost V as much orthogonality again.
  if (opt.compute_uv)
    r.V = at::matmul(r.V.view({B, q, q}).to(at::kDouble), V0.mT()).to(A.scalar_type()).contiguous().view({-1});
  return r;
}

}  // namespace cuda
}  // namespace jsvd
