// Tiled batched transpose: a 32 x 32 tile through shared memory, so that both
// the reads and the writes are whole rows (coalesced), where ATen's copy_ of
// a transposed view reads one element a row.
#include "qr/batched_transpose.h"

#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>

namespace jsvd {
namespace cuda {
namespace {

constexpr int kTile = 32, kRowsPerPass = 8;

// grid (tiles along i, tiles along j, B), block (32, 8): tile (ti, tj) of
// src's block becomes tile (tj, ti) of dst.
template <typename T>
__global__ void __launch_bounds__(kTile* kRowsPerPass)
    transpose_kernel(const T* __restrict__ src, int64_t s_bs, int64_t s_ld, T* __restrict__ dst, int q) {
  __shared__ T tile[kTile][kTile + 1];  // (+1: no bank conflicts on the transposed read)
  const int64_t k = blockIdx.z;
  const int i0 = blockIdx.x * kTile, j0 = blockIdx.y * kTile;
  const T* s = src + k * s_bs;
  T* d = dst + k * static_cast<int64_t>(q) * q;
  for (int r = threadIdx.y; r < kTile; r += kRowsPerPass) {
    const int i = i0 + r, j = j0 + threadIdx.x;
    if (i < q && j < q) tile[r][threadIdx.x] = s[static_cast<int64_t>(i) * s_ld + j];
  }
  __syncthreads();
  for (int r = threadIdx.y; r < kTile; r += kRowsPerPass) {
    const int j = j0 + r, i = i0 + threadIdx.x;
    if (i < q && j < q) d[static_cast<int64_t>(j) * q + i] = tile[threadIdx.x][r];
  }
}

}  // namespace

at::Tensor leading_block_transpose(const at::Tensor& src, int64_t q) {
  TORCH_CHECK(src.dim() == 3 && src.stride(2) == 1 && src.size(1) >= q && src.size(2) >= q && q <= INT32_MAX,
              "jsvd internal: leading_block_transpose expects (B, r, c) rows of unit stride, r, c >= q");
  const int64_t B = src.size(0);
  at::Tensor dst = at::empty({B, q, q}, src.options());
  if (B == 0 || q == 0) return dst;
  const int64_t tiles = (q + kTile - 1) / kTile;
  const dim3 block(kTile, kRowsPerPass);
  for (int64_t b0 = 0; b0 < B; b0 += 65535) {  // (gridDim.z's limit)
    const dim3 grid(tiles, tiles, static_cast<unsigned>(std::min<int64_t>(B - b0, 65535)));
    AT_DISPATCH_FLOATING_TYPES(src.scalar_type(), "leading_block_transpose", [&] {
      transpose_kernel<scalar_t><<<grid, block, 0, at::cuda::getCurrentCUDAStream()>>>(
          src.const_data_ptr<scalar_t>() + b0 * src.stride(0), src.stride(0), src.stride(1),
          dst.mutable_data_ptr<scalar_t>() + b0 * q * q, static_cast<int>(q));
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  return dst;
}

}  // namespace cuda
}  // namespace jsvd
