// U's orthonormal completion in the CUDA engine: the columns of numerically zero singular values (rank
// .. q - 1), and under full_matrices the extra columns q .. ucols - 1. The greedy completion
// (launch_complete, blocked_steps.cu: one block a matrix, up to 16 candidate columns a round, each round
// orthogonalised twice against all columns before it) does small matrices; large ones are completed from
// a QR of their first columns
// (csrc/complement_qr.h), where the greedy took seconds: 1 x 3072x768 float32 with full_matrices=True
// (torch.linalg.svd's default) 9.0 s on the H200, 16.2 ms with the QR, 10.7 without full_matrices; a zero
// or rank-one 1024² matrix 307 ms, a Gaussian one 35 (docs/experiments.md, stop 41).
#pragma once

#include <ATen/ATen.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core.h"
#include "engine/engine_types.h"
#include "planner/planner.h"

namespace jsvd {
namespace cuda {

// Whether the QR completes U's columns r .. cols - 1 of a matrix of p rows, in a call where `batch` such
// matrices would: the greedy's time, about p (cols² - r²) / 2e10 s a block (3e9 with one candidate a
// round: 1 x 3072x768 9.0 s), blocks running side by side on the SMs, against ~1 ms a matrix of cuSOLVER
// calls one after another (0.15 ms at 300 x 5, 5.5 at 3072 x 768); and always where the greedy's shared
// memory (complete_smem, one candidate a round) exceeds a block's.
bool complement_by_qr(int64_t p, int64_t r, int64_t cols, size_t elem, int64_t batch, const DeviceLimits& lim);

// Completes U (the packed buffer args.U points into) for every matrix of b, whose first rank[k] columns
// are set; rank: their count, a device int per matrix (set to the completed count where the QR
// completes). Where opt.may_sync and a matrix is large, the ranks are read on the host, so that each
// rank-deficient matrix is completed from its own rank; without (svd_ex), matrices too tall for the
// greedy are completed by a QR that finds their zero columns itself (complete_zero_columns_by_qr).
// max_p, max_cols: the batch's largest p and ucols.
template <typename T>
void complete_u(const EngineArgs<T>& args, const at::Tensor& U, const at::Tensor& rank, const PackedBatch& b,
                const SvdOptions& opt, const DeviceLimits& lim, int64_t max_p, int64_t max_cols, cudaStream_t stream);

}  // namespace cuda
}  // namespace jsvd
