// Whether the batched start's X = M V0 (eigh_precondition.h) is already converged, so that the Jacobi on
// X can be skipped: float32 matrices whose Gram eigenvectors V0 (float64) already make M's columns
// orthogonal to the Jacobi's tolerance, decided from G and V0 alone, before X is formed.
//
// C = V0^T G V0 is X's Gram matrix before X is rounded to float32. The float32 rounding of
// U = fl(M V0 D^-1), D = diag(sqrt(C_jj)), moves u_i^T u_j by at most about eps32 (|e_rj| <= eps32/2
// |u_rj| elementwise, ||u|| = 1), and the float64 roundings of G and of C itself move every C_ij by at
// most 2 (rows + q) eps64 ||M||_F^2 (eg: |V0|^T |G| |V0| <= ||G||_F <= trace G = ||M||_F^2). A matrix passes where, for every pair, (|C_ij| + eg) / sqrt(C_ii C_jj)
// + 1.01 eps32 <= tol (the Jacobi's convergence test, which its first sweep on X would then pass
// without a rotation above tol), and every C_jj >= 8 eg / eps32 (so that sqrt(C_jj), which becomes S,
// and the normalisation of U are float32-accurate; numerically zero or rank-deficient columns fail
// here). Then S = sqrt(C_jj) sorted, V = V0 in that order and U = M (V0 D^-1) in that order, one
// product (svdvals: S alone): what the Jacobi's one sweep on X and its write-back would give, without
// reading X again. float64 has no wider type to round from: its batched start and eigen-solvers' routes
// test the formed X (converged_fails on X^T X, the Jacobi's own criterion: converged_start_f64, core.h)
// and take converged_outputs.
#pragma once

#include <ATen/ATen.h>

#include "core.h"  // CoreResult

namespace jsvd {
namespace cuda {

struct StartConverged {
  at::Tensor Vs;     // (B, q, q) float64, [k][i][r]: V0's column perm[r] / sqrt(C_pp): U = M Vs
  at::Tensor Vt;     // (B, q, q) of S's dtype, [k][r][i]: V^T, packed as the engine's V
  at::Tensor S;      // (B, q) of S's dtype, descending
  at::Tensor fails;  // int32 on the device: how many matrices did not pass
};

// G: (B, q, q) contiguous float64; V0: (B, q, q) float64 in any strides ([k][i][j]: V0's (i, j));
// rows: M's row count; tol: the Jacobi's convergence tolerance; dtype: the output's (float32).
StartConverged start_converged(const at::Tensor& G, const at::Tensor& V0, int64_t rows, double tol,
                               at::ScalarType dtype);

// The same test for matrices beyond one block (the syevd and syevBatched routes, from 256 columns), on
// C = X^T X of X = M V0 formed in float64 (C: (B, q, q) contiguous float64): how many matrices fail, an
// int32 on the device. C's float64 errors stay within eg to first order: |dX| <= q eps64 |M| |V0|
// elementwise and || |M| |v| || <= ||M||_F, so |dC_ij| <= (2 q + rows) eps64 ||M||_F^2.
// kind (StartTest, core.h): float32's (kG32, the bound above); float64 outputs, the Jacobi's own test on C
// (kX64, converged_start_f64); or float32 (kX32, since stop 57; JSVD_START_CONVERGED_X32=0 restores kG32)
// the same test at float32's tol less U's rounding (converged_start_x32, as the CPU engine's near-square
// matrices since stop 56). The bound above is on X's
// forward error, which the outputs do not need: U D V0^T = X V0^T = M + dX V0^T + M (V0 V0^T - I) is
// backward stable whatever X's error, and C's own rounding is relative to its columns' norms. Where it
// passes, a Gaussian square's smallest singular values (far below 0.005 ||M||_F) no longer send it to the
// Jacobi on X.
at::Tensor converged_fails(const at::Tensor& C, int64_t rows, double tol, StartTest kind);

// Where converged_fails found none: S = sqrt(C_jj) descending, U = X D^-1 and V = V0 in that order, in
// one launch, packed as the Jacobi's outputs (S alone without compute_uv), info 1. X: (B, q, rows)
// contiguous float64 (row j: X's column j); V0: (B, q, q) float64 in any strides; dtype float32 or
// float64.
CoreResult converged_outputs(const at::Tensor& C, const at::Tensor& X, const at::Tensor& V0, bool compute_uv,
                             at::ScalarType dtype);

}  // namespace cuda
}  // namespace jsvd
