// The last step of a float32 CUDA svd: U's and V's columns made orthogonal to
// float32's rounding by one Newton–Schulz step evaluated in float64.
//
// A converged one-sided Jacobi leaves each pair of columns about one rounding
// unit from orthogonal (its rotations are applied in float32, and V
// accumulates every one of them), so ||Q^T Q - I||_F grows like n eps, where
// cuSOLVER's gesvda returns about sqrt(n) eps on small squares. With
// E = Q^T Q - I summed in float64 from float32's exact products, the step
// Q <- Q - Q E / 2 (= Q (3I - Q^T Q) / 2 to first order) leaves O(||E||^2)
// plus the rounding of the result; the correction Q E / 2 is of order eps, so
// float32 arithmetic is exact enough for it. S is untouched and the residual
// does not grow. H100 (bench_gpu, f11872e -> 9c1012b; gesvda's in brackets):
// 200x128² ||U^T U - I||_F 4.8e-6 -> 4.2e-7 (4.3e-7), ||V^T V - I||_F 1.3e-5 ->
// 4.2e-7 (4.2e-7), recon 1.1e-6 -> 9.3e-7; 10x1024² U 6.1e-5 -> 1.2e-6 (1.1e-5).
// A matrix whose ||E||_F exceeds kPolishMaxDefect (not converged, or not
// finite) is left as it is. Which routes are polished: CoreResult::polish.
// A block a factor, or a warp a factor of at most 64 x 32 where that is faster
// (orth_polish_kernel.h; the same sums, so the same bits).
#pragma once

#include <ATen/ATen.h>

#include <cuda_runtime.h>

#include <cstdint>

#include "core.h"
#include "engine/orth_polish_kernel.h"

namespace jsvd {
namespace cuda {

constexpr int64_t kPolishMinCols = 8;  // below it the Jacobi's few rotations leave about eps already

// U's first q columns and V of every matrix of the packed float32 result (csrc/core.h's layout), in
// place, on `stream` (the current stream). Matrices of fewer than kPolishMinCols columns are skipped;
// a factor too large for one block's shared memory goes through batched GEMMs (uniform batches) or
// is left as the Jacobi returned it (lists).
void orth_polish(const at::Tensor& U, const at::Tensor& V, const PackedBatch& b, cudaStream_t stream);

}  // namespace cuda
}  // namespace jsvd
