// The last launch of every CUDA call: a result is finite or flagged.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/engine_types.h"

namespace jsvd {
namespace cuda {

// For each of the n matrices (descriptors as EngineArgs: desc, or uni for a
// uniform batch): if info >= 0 but S, U or V (each may be nullptr: not read)
// holds NaN or Inf, info <- -3 (kInfoNonFiniteResult, csrc/core.h). A warp per matrix.
template <typename T>
void launch_flag_non_finite(const T* S, const T* U, const T* V, int32_t* info, const MatrixDesc* desc,
                            const MatrixDesc& uni, int n, cudaStream_t stream);

}  // namespace cuda
}  // namespace jsvd
