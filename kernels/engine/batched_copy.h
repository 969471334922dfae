// A list of strided 2-D copies in one launch (svd_varlen's packing and unpacking).
#pragma once

#include "svd_wrapper.h"

namespace jsvd {

// All copies on `device`, on its current stream; src and dst are float32,
// float64, float16 or bfloat16.
void batched_copy_cuda(const std::vector<MatrixCopy>& copies, at::ScalarType src, at::ScalarType dst,
                       const at::Device& device);

}  // namespace jsvd
