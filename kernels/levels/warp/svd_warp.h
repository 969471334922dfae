// Launcher of the register-resident one-sided Jacobi kernel (svd_warp.cu) for
// matrices of at most 32 columns.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "engine/engine_types.h"

namespace jsvd {
namespace cuda {

struct WarpLaunch {
  int lanes = 0;  // lanes per matrix = padded column count (4, 8, 16 or 32), 1 (a thread, p <= 4); 0: does not fit
  int rows = 0;   // rows of A per lane
};

// The warp kernel's shape for a p x q matrix (p >= q), or lanes == 0 where
// the matrix does not fit in registers.
WarpLaunch svd_warp_config(int64_t p, int64_t q, size_t elem);

// Whole matrices: mats[t] is a matrix index. Same outputs as launch_svd_whole.
template <typename T>
void launch_svd_warp(const EngineArgs<T>& args, const int32_t* mats, int nmats, const WarpLaunch& cfg, bool with_v,
                     cudaStream_t stream);

}  // namespace cuda
}  // namespace jsvd
