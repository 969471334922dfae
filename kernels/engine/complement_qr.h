// U's extra columns under full_matrices (q .. ucols - 1 of a p x q matrix, p >= q) by a Householder QR of
// its first q columns, where the greedy completion (launch_complete, blocked_steps.cu: one block a
// matrix, a column at a time, each orthogonalised twice against all before it) would take seconds:
// 1 x 3072x768 float32 with full_matrices=True (torch.linalg.svd's default) spent 9.0 s in it on the
// H200 (docs/experiments.md, stop 41). With P r = [U_q 0] = Q R, Q's last p - q columns are an
// orthonormal basis of the complement of U_q's span (cuSOLVER's geqrf and ormqr).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "core.h"
#include "planner/planner.h"

namespace jsvd {
namespace cuda {

// Whether matrix k's extra columns go by the QR (a call of `batch` matrices; `elem`: element size).
// The greedy's time, about p (ucols² - q²) / 3e9 s a block (measured above), blocks running side by side
// on the SMs, against ~1 ms a matrix of cuSOLVER calls one after another; and always where the greedy's
// shared memory (p doubles and p + ucols elements) exceeds a block's.
bool complement_by_qr(int64_t p, int64_t q, int64_t ucols, size_t elem, int64_t batch, const DeviceLimits& lim);

// For the matrices `mats` of the packed batch b (every matrix of a uniform one where mats is empty),
// whose first q columns of U are orthonormal: U's columns q .. ucols - 1 from the QR, and rank[k] =
// ucols (so that a later launch_complete leaves them). U: the engine's packed U buffer.
void complete_by_qr(const at::Tensor& U, const at::Tensor& rank, const PackedBatch& b, const std::vector<int64_t>& mats);

}  // namespace cuda
}  // namespace jsvd
