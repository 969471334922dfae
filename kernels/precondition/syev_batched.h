// A batch of symmetric eigen-decompositions in one cuSOLVER call (cusolverDnXsyevBatched), for the
// Gram eigenvectors' start of batches (eigh_precondition.h): torch.linalg.eigh loops over a batch's
// matrices with syevd, which left a batch of 100 512² Gram matrices 1.5 s (docs/experiments.md, stop 29).
// And a batch of Cholesky factorisations in one call (cusolverDnDpotrfBatched), float64's early test of
// the start (cholesky_checks, start_checks.h).
#pragma once

#include <ATen/ATen.h>
#include <cusolver_common.h>

namespace jsvd {
namespace cuda {

// Whether this build's cuSOLVER has it: those of CUDA 13 (cuSOLVER 12.0) do, the one it was written and
// measured with; an older toolkit builds without it (the batches then keep the QR path).
constexpr bool kHaveSyevBatched = CUSOLVER_VERSION >= 12000;

// G: (B, q, q) contiguous float32/float64, symmetric; overwritten. Returns V (B, q, q), whose columns are
// G's eigenvectors by decreasing eigenvalue, and sets *failed to whether syevBatched reported a matrix
// it did not converge on (read on the host: a synchronisation); *eigenvalues, where given, to the (B, q)
// eigenvalues, increasing. `may_graph` false: never as a graph (a list's shapes change from call to call,
// and each new shape would pay a capture).
at::Tensor syev_batched(const at::Tensor& G, bool* failed, at::Tensor* eigenvalues = nullptr, bool may_graph = true);
// As syev_batched, with nothing read on the host: *failed is set to a device bool scalar instead, true
// where a matrix did not converge, for a caller that queues the work after it before reading that.
at::Tensor syev_batched_async(const at::Tensor& G, at::Tensor* failed, at::Tensor* eigenvalues = nullptr,
                              bool may_graph = true);

// G: (B, q, q) contiguous float64, symmetric; not overwritten. Returns its Cholesky factors (a copy of G
// whose lower triangle, column-major, holds L: the diagonal is L's) and sets *info to cuSOLVER's (B) int32
// infos on the device (nonzero: the leading minor of that order is not positive definite). Nothing is
// synchronised. With `shift` > 0, the factors are those of G + shift max_j G_jj I (each matrix its own
// largest diagonal entry): positive definite wherever G is semi-definite and nonzero, so every pivot is
// formed, and those of eigenvalues far below the shift sit near it.
at::Tensor potrf_batched(const at::Tensor& G, at::Tensor* info, double shift = 0);

}  // namespace cuda
}  // namespace jsvd
