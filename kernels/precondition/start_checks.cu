// The start's float64 operand and its checks (start_checks.h).
#include "precondition/start_checks.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <cstdint>

namespace jsvd {
namespace cuda {
namespace {

__device__ unsigned long long umax(unsigned long long a, unsigned long long b) { return a > b ? a : b; }

constexpr int kThreads = 256;
constexpr int64_t kChunk = kThreads * 16;  // entries of one matrix a block of the max pass reads

struct View3 {  // a (B, q, p) view's sizes and strides, in elements
  int64_t q, p, sb, sq, sp;
};

template <typename T>
__device__ T at3(const T* w, const View3& v, int64_t b, int64_t i) {  // entry i (row-major) of matrix b
  const int64_t j = i / v.p;
  return w[b * v.sb + j * v.sq + (i - j * v.p) * v.sp];
}

// max |w| of each matrix, as the bits of a non-negative double: their unsigned order is the order
// of the values, with Inf above every finite value and NaN above Inf, so atomicMax keeps both.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    max_abs_kernel(const T* w, View3 v, int64_t chunks, unsigned long long* amax) {
  const int64_t b = blockIdx.x / chunks, c = blockIdx.x - b * chunks;
  const int64_t len = v.q * v.p, end = (c + 1) * kChunk < len ? (c + 1) * kChunk : len;
  unsigned long long m = 0;
  for (int64_t i = c * kChunk + threadIdx.x; i < end; i += kThreads)
    m = umax(m, static_cast<unsigned long long>(__double_as_longlong(fabs(static_cast<double>(at3(w, v, b, i))))));
  for (int o = 16; o > 0; o >>= 1) m = umax(m, __shfl_xor_sync(0xffffffffu, m, o));
  __shared__ unsigned long long part[kThreads / 32];
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int k = 1; k < kThreads / 32; ++k) m = umax(m, part[k]);
    atomicMax(amax + b, m);
  }
}

// Ws = W in float64, scaled by 2^-e with e = ilogb(max |w|) where `scale` (ldexp: exact, and no
// intermediate overflow for a subnormal max); the first entry's thread flags the matrix's max.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    scaled_copy_kernel(const T* w, View3 v, int64_t total, const unsigned long long* amax, bool scale,
                       double limit, double* ws, int32_t* bad) {
  const int64_t len = v.q * v.p;
  for (int64_t o = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; o < total;
       o += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t b = o / len, i = o - b * len;
    const double top = __longlong_as_double(static_cast<long long>(amax[b]));
    if (i == 0 && !(top <= limit)) *bad = 1;  // (NaN compares false)
    const double x = static_cast<double>(at3(w, v, b, i));
    ws[o] = scale && top > 0 && top <= limit ? ldexp(x, -ilogb(top)) : x;
  }
}

// A warp a matrix: the least and largest diagonal entry of its Gram matrix.
__global__ void __launch_bounds__(kThreads)
    column_ratio_kernel(const double* g, int64_t B, int64_t q, double min_ratio_sq, int32_t* bad) {
  const int64_t b = blockIdx.x * static_cast<int64_t>(kThreads / 32) + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (b >= B) return;
  double lo = INFINITY, hi = 0;
  for (int64_t j = lane; j < q; j += 32) {
    const double d = g[(b * q + j) * q + j];
    lo = fmin(lo, d);
    hi = fmax(hi, d);
  }
  for (int o = 16; o > 0; o >>= 1) {
    lo = fmin(lo, __shfl_xor_sync(0xffffffffu, lo, o));
    hi = fmax(hi, __shfl_xor_sync(0xffffffffu, hi, o));
  }
  if (lane == 0 && hi > 0 && lo < min_ratio_sq * hi) *bad = 1;
}

template <typename T>
void launch_operand(const at::Tensor& W, const at::Tensor& Ws, bool scale, double limit, const at::Tensor& bad) {
  const int64_t B = W.size(0);
  const View3 v{W.size(1), W.size(2), W.stride(0), W.stride(1), W.stride(2)};
  const int64_t len = v.q * v.p, chunks = (len + kChunk - 1) / kChunk, total = B * len;
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const at::Tensor amax = at::empty({B}, W.options().dtype(at::kLong));
  C10_CUDA_CHECK(cudaMemsetAsync(amax.data_ptr(), 0, B * sizeof(int64_t), stream));
  auto* am = reinterpret_cast<unsigned long long*>(amax.data_ptr<int64_t>());
  max_abs_kernel<T><<<B * chunks, kThreads, 0, stream>>>(W.const_data_ptr<T>(), v, chunks, am);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  const int64_t blocks = std::min<int64_t>((total + kThreads - 1) / kThreads, 65536);
  scaled_copy_kernel<T><<<blocks, kThreads, 0, stream>>>(W.const_data_ptr<T>(), v, total, am, scale, limit,
                                                         Ws.mutable_data_ptr<double>(), bad.mutable_data_ptr<int32_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

void start_operand(const at::Tensor& W, const at::Tensor& Ws, bool scale, double limit, const at::Tensor& bad) {
  TORCH_CHECK(W.dim() == 3 && Ws.is_contiguous() && Ws.scalar_type() == at::kDouble && Ws.sizes() == W.sizes() &&
                  bad.scalar_type() == at::kInt,
              "jsvd internal: start_operand's arguments");
  if (W.numel() == 0) return;
  if (W.scalar_type() == at::kDouble)
    launch_operand<double>(W, Ws, scale, limit, bad);
  else
    launch_operand<float>(W, Ws, scale, limit, bad);
}

void start_column_ratio(const at::Tensor& G, double min_ratio, const at::Tensor& bad) {
  TORCH_CHECK(G.dim() == 3 && G.is_contiguous() && G.scalar_type() == at::kDouble && G.size(1) == G.size(2),
              "jsvd internal: start_column_ratio's arguments");
  const int64_t B = G.size(0), q = G.size(1);
  if (B == 0 || q == 0) return;
  const int64_t warps = kThreads / 32;
  column_ratio_kernel<<<(B + warps - 1) / warps, kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
      G.const_data_ptr<double>(), B, q, min_ratio * min_ratio, bad.mutable_data_ptr<int32_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace cuda
}  // namespace jsvd
