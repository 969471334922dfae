// The batched start's G = M^T M and X = M V0 for float32 M of at most 16 columns (gram_products.h).
#include "precondition/gram_products.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <cstdint>

namespace jsvd {
namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr int Q = kGramProductsMaxCols;  // G's side, M's columns zero-padded to it
constexpr int kTileRows = 256;           // rows of M staged a tile: 32 KB of float64
constexpr int kGroups = kThreads / ((Q / 4) * (Q / 4));  // thread groups a block, each over every kGroups-th row

struct Strided {  // W (B, q, p): entry (b, j, r) at b * sb + j * sq + r * sp
  int64_t sb, sq, sp;
};

// Block (b, s) sums rows [s chunk, (s + 1) chunk) of matrix b into G (one block a matrix) or into its
// slot of `part`. A thread owns a 4 x 4 tile of G (four FMAs a shared load: a thread an entry was bound
// by its two shared loads a FMA), in one of kGroups groups that take every kGroups-th staged row; the
// groups' sums are then added in a fixed order, in the same shared memory.
__global__ void __launch_bounds__(kThreads, 2)
    gram_kernel(const float* __restrict__ w, Strided st, int64_t q, int64_t p, int64_t chunk, double* __restrict__ out) {
  __shared__ __align__(16) double buf[kTileRows * Q];
  static_assert(kGroups * Q * Q <= kTileRows * Q, "the groups' sums fit the buffer");
  double(*tile)[Q] = reinterpret_cast<double(*)[Q]>(buf);
  const int64_t b = blockIdx.x, s = blockIdx.y;
  const int g = threadIdx.x / 16, ti = (threadIdx.x % 16) / 4, tj = threadIdx.x % 4;
  const float* wb = w + b * st.sb;
  const int64_t r_begin = s * chunk, r_end = std::min(p, r_begin + chunk);
  const bool by_rows = st.sp == 1;  // (walk M's unit-stride dimension across threads)
  double acc[4][4] = {};
  for (int64_t r0 = r_begin; r0 < r_end; r0 += kTileRows) {
#pragma unroll  // (every load of the tile in flight together)
    for (int it = 0; it < kTileRows * Q / kThreads; ++it) {
      const int idx = it * kThreads + threadIdx.x;
      const int r = by_rows ? idx % kTileRows : idx / Q, c = by_rows ? idx / kTileRows : idx % Q;
      const int64_t row = r0 + r;
      tile[r][c] = (row < r_end && c < q) ? static_cast<double>(wb[c * st.sq + row * st.sp]) : 0.0;
    }
    __syncthreads();
#pragma unroll 2
    for (int r = g; r < kTileRows; r += kGroups) {
      const double2* xr = reinterpret_cast<const double2*>(&tile[r][4 * ti]);
      const double2* yr = reinterpret_cast<const double2*>(&tile[r][4 * tj]);
      const double2 x01 = xr[0], x23 = xr[1], y01 = yr[0], y23 = yr[1];
      const double x[4] = {x01.x, x01.y, x23.x, x23.y}, y[4] = {y01.x, y01.y, y23.x, y23.y};
#pragma unroll
      for (int u = 0; u < 4; ++u)
#pragma unroll
        for (int v = 0; v < 4; ++v) acc[u][v] = fma(x[u], y[v], acc[u][v]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int u = 0; u < 4; ++u)
#pragma unroll
    for (int v = 0; v < 4; ++v) buf[(g * Q + 4 * ti + u) * Q + 4 * tj + v] = acc[u][v];
  __syncthreads();
  double* ob = out + (b * gridDim.y + s) * q * q;
  for (int e = threadIdx.x; e < Q * Q; e += kThreads) {
    double sum = 0;
#pragma unroll
    for (int k = 0; k < kGroups; ++k) sum += buf[k * Q * Q + e];
    const int i = e / Q, j = e % Q;
    if (i < q && j < q) ob[i * q + j] = sum;
  }
}

// G(b) = sum over s of part(b, s), in s's order.
__global__ void __launch_bounds__(kThreads)
    gram_sum_kernel(const double* __restrict__ part, int64_t B, int64_t S, int64_t qq, double* __restrict__ g) {
  const int64_t e = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;
  if (e >= B * qq) return;
  const int64_t b = e / qq, k = e % qq;
  const double* pb = part + b * S * qq + k;
  double sum = 0;
  for (int64_t s = 0; s < S; ++s) sum += pb[s * qq];
  g[e] = sum;
}

// X^T(b, j, r) = sum_k V0(b, k, j) W(b, k, r): a thread a row r of M, its q entries loaded together and
// X's q columns summed in registers; V0 staged in shared memory, where a warp's reads are broadcasts.
__global__ void __launch_bounds__(kThreads) start_product_kernel(const float* __restrict__ w, Strided st,
                                                                 const double* __restrict__ v0, Strided sv,
                                                                 int64_t q, int64_t p, float* __restrict__ x) {
  __shared__ __align__(16) double vs[Q][Q];
  const int64_t b = blockIdx.x;
  {
    static_assert(kThreads == Q * Q, "a thread an entry of V0");
    const int k = threadIdx.x / Q, j = threadIdx.x % Q;
    vs[k][j] = (k < q && j < q) ? v0[b * sv.sb + k * sv.sq + j * sv.sp] : 0.0;
  }
  __syncthreads();
  const float* wb = w + b * st.sb;
  float* xb = x + b * q * p;
  for (int64_t r = blockIdx.y * static_cast<int64_t>(kThreads) + threadIdx.x; r < p;
       r += static_cast<int64_t>(gridDim.y) * kThreads) {
    // (V0's reads stay in this loop: hoisted out of it, its 256 entries spilled from registers)
    asm volatile("" ::: "memory");
    float a[Q];
#pragma unroll
    for (int k = 0; k < Q; ++k) a[k] = k < q ? wb[k * st.sq + r * st.sp] : 0.f;
    double acc[Q] = {};
#pragma unroll
    for (int k = 0; k < Q; ++k) {
      const double2* vk = reinterpret_cast<const double2*>(vs[k]);  // (16-byte shared loads)
#pragma unroll
      for (int u = 0; u < Q / 2; ++u) {
        const double2 t = vk[u];
        acc[2 * u] = fma(static_cast<double>(a[k]), t.x, acc[2 * u]);
        acc[2 * u + 1] = fma(static_cast<double>(a[k]), t.y, acc[2 * u + 1]);
      }
    }
#pragma unroll
    for (int j = 0; j < Q; ++j)
      if (j < q) xb[j * p + r] = static_cast<float>(acc[j]);
  }
}

Strided strides_of(const at::Tensor& t) { return {t.stride(0), t.stride(1), t.stride(2)}; }

// Enough blocks to fill the device a few times over.
int64_t target_blocks() { return 4 * static_cast<int64_t>(at::cuda::getCurrentDeviceProperties()->multiProcessorCount); }

}  // namespace

bool gram_products_take(const at::Tensor& W) {
  return W.scalar_type() == at::kFloat && W.dim() == 3 && W.size(1) <= kGramProductsMaxCols;
}

void gram_f64(const at::Tensor& W, const at::Tensor& G) {
  TORCH_CHECK(W.is_cuda() && gram_products_take(W) && G.scalar_type() == at::kDouble && G.is_contiguous() &&
                  G.dim() == 3 && G.size(0) == W.size(0) && G.size(1) == W.size(1) && G.size(2) == W.size(1),
              "jsvd internal: gram_f64's arguments");
  const int64_t B = W.size(0), q = W.size(1), p = W.size(2);
  if (B == 0 || q == 0) return;
  if (p == 0) {
    G.zero_();
    return;
  }
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  // Split a matrix's rows over S blocks (at least four tiles each) where the batch alone is too small to
  // fill the device; the partial sums are then added in a second, fixed-order pass.
  const int64_t tiles = (p + kTileRows - 1) / kTileRows;
  const int64_t S = std::max<int64_t>(1, std::min((target_blocks() + B - 1) / B, tiles / 4));
  const int64_t chunk = ((tiles + S - 1) / S) * kTileRows;
  const at::Tensor part = S > 1 ? at::empty({B, S, q, q}, G.options()) : G;
  gram_kernel<<<dim3(static_cast<unsigned>(B), static_cast<unsigned>(S)), kThreads, 0, stream>>>(
      W.const_data_ptr<float>(), strides_of(W), q, p, chunk, part.mutable_data_ptr<double>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  if (S > 1) {
    const int64_t n = B * q * q;
    gram_sum_kernel<<<(n + kThreads - 1) / kThreads, kThreads, 0, stream>>>(part.const_data_ptr<double>(), B, S, q * q,
                                                                            G.mutable_data_ptr<double>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
}

at::Tensor start_product(const at::Tensor& W, const at::Tensor& V0) {
  TORCH_CHECK(W.is_cuda() && gram_products_take(W) && V0.scalar_type() == at::kDouble && V0.dim() == 3 &&
                  V0.size(0) == W.size(0) && V0.size(1) == W.size(1) && V0.size(2) == W.size(1),
              "jsvd internal: start_product's arguments");
  const int64_t B = W.size(0), q = W.size(1), p = W.size(2);
  at::Tensor X = at::empty({B, q, p}, W.options().memory_format(at::MemoryFormat::Contiguous));
  if (X.numel() == 0) return X;
  const int64_t per_matrix = std::max<int64_t>(1, std::min((p + kThreads - 1) / kThreads, (2 * target_blocks() + B - 1) / B));
  start_product_kernel<<<dim3(static_cast<unsigned>(B), static_cast<unsigned>(per_matrix)), kThreads, 0,
                         at::cuda::getCurrentCUDAStream()>>>(W.const_data_ptr<float>(), strides_of(W),
                                                             V0.const_data_ptr<double>(), strides_of(V0), q, p,
                                                             X.mutable_data_ptr<float>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return X;
}

}  // namespace cuda
}  // namespace jsvd
