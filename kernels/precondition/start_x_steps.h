// One-sided first-order steps on the start's X = M V0 before the Jacobi on X (eigh_precondition.h's
// eigen-solver routes, where V0 comes from a float64 solver and X fails the Jacobi's test).
//
// X's Gram matrix C = X^T X (float64, errors relative to its columns' norms) gives each pair's first-order
// rotation E_ij = C_ij / (C_jj - C_ii), the one-sided form of Ogita and Aishima's refinement (the start's
// refine_eigenvectors, which takes S = V0^T G V0 from G instead and so keeps G's rounding, relative to
// ||M||_F^2: it cannot bring a small singular value's column below tol). W = I + E + E^2 / 2 is orthogonal
// to ||E||^4 / 4 (E antisymmetric); E is capped as refine_rotation does (pairs of nearly equal C_jj are left
// to the Jacobi) and scaled to ||E||_F <= kXStepMaxNorm, so that W, V0 W and the Jacobi's V after them stay
// orthogonal to rounding. Both X and V0 take W (X W, not M (V0 W), whose rounding would be relative to ||M||:
// X's own, relative to each column, is what the Jacobi's rotations would have left). A CPU emulation
// (numpy, float64, LAPACK's eigh of G, .scratch/s78_xrefine.py): Gaussian 256² to 1024², X's largest cosine
// 1e3 - 7e3 tol, after one step 0.02 - 0.07 tol; singular values over 6 decades (512²) 1e9 - 2e10 tol,
// after three steps 0.04 - 0.05 tol; column-graded over 8 decades no progress (the route's checks decline
// such matrices first). A step is four float64 GEMMs (E^2, X W, V0 W and the next C), against a sweep of the
// Jacobi on X, two to three of which the steps replace.
#pragma once

#include <ATen/ATen.h>

#include <optional>

#include "core.h"

namespace jsvd {
namespace cuda {

// Where the steps apply: q <= refine_rotation's 4096 columns. (The caps: core.h's kXStepMaxAngle and
// kXStepMaxNorm, shared with the CPU engine's steps.)
constexpr int64_t kXStepsMaxCols = 4096;

// Up to `steps` steps on Xd ((B, q, p) contiguous float64, row j: X's column j) and V0 ((B, q, q) float64),
// each followed by `kind`'s test on the new C (one read). Where every matrix passes, the outputs from X
// (converged_outputs, start_converged.h). Otherwise Xd and V0 hold the last step's X and V0, as good a
// start for the Jacobi on X as before (V0 orthogonal to rounding). C: X^T X where the caller formed it, else
// undefined.
std::optional<CoreResult> start_x_steps(at::Tensor& Xd, at::Tensor& V0, at::Tensor C, int64_t rows, double tol,
                                        StartTest kind, bool compute_uv, at::ScalarType dtype, int steps);

}  // namespace cuda
}  // namespace jsvd
