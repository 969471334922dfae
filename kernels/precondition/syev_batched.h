// A batch of symmetric eigen-decompositions in one cuSOLVER call (cusolverDnXsyevBatched), for the
// Gram eigenvectors' start of batches (eigh_precondition.h): torch.linalg.eigh loops over a batch's
// matrices with syevd, which left a batch of 100 512² Gram matrices 1.5 s (docs/experiments.md, stop 29).
#pragma once

#include <ATen/ATen.h>

namespace jsvd {
namespace cuda {

// G: (B, q, q) contiguous float32/float64, symmetric; overwritten. Returns V (B, q, q), whose columns are
// G's eigenvectors by decreasing eigenvalue, and sets *failed to whether syevBatched reported a matrix
// it did not converge on (read on the host: a synchronisation).
at::Tensor syev_batched(const at::Tensor& G, bool* failed);

}  // namespace cuda
}  // namespace jsvd
