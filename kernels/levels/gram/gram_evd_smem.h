// Launcher of the Gram-matrix EVD rotation of block-column pairs (gram_evd_smem.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "engine/engine_types.h"

namespace jsvd {
namespace cuda {

constexpr int kGramMaxCols = 64;  // widest pair (2w) the kernel takes

// Shared memory of a pair of c columns (the Gram matrix and J are float64 for
// float32 pairs too, gram_evd_smem.cu).
size_t gram_evd_smem_bytes(int64_t c);

// Rotates each task's pair in A (and the V workspace when args.U) by the
// eigenvectors of its Gram matrix; sets state[k].rotated unless the pair was
// already orthogonal. args.max_sweeps caps the EVD's sweeps.
template <typename T>
void launch_gram_evd(const EngineArgs<T>& args, const PairTask* tasks, int ntasks, int64_t max_c, cudaStream_t stream);

}  // namespace cuda
}  // namespace jsvd
