// The batched Gram eigenvectors' start's two products over a float32 M of at most 16 columns
// (eigh_precondition.h), read from the input in its own strides and accumulated in float64: G = M^T M
// and X = M V0, X rounded once to float32. They replace a float64 copy of M, two cuBLAS DGEMMs and X's
// rounding copy, five passes over M's size, which at 16 columns cost more than the products themselves
// (H100, stop 43, kernels of float32 1000x1024x16: 0.60 -> 0.44 ms). From 32 columns, and for float64
// (no copy to save), cuBLAS's tensor-core DGEMMs were faster than these kernels (docs/experiments.md).
// Products of float32 entries are exact in float64, as they were in the DGEMM of the copy.
#pragma once

#include <ATen/ATen.h>

namespace jsvd {
namespace cuda {

constexpr int kGramProductsMaxCols = 16;

// Whether W (B, q, p) is one these kernels take: float32, q <= kGramProductsMaxCols.
bool gram_products_take(const at::Tensor& W);

// G (B, q, q), contiguous float64, = W W^T for W (B, q, p) in any strides (row j of W: column j of M).
// Each matrix's sum runs in a fixed order: the same bits every call.
void gram_f64(const at::Tensor& W, const at::Tensor& G);

// X^T = V0^T W as a (B, q, p) contiguous float32 tensor (packed: column j of X = M V0 at row j), each
// entry summed in float64 and rounded once. V0: (B, q, q) float64, any strides.
at::Tensor start_product(const at::Tensor& W, const at::Tensor& V0);

}  // namespace cuda
}  // namespace jsvd
