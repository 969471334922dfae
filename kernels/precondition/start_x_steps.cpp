// One-sided first-order steps on the start's X (start_x_steps.h).
#include "precondition/start_x_steps.h"

#include <ATen/ATen.h>

#include "common/batched_gemm.h"
#include "precondition/start_converged.h"
#include "precondition/start_refine.h"

namespace jsvd {
namespace cuda {

std::optional<CoreResult> start_x_steps(at::Tensor& Xd, at::Tensor& V0, at::Tensor C, int64_t rows, double tol,
                                        StartTest kind, bool compute_uv, at::ScalarType dtype, int steps) {
  const int64_t B = Xd.size(0), q = Xd.size(1);
  TORCH_CHECK(Xd.is_contiguous() && Xd.scalar_type() == at::kDouble && V0.scalar_type() == at::kDouble &&
                  V0.size(0) == B && V0.size(1) == q && V0.size(2) == q && q <= kXStepsMaxCols,
              "jsvd internal: start_x_steps' arguments");
  const at::TensorOptions o = Xd.options();
  if (!C.defined()) {
    C = at::empty({B, q, q}, o);
    gram_into(C, Xd);
  }
  for (int k = 0; k < steps; ++k) {
    const at::Tensor IE = at::empty({B, q, q}, o);
    refine_rotation(C, IE, kXStepMaxAngle, kXStepMaxNorm);  // I + E
    // E exactly antisymmetric, which W's orthogonality rests on: C_ij and C_ji are two GEMM sums whose last
    // bits may differ, far more relatively where the pair is nearly orthogonal already, and the cap may keep
    // one of the two (the CPU engine's steps lost V's orthogonality on two clusters of equal singular values)
    const at::Tensor E = (IE - IE.mT()).mul_(0.5);
    const at::Tensor W = E + at::eye(q, o);
    bmm_into<double>(W, E, E, 0.5, 1.0);  // I + E + E^2 / 2
    const at::Tensor X1 = at::empty_like(Xd);
    bmm_into<double>(X1, W.mT(), Xd, 1.0, 0.0);  // (X W, packed: W^T X^T)
    Xd = X1;
    if (compute_uv) {
      const at::Tensor V1 = at::empty({B, q, q}, o);
      bmm_into<double>(V1, blas_operand(V0), W, 1.0, 0.0);
      V0 = V1;
    }
    C = at::empty({B, q, q}, o);
    gram_into(C, Xd);
    if (converged_fails(C, rows, tol, kind).item<int32_t>() == 0) {
      CoreResult r = converged_outputs(C, Xd, V0, compute_uv, dtype);
      r.polish = false;  // (float64 products, as the route's other converged outputs)
      return r;
    }
  }
  return std::nullopt;
}

}  // namespace cuda
}  // namespace jsvd
