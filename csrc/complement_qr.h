// U's extra columns under full_matrices (q .. ucols - 1 of a p x q problem, p >= q) by a Householder QR
// of its first q columns, for large matrices of both engines: where [U_q 0] = Q R, Q's last columns are
// an orthonormal basis of the complement of U_q's span (LAPACK's or cuSOLVER's geqrf and ormqr, through
// ATen). The engines' own completions (one column at a time) took seconds there: 1 x 3072x768 float32
// with full_matrices=True, torch.linalg.svd's default, 9.0 s on the H200 (kernels/engine/complete_u.h),
// and 1 x 3000x300 3.8 s on the CPU (csrc/cpu/jacobi_cpu.cpp); docs/experiments.md, stop 41.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace jsvd {

// Ut: (B, ucols, p), row c of Ut[k] the column c of matrix k's U (the engines' packed U, read row-major),
// rows 0 .. q - 1 orthonormal. Fills rows q .. ucols - 1.
void complete_columns_by_qr(const at::Tensor& Ut, int64_t q);

}  // namespace jsvd
