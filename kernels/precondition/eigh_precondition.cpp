// The Gram eigenvectors as the Jacobi's starting V (eigh_precondition.h).
#include "precondition/eigh_precondition.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>

#include <cmath>
#include <limits>

#include "tuning_knobs.h"

namespace jsvd {
namespace cuda {

bool eigh_precondition_on(int64_t batch, int64_t cols, size_t elem, bool uniform) {
  if (!uniform || knobs().eigh == 0) return false;
  if (knobs().eigh == 1) return true;
  return elem == sizeof(float) && batch == 1 && cols >= kEighMinCols;
}

CoreResult svd_eigh_preconditioned(const at::Tensor& A, const PackedBatch& b, const SvdOptions& opt,
                                   const Engine& engine) {
  const int64_t B = b.size(), p = b.rows[0], q = b.cols[0];
  TORCH_CHECK(b.uniform && A.numel() == B * p * q, "jsvd internal: eigh preconditioning needs a uniform batch");
  const at::NoTF32Guard no_tf32;  // (full-precision GEMMs whatever allow_tf32 says)
  const at::Tensor W = A.dim() == 3 ? A : A.view({B, q, p});  // row j of W: column j of the matrix M
  // M scaled to max|m_ij| = 1 for its Gram matrix, which must neither overflow nor underflow. Where
  // M V0 could overflow (or M is not finite) the engine takes M itself, and reports it as it would.
  const at::Tensor amax = W.abs().amax({1, 2}, /*keepdim=*/true);
  const double top = amax.max().item<double>();  // (a host read: eigh reads its info anyway)
  const double limit = static_cast<double>(A.scalar_type() == at::kFloat ? std::numeric_limits<float>::max()
                                                                         : std::numeric_limits<double>::max());
  if (!std::isfinite(top) || top > limit / (4 * std::sqrt(static_cast<double>(p) * q))) return engine(A, b, opt);
  const at::Tensor Ws = W / at::where(amax > 0, amax, at::ones_like(amax));
  // The Gram matrix and its eigenvectors in float64 (products of float32 entries are exact there), and
  // X = M V0 formed in float64 and rounded once: X's columns then start orthogonal to about float32's
  // rounding, below the convergence test, so the Jacobi's first sweep is its last. float64 syevd costs
  // about what float32's does up to 2048² (H100: 19.4 against 18.7 ms at 1536², 127 against 97 at 4096²).
  // JSVD_EIGH_F64=0: the float32 route, whose V0 is only an approximation (3 sweeps at 4096²).
  const bool f64 = knobs().eigh_f64 != 0 || A.scalar_type() == at::kDouble;
  const at::Tensor Wg = f64 ? Ws.to(at::kDouble) : Ws;
  at::Tensor V0;
  try {
    V0 = std::get<1>(at::linalg_eigh(at::matmul(Wg, Wg.mT()))).flip(-1);  // by decreasing eigenvalue
  } catch (const c10::Error&) {
    return engine(A, b, opt);  // (syevd did not converge)
  }
  at::Tensor V0d = V0.to(at::kDouble);
  at::Tensor X;
  if (f64) {
    X = at::matmul(V0d.mT(), W.to(at::kDouble)).to(A.scalar_type());  // packed, X = M V0 is V0^T W
  } else {
    // float32 syevd's V0 is orthogonal to about q eps (||V0^T V0 - I||_F 1.8e-4 at 4096², H100), which
    // V = V0 V_x would keep: one Newton-Schulz step in float64, V0 (3 I - V0^T V0) / 2, squares it.
    V0d = 1.5 * V0d - 0.5 * at::matmul(V0d, at::matmul(V0d.mT(), V0d));
    X = at::matmul(V0d.mT().to(A.scalar_type()), W);
  }
  CoreResult r = engine(X.contiguous().view({-1}), b, opt);
  // V = V0 V_x; packed, V^T = V_x^T V0^T. In float64: a float32 product's errors of about q eps
  // would cost V as much orthogonality again.
  if (opt.compute_uv)
    r.V = at::matmul(r.V.view({B, q, q}).to(at::kDouble), V0d.mT()).to(A.scalar_type()).contiguous().view({-1});
  return r;
}

}  // namespace cuda
}  // namespace jsvd
