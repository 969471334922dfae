// Launchers of the per-matrix steps of the blocked levels and of U's completion
// (blocked_steps.cu). `mats` lists the matrix indices a launch covers.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/engine_types.h"

namespace jsvd {
namespace cuda {

// Non-finite check (info = -2), scaling by max|a|, V workspace = I. The
// listed matrices' states must be zero: max|a| accumulates in them. max_q:
// the largest column count listed.
template <typename T>
void launch_prologue(const EngineArgs<T>& args, const int32_t* mats, int n, int64_t max_q, cudaStream_t stream);

// Per matrix: sweeps += 1 unless converged; converged once a sweep rotated
// nothing, or (`bound`, float64) once xGESVJ's bound holds where the level
// tracks it; the sweep's flags cleared. Counts the still active matrices into
// *active when active != nullptr.
template <typename T>
void launch_end_sweep(const EngineArgs<T>& args, const int32_t* mats, int n, int32_t* active, bool bound,
                      cudaStream_t stream);

// S, U (first q columns), V sorted by descending S; info; rank. norms and
// order: scratch of one double and one int per singular value (packed like S).
template <typename T>
void launch_finalize(const EngineArgs<T>& args, const int32_t* mats, int n, int64_t max_q, double* norms,
                     int32_t* order, cudaStream_t stream);

// The completion's dynamic shared memory for p-row matrices of `cols` columns, nb candidates a round,
// and a bound on its static shared memory.
size_t complete_smem(int64_t p, int64_t cols, int nb, size_t elem);
constexpr size_t kCompleteStaticSmem = 2048;

// Fills U columns rank .. (full ? ucols : q) - 1 with an orthonormal completion (a block a matrix, as
// many candidate columns a round, up to 16, as fit in smem_per_block, the device's opt-in limit).
template <typename T>
void launch_complete(const EngineArgs<T>& args, const int32_t* mats, int n, int64_t max_p, int64_t max_cols,
                     bool full, size_t smem_per_block, cudaStream_t stream);

}  // namespace cuda
}  // namespace jsvd
