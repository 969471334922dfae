// Host data to the device in one asynchronous copy on the current stream.
#pragma once

#include <ATen/ATen.h>

#include <cstddef>
#include <cstring>

namespace jsvd {
namespace cuda {

// Through pinned memory from PyTorch's caching host allocator, which keeps the
// pinned block from being reused until the copy has run.
inline at::Tensor upload_bytes(const void* data, size_t bytes, const at::Device& device) {
  auto host = at::empty({static_cast<int64_t>(bytes)}, at::TensorOptions().dtype(at::kByte).pinned_memory(true));
  std::memcpy(host.data_ptr(), data, bytes);
  return host.to(device, /*non_blocking=*/true);
}

}  // namespace cuda
}  // namespace jsvd
