// The start's own symmetric eigen-solver for batches of float32 Gram matrices of at most 128 columns
// (eigh_precondition's float32 route, in place of cuSOLVER's syevBatched: JSVD_START_OWN_EVD). Two launches,
// a CTA a matrix: the tridiagonal reduction with each row in a thread's registers (tridiag_reduce.cuh), then
// the tridiagonal eigenpairs by bisection and inverse iteration and the back-transformation
// (tridiag_eigenpairs.cuh, evd_tail.cuh). H200, stop 84 (a standalone probe, Gaussian Gram matrices): float32
// 200 x 128² 0.20 + 0.47 ms against syevBatched's 1.62 (the whole call), 500 x 128² 0.48 + 0.94 against 3.53,
// 37 x 77² 0.12 + 0.20 against 0.55; ||G V0 - V0 L||/||G|| ~5e-7, ||V0^T V0 - I||_F 1e-5 to 3e-5 (cuSOLVER's
// 2e-5 to 7e-5 on the route's batches).
#pragma once

#include <ATen/ATen.h>

namespace jsvd {
namespace cuda {

constexpr int64_t kEvdSmallMaxCols = 128;
// From this many matrices (a CTA each): fewer leave its latency-bound kernels most of the GPU idle. H200, stop 84,
// JSVD_START_OWN_EVD 1 / 0, two rounds, whole svd calls, ms: float32 200x128² 2.47, 2.71 / 3.44, 3.39; 500x128²
// 5.69, 5.64 / 6.79, 6.71; 200x100² 2.15, 2.04 / 2.70, 2.63; 200x300x100 1.90, 1.83 / 2.31, 2.30; 40x200x120
// 1.22, 1.22 / 1.42, 1.44; float64 200x128² 3.94, 4.11 / 4.40, 4.19; but float64 16x128² 2.29, 2.22 / 1.97, 1.96.
constexpr int64_t kEvdSmallMinBatch = 32;
// The tail's launches take at most this many matrices each, one after another, so that its scratch (inverse
// iteration's segment states, the clusters' first vectors and Gram matrices, 2048 + 128 q + 128 x 32 floats a
// matrix: 88 KB at q = 128) stays within 90 MB.
constexpr int64_t kEvdSmallChunk = 1024;

// Whether the own solver takes a batch of `batch` float32 Gram matrices of q columns (JSVD_START_OWN_EVD).
bool evd_small_on(int64_t batch, int64_t q);

// G: (B, q, q) contiguous float32, symmetric (lower triangle read), q <= kEvdSmallMaxCols; not overwritten.
// Returns V0 (B, q, q), whose columns are G's eigenvectors by decreasing eigenvalue, orthonormal to about
// float32's rounding, and sets *eigenvalues, where given, to the (B, q) eigenvalues, increasing, and *failed to
// a device bool scalar, true where a cluster's inverse iteration left a member numerically dependent on the
// others twice: the first time a new start replaces it, which the cluster's second solve makes an eigenvector;
// where the second round fails and the cluster keeps its first vectors, the replacement is orthogonal but not
// an eigenvector, and the caller declines the batch, as it does where syevBatched did not converge. (Flagging
// every replacement declined ~0.5% of low-rank Gram matrices whose vectors were accurate: host emulation,
// stop 85.) Nothing is synchronised. skip, where given (one int32 on the device): where it is not 0 when the
// kernels run, they do no work and V0 and the eigenvalues are zeros (a batch declined by a flag not yet read on
// the host: eigh_precondition.cpp's one read).
at::Tensor evd_small_async(const at::Tensor& G, at::Tensor* failed, at::Tensor* eigenvalues = nullptr,
                           const at::Tensor& skip = at::Tensor());

}  // namespace cuda
}  // namespace jsvd
