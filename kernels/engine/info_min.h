// The least info of a call, read on the host (check_info, csrc/svd_wrapper.cpp): one launch whose blocks
// (at most 64) store their minima in host-mapped pinned memory, instead of a pageable copy of the whole
// info or, beyond 65536 matrices, info.min().item() (a reduction kernel and a copy): 100000 x 3 x 3 svd
// 0.080 -> 0.067 ms with a pinned copy (H200, docs/experiments.md, stop 41); the mapped slots save that
// copy and two allocations (stop 75).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace jsvd {
namespace cuda {

// min(info) of a CUDA int32 tensor with numel() > 0; synchronises the current stream.
int32_t info_min_cuda(const at::Tensor& info);

}  // namespace cuda
}  // namespace jsvd
