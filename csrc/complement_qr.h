// U's orthonormal completion by a Householder QR of its first columns, for large matrices of both engines
// (the extra columns of full_matrices; on CUDA also those of numerically zero singular values): where
// [U_r 0] = Q R, Q's last columns are an orthonormal basis of the complement of U_r's span (LAPACK's or cuSOLVER's geqrf and ormqr, through
// ATen). The engines' own completions (a column at a time, then) took seconds there: 1 x 3072x768 float32
// with full_matrices=True, torch.linalg.svd's default, 9.0 s on the H200 (kernels/engine/complete_u.h),
// and 1 x 3000x300 3.8 s on the CPU (csrc/cpu/jacobi_cpu.cpp); docs/experiments.md, stop 41.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "core.h"

namespace jsvd {

// Ut: (B, cols, p), row c of Ut[k] the column c of matrix k's U (the engines' packed U, read row-major),
// rows 0 .. r - 1 orthonormal (r >= 0). Fills rows r .. cols - 1.
void complete_columns_by_qr(const at::Tensor& Ut, int64_t r);

// Ut as above, each matrix's columns orthonormal or exactly zero (those of zero singular values, last),
// its rank unknown on the host (svd_ex, which never reads): [U_q] = Q R, where R's diagonal is +-1 at the
// orthonormal columns and 0 at the zero ones, whose columns become Q's. No host read.
void complete_zero_columns_by_qr(const at::Tensor& Ut);

// Matrix k's U columns r .. cols - 1 (cols <= ucols) from the QR of its first r.
struct CompletionJob {
  int64_t k, r, cols;
};

// The jobs on the packed U buffer of b (either engine's): a uniform batch's jobs of one (r, cols) in
// one call (their matrices gathered and scattered back unless they are the whole batch), a list's one
// member at a time.
void complete_jobs_by_qr(const at::Tensor& U, const PackedBatch& b, const std::vector<CompletionJob>& jobs);

}  // namespace jsvd
