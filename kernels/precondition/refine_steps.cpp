// The float32-solved start's refinement steps, as batched DGEMMs around start_refine.cu's kernels
// (start_refine.h).
#include "precondition/start_refine.h"

#include <ATen/ATen.h>

#include "common/batched_gemm.h"
#include "precondition/eigh_precondition.h"

namespace jsvd {
namespace cuda {

// One Newton-Schulz step towards the orthogonal polar factor, V0 (3I - V0^T V0) / 2, in float64: an error
// E = V0^T V0 - I becomes about 3/4 E^2 (float32 eigenvectors' ~3e-5: ~1e-9). Two batched DGEMMs.
at::Tensor newton_schulz_step(const at::Tensor& V0) {
  const int64_t B = V0.size(0), q = V0.size(1);
  const at::Tensor C = at::empty({B, q, q}, V0.options());
  bmm_into<double>(C, V0.mT(), V0, -0.5, 0.0);
  C.diagonal(0, -2, -1).add_(1.5);
  const at::Tensor V = at::empty({B, q, q}, V0.options());
  bmm_into<double>(V, V0, C, 1.0, 0.0);
  return V;
}

// One step of Ogita and Aishima's refinement of approximate eigenvectors (Japan J. Indust. Appl. Math. 35,
// 2018), for V0 already orthogonal: S = V0^T G V0, and each pair's first-order rotation E_ij = S_ij /
// (S_jj - S_ii), antisymmetric, where it is at most kRefineMaxAngle (a pair of nearly equal eigenvalues
// is left to the Jacobi on X); V0 (I + E), made orthogonal again by `ns_steps` Newton-Schulz steps.
// Within a cluster of nearly equal eigenvalues the ratios are rounding over rounding, each up to the
// cap, so E is scaled to ||E||_F <= kRefineMaxNorm: V0 (I + E) is then within ||E||_F^2 of orthogonal,
// which three steps take below 1e-11 and four to rounding (NS: F -> -3/4 F^2 + F^3/4 for V^T V = I + F).
// Without that scaling an orthogonal M (every eigenvalue 1) kept ||V0^T V0 - I|| 0.17 after two steps
// (this machine's CPU, an emulation in float64: .scratch/s54_refine_cluster.py). Their full step, for a V0
// not yet orthogonal (I - V0^T V0 corrected in the step's own GEMMs, no Newton-Schulz step between two),
// was built for float32's tall route and not adopted: about 4% faster there, and U ten times less
// orthogonal at 300x900x100 with singular values to 1/100 (1.8e-6 against 1.7e-7; H200, stop 67).
at::Tensor refine_eigenvectors(const at::Tensor& G, const at::Tensor& V0, int ns_steps) {
  const int64_t B = V0.size(0), q = V0.size(1);
  const at::Tensor GV = at::empty({B, q, q}, V0.options()), S = at::empty({B, q, q}, V0.options());
  bmm_into<double>(GV, G, V0, 1.0, 0.0);
  bmm_into<double>(S, V0.mT(), GV, 1.0, 0.0);
  // (I + E, over GV: read no more)
  refine_rotation(S, GV, kRefineMaxAngle, kRefineMaxNorm);
  at::Tensor V = at::empty({B, q, q}, V0.options());
  bmm_into<double>(V, V0, GV, 1.0, 0.0);
  for (int k = 0; k < ns_steps; ++k) V = newton_schulz_step(V);
  return V;
}

}  // namespace cuda
}  // namespace jsvd
