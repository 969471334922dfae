// svd_varlen moves every matrix into the packed batch and every factor back
// out; with a copy_ per matrix that is a launch per matrix (thousands for an
// H-matrix level). Here: one upload of the copy list and one launch, a block
// row per matrix.
#include "engine/batched_copy.h"

#include "engine/device_upload.h"

#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>

namespace jsvd {
namespace {

constexpr int kThreads = 256;

// blockIdx.x: the copy; blockIdx.y: a slice of its elements. The index runs
// fastest along dst's unit-stride dimension, so the writes coalesce.
template <typename S, typename D>
__global__ void batched_copy_kernel(const MatrixCopy* copies) {
  const MatrixCopy c = copies[blockIdx.x];
  const int64_t n = c.rows * c.cols;
  const bool cols_fast = c.dst_cs <= c.dst_rs;
  const S* src = static_cast<const S*>(c.src);
  D* dst = static_cast<D*>(c.dst);
  for (int64_t i = static_cast<int64_t>(blockIdx.y) * kThreads + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.y) * kThreads) {
    int64_t r, col;
    if (cols_fast) {
      r = i / c.cols;
      col = i - r * c.cols;
    } else {
      col = i / c.rows;
      r = i - col * c.rows;
    }
    dst[r * c.dst_rs + col * c.dst_cs] = static_cast<D>(src[r * c.src_rs + col * c.src_cs]);
  }
}

}  // namespace

void batched_copy_cuda(const std::vector<MatrixCopy>& copies, at::ScalarType src, at::ScalarType dst,
                       const at::Device& device) {
  if (copies.empty()) return;
  TORCH_CHECK(copies.size() <= static_cast<size_t>(INT32_MAX), "jsvd internal: too many copies");
  const c10::cuda::CUDAGuard guard(device);
  const at::Tensor list = cuda::upload_bytes(copies.data(), copies.size() * sizeof(MatrixCopy), device);
  int64_t most = 1;
  for (const auto& c : copies) most = std::max(most, c.rows * c.cols);
  // enough slices that a large matrix is not copied by one block alone
  const dim3 grid(static_cast<unsigned>(copies.size()),
                  static_cast<unsigned>(std::min<int64_t>((most + 4 * kThreads - 1) / (4 * kThreads), 1024)));
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const auto* list_ptr = reinterpret_cast<const MatrixCopy*>(list.const_data_ptr<uint8_t>());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, src, "batched_copy_src", [&] {
    using S = scalar_t;
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dst, "batched_copy_dst", [&] {
      batched_copy_kernel<S, scalar_t><<<grid, kThreads, 0, stream>>>(list_ptr);
    });
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace jsvd
