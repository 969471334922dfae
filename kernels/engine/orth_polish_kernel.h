// The launcher of orth_polish's kernel (orth_polish.h, orth_polish_kernel.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace jsvd {
namespace cuda {

constexpr double kPolishMaxDefect = 0.1;  // ||E||_F above it: the matrix is left as it is
constexpr size_t kPolishMaxSmem = 220 * 1024;  // one block's Q and E (to 160 x 160)

// A factor to polish: rows x cols column-major at `off` elements into U or V (the first `cols` columns).
struct PolishTask {
  int64_t off;
  int32_t rows, cols;
};

// Shared memory of one task's block.
size_t polish_smem_bytes(int64_t rows, int64_t cols);

// Tasks [0, nu) on U, [nu, ntasks) on V: from `tasks` (device), or for a uniform batch (tasks ==
// nullptr) uni_u / uni_v with `off` the per-matrix stride. `max_cols`, `smem`: the largest task's
// columns and bytes.
void launch_orth_polish(float* U, float* V, const PolishTask* tasks, int nu, int ntasks, int max_cols,
                        const PolishTask& uni_u, const PolishTask& uni_v, size_t smem, cudaStream_t stream);

}  // namespace cuda
}  // namespace jsvd
