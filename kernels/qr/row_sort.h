// The rows of a uniform batch sorted by decreasing max|a_ij| before its QR,
// and U's rows put back after (qr_precondition.cpp): xGEJSV's row pivoting,
// which keeps the relative accuracy of graded rows through a Householder QR.
#pragma once

#include <ATen/ATen.h>

namespace jsvd {
namespace cuda {

// W (B, q, p) contiguous: row c of W[k] is column c of the k-th p x q matrix.
// Returns P_r W (a new contiguous buffer) and sets perm (B, p) int64 so that
// row r of P_r W is row perm[k][r] of W. Rows holding NaN or Inf come first.
at::Tensor sort_rows(const at::Tensor& W, at::Tensor& perm);

// U (B, c, p) contiguous, the factor of P_r W: returns P_r^T U (row perm[k][r]
// of the result is row r of U).
at::Tensor unsort_rows(const at::Tensor& U, const at::Tensor& perm);

}  // namespace cuda
}  // namespace jsvd
