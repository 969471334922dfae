// The element-wise steps around the float32-solved start's eigen-solver and refinement
// (eigh_precondition.cpp: evd32), each one launch with a block a matrix. As ATen operations they were
// about twenty-five launches a batch, most of them a pass over B q^2 float64 entries, between the
// refinement's GEMMs; fused, they made float32's large tall batches worth the float32 solver (H200, stop 66:
// docs/experiments.md). The refinement's GEMM steps around them: refine_steps.cpp.
#pragma once

#include <ATen/ATen.h>

namespace jsvd {
namespace cuda {

// G: (B, q, q) contiguous float64. Returns each G over its trace (1 where the trace is not positive, a zero
// matrix where it is not finite), rounded to float32: what float32's syevBatched solves (its G would overflow from ||M||_F ~ 2^64).
at::Tensor trace_scaled_float(const at::Tensor& G);

// S = V0^T G V0: (B, q, q) contiguous float64. Writes IE = I + E, E the refinement's first-order rotation
// (refine_eigenvectors, refine_steps.cpp): E_ij = S_ij / (S_jj - S_ii) where |E_ij| <= max_angle, else
// 0 (the diagonal too), the whole scaled to ||E||_F <= max_norm.
void refine_rotation(const at::Tensor& S, const at::Tensor& IE, double max_angle, double max_norm);

// F = V0^T V0: (B, q, q) contiguous float64. Sets `flag` (a device bool scalar) where some matrix has
// ||F - I||_F above `limit` or not a number; leaves it as it was otherwise.
void flag_orth_defect(const at::Tensor& F, double limit, const at::Tensor& flag);

// One Newton-Schulz step towards V0's orthogonal polar factor, in float64 (refine_steps.cpp).
at::Tensor newton_schulz_step(const at::Tensor& V0);

// One step of Ogita and Aishima's refinement of V0's columns as G's eigenvectors, V0 orthogonal, then
// `ns_steps` Newton-Schulz steps (refine_steps.cpp). G, V0: (B, q, q) float64.
at::Tensor refine_eigenvectors(const at::Tensor& G, const at::Tensor& V0, int ns_steps);

}  // namespace cuda
}  // namespace jsvd
