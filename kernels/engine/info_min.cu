#include "engine/info_min.h"

#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/EmptyTensor.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <climits>

namespace jsvd {
namespace cuda {
namespace {

constexpr int kThreads = 512;
constexpr int kMaxBlocks = 64;
constexpr int kPerThread = 16;  // entries a thread reads before more blocks are launched

// out[b] = the least of the entries that block b reads (a grid-stride loop).
__global__ void __launch_bounds__(kThreads) info_min_kernel(const int32_t* __restrict__ info, int64_t n,
                                                            int32_t* __restrict__ out) {
  int32_t v = INT_MAX;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * kThreads)
    v = min(v, info[i]);
  for (int o = 16; o > 0; o >>= 1) v = min(v, __shfl_xor_sync(0xffffffffu, v, o));
  __shared__ int32_t warp_min[kThreads / 32];
  if ((threadIdx.x & 31) == 0) warp_min[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    v = threadIdx.x < kThreads / 32 ? warp_min[threadIdx.x] : INT_MAX;
    for (int o = 16; o > 0; o >>= 1) v = min(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (threadIdx.x == 0) out[blockIdx.x] = v;
  }
}

}  // namespace

int32_t info_min_cuda(const at::Tensor& info_in) {
  const at::Tensor info = info_in.contiguous();
  TORCH_CHECK(info.is_cuda() && info.scalar_type() == at::kInt && info.numel() > 0,
              "jsvd internal: info_min_cuda expects a non-empty CUDA int32 tensor");
  const c10::cuda::CUDAGuard guard(info.device());
  const int64_t n = info.numel();
  const int blocks = static_cast<int>(std::min<int64_t>(kMaxBlocks, (n + kThreads * kPerThread - 1) / (kThreads * kPerThread)));
  const at::Tensor dev = at::detail::empty_cuda({blocks}, at::kInt, info.device(), std::nullopt);
  // (freed only after the synchronisation below, so the host allocator needs no event)
  const at::Tensor host = at::empty({blocks}, at::TensorOptions().dtype(at::kInt).pinned_memory(true));
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  info_min_kernel<<<blocks, kThreads, 0, stream>>>(info.const_data_ptr<int32_t>(), n, dev.mutable_data_ptr<int32_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  C10_CUDA_CHECK(cudaMemcpyAsync(host.mutable_data_ptr<int32_t>(), dev.const_data_ptr<int32_t>(),
                                 blocks * sizeof(int32_t), cudaMemcpyDeviceToHost, stream));
  c10::cuda::stream_synchronize(stream);
  const int32_t* v = host.const_data_ptr<int32_t>();
  return *std::min_element(v, v + blocks);
}

}  // namespace cuda
}  // namespace jsvd
