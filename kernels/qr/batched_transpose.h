// The transpose of each matrix's leading square block, batched (the QR
// preconditioning's X = R^T, qr_precondition.cpp).
#pragma once

#include <ATen/ATen.h>

namespace jsvd {
namespace cuda {

// src (B, r, c) with unit stride in its last dimension, r, c >= q; returns
// X (B, q, q), contiguous, X[k][j][i] = src[k][i][j], on the current stream.
at::Tensor leading_block_transpose(const at::Tensor& src, int64_t q);

}  // namespace cuda
}  // namespace jsvd
