// The least info of a call, read on the host (check_info, csrc/svd_wrapper.cpp): one launch and a
// pinned read of at most 64 ints, where a copy of the whole info (pageable) or info.min().item()
// (a reduction kernel and a copy) took 15-30 us of a small call (docs/experiments.md, stop 41).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace jsvd {
namespace cuda {

// min(info) of a CUDA int32 tensor with numel() > 0; synchronises the current stream.
int32_t info_min_cuda(const at::Tensor& info);

}  // namespace cuda
}  // namespace jsvd
