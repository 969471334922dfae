// The launcher of orth_polish's kernel (orth_polish.h, orth_polish_kernel.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace jsvd {
namespace cuda {

constexpr double kPolishMaxDefect = 0.1;  // ||E||_F above it: the matrix is left as it is
constexpr size_t kPolishMaxSmem = 220 * 1024;  // one block's Q and E (to 160 x 160)
// A factor of at most these rows and columns may be polished by a warp (orth_polish_warp_kernel, four a
// block): always to kPolishWarpAlwaysCols columns, beyond only where there are at least
// kPolishWarpMinTasksPerSM such factors an SM (orth_polish.cpp).
constexpr int kPolishWarpMaxRows = 64, kPolishWarpMaxCols = 32, kPolishWarpsPerBlock = 4;
constexpr int kPolishWarpAlwaysCols = 16, kPolishWarpMinTasksPerSM = 64;

// A factor to polish: rows x cols column-major at `off` elements into U or V (the first `cols` columns).
struct PolishTask {
  int64_t off;
  int32_t rows, cols;
};

// Shared memory of one task's block.
size_t polish_smem_bytes(int64_t rows, int64_t cols);

// `count` tasks from t = first, t < nu on U, the others on V: from `tasks` (device), or for a uniform
// batch (tasks == nullptr) uni_u / uni_v with `off` the per-matrix stride. `smem`, `max_cols`: the
// largest task's polish_smem_bytes and columns. `warp`: a warp a task (every task within
// kPolishWarpMax*), else a block a task, the block from `split` on taking task first + block + skip
// (a list's two block ranges around its warp range in one launch; split = count, skip = 0 for none).
void launch_orth_polish(float* U, float* V, const PolishTask* tasks, int nu, int first, int count, size_t smem,
                        int max_cols, const PolishTask& uni_u, const PolishTask& uni_v, bool warp, int split,
                        int skip, cudaStream_t stream);

}  // namespace cuda
}  // namespace jsvd
