#include "engine/info_min.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <climits>
#include <map>
#include <mutex>
#include <vector>

namespace jsvd {
namespace cuda {
namespace {

constexpr int kThreads = 512;
constexpr int kMaxBlocks = 64;
constexpr int kPerThread = 16;  // entries a thread reads before more blocks are launched

// out[b] = the least of the entries that block b reads (a grid-stride loop); out is host-mapped memory.
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

// Host-mapped pinned slots of kMaxBlocks ints, one per call in flight (a pool per device, never freed:
// CUDA may be gone at exit). The kernel stores its blocks' minima straight into host memory, so the read
// needs no device buffer, no pinned tensor and no copy: two allocations and a cudaMemcpyAsync less host
// time, and the copy engine's latency less wait.
class MappedSlots {
 public:
  int32_t* take(int device) {
    {
      const std::lock_guard<std::mutex> lock(mu_);
      auto& free = free_[device];
      if (!free.empty()) {
        int32_t* p = free.back();
        free.pop_back();
        return p;
      }
    }
    void* p = nullptr;
    C10_CUDA_CHECK(cudaHostAlloc(&p, kMaxBlocks * sizeof(int32_t), cudaHostAllocMapped | cudaHostAllocPortable));
    return static_cast<int32_t*>(p);
  }
  // (a slot whose kernel may still be pending, after an error, is not given back)
  void give_back(int device, int32_t* p) {
    const std::lock_guard<std::mutex> lock(mu_);
    free_[device].push_back(p);
  }

 private:
  std::mutex mu_;
  std::map<int, std::vector<int32_t*>> free_;
};

MappedSlots& mapped_slots() {
  static auto* slots = new MappedSlots();
  return *slots;
}

}  // namespace

int32_t info_min_cuda(const at::Tensor& info_in) {
  const at::Tensor info = info_in.contiguous();
  TORCH_CHECK(info.is_cuda() && info.scalar_type() == at::kInt && info.numel() > 0,
              "jsvd internal: info_min_cuda expects a non-empty CUDA int32 tensor");
  const c10::cuda::CUDAGuard guard(info.device());
  const int64_t n = info.numel();
  const int blocks = static_cast<int>(std::min<int64_t>(kMaxBlocks, (n + kThreads * kPerThread - 1) / (kThreads * kPerThread)));
  const int device = info.get_device();
  int32_t* host = mapped_slots().take(device);
  int32_t* dev = nullptr;
  C10_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dev), host, 0));
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  info_min_kernel<<<blocks, kThreads, 0, stream>>>(info.const_data_ptr<int32_t>(), n, dev);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  c10::cuda::stream_synchronize(stream);
  const int32_t worst = *std::min_element(host, host + blocks);
  mapped_slots().give_back(device, host);
  return worst;
}

}  // namespace cuda
}  // namespace jsvd
