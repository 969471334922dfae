// A list of strided 2-D copies in one pass on the CPU (svd_varlen's packing and unpacking).
#pragma once

#include "../svd_wrapper.h"

namespace jsvd {

// src and dst are float32, float64, float16 or bfloat16 (svd_wrapper.h: BatchedCopyFn).
void batched_copy_cpu(const std::vector<MatrixCopy>& copies, at::ScalarType src, at::ScalarType dst,
                      const at::Device& device);

}  // namespace jsvd
