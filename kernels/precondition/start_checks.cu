// The start's checks on the Gram matrices' diagonals (start_checks.h).
#include "precondition/start_checks.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <cstdint>

namespace jsvd {
namespace cuda {
namespace {

constexpr int kWarps = 8;

// A warp a matrix: the least and largest diagonal entry, and whether one is NaN. `each`: bad[b], not *bad.
__global__ void __launch_bounds__(kWarps * 32)
    start_checks_kernel(const double* g, int64_t B, int64_t q, StartLimits limits, int32_t* bad, bool each) {
  const int64_t b = blockIdx.x * static_cast<int64_t>(kWarps) + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (b >= B) return;
  double lo = INFINITY, hi = 0;
  bool nan = false;
  for (int64_t j = lane; j < q; j += 32) {
    const double d = g[(b * q + j) * q + j];
    nan |= isnan(d);
    lo = fmin(lo, d);
    hi = fmax(hi, d);
  }
  for (int o = 16; o > 0; o >>= 1) {
    lo = fmin(lo, __shfl_xor_sync(0xffffffffu, lo, o));
    hi = fmax(hi, __shfl_xor_sync(0xffffffffu, hi, o));
  }
  nan = __any_sync(0xffffffffu, nan);
  if (lane == 0 && !limits.passes(lo, hi, nan, q)) bad[each ? b : 0] = 1;
}

// A warp a matrix: its Cholesky factorisation's info, and how many pivots fall below `ratio` times its
// largest diagonal entry.
__global__ void __launch_bounds__(kWarps * 32)
    cholesky_checks_kernel(const double* g, const double* l, const int32_t* info, int64_t B, int64_t q,
                           double ratio, int64_t max_small, int32_t* bad) {
  const int64_t b = blockIdx.x * static_cast<int64_t>(kWarps) + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (b >= B) return;
  double hi = 0;
  for (int64_t j = lane; j < q; j += 32) hi = fmax(hi, g[(b * q + j) * q + j]);
  for (int o = 16; o > 0; o >>= 1) hi = fmax(hi, __shfl_xor_sync(0xffffffffu, hi, o));
  int64_t small = 0;
  for (int64_t j = lane; j < q; j += 32) {
    const double ljj = l[(b * q + j) * q + j];
    small += ljj * ljj < ratio * hi;
  }
  for (int o = 16; o > 0; o >>= 1) small += __shfl_xor_sync(0xffffffffu, small, o);
  if (lane == 0 && hi > 0 && (info[b] != 0 || small > max_small)) *bad = 1;
}

}  // namespace

void cholesky_checks(const at::Tensor& G, const at::Tensor& L, const at::Tensor& info, double ratio,
                     const at::Tensor& bad, int64_t max_small) {
  TORCH_CHECK(G.dim() == 3 && G.is_contiguous() && L.is_contiguous() && G.sizes() == L.sizes() &&
                  G.scalar_type() == at::kDouble && L.scalar_type() == at::kDouble && info.scalar_type() == at::kInt &&
                  info.numel() == G.size(0) && bad.scalar_type() == at::kInt,
              "jsvd internal: cholesky_checks' arguments");
  const int64_t B = G.size(0), q = G.size(1);
  if (B == 0 || q == 0) return;
  cholesky_checks_kernel<<<(B + kWarps - 1) / kWarps, kWarps * 32, 0, at::cuda::getCurrentCUDAStream()>>>(
      G.const_data_ptr<double>(), L.const_data_ptr<double>(), info.const_data_ptr<int32_t>(), B, q, ratio,
      max_small, bad.mutable_data_ptr<int32_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void start_checks(const at::Tensor& G, const StartLimits& limits, const at::Tensor& bad) {
  TORCH_CHECK(G.dim() == 3 && G.is_contiguous() && G.scalar_type() == at::kDouble && G.size(1) == G.size(2) &&
                  bad.scalar_type() == at::kInt && (bad.numel() == 1 || bad.numel() == G.size(0)),
              "jsvd internal: start_checks' arguments");
  const int64_t B = G.size(0), q = G.size(1);
  if (B == 0 || q == 0) return;
  start_checks_kernel<<<(B + kWarps - 1) / kWarps, kWarps * 32, 0, at::cuda::getCurrentCUDAStream()>>>(
      G.const_data_ptr<double>(), B, q, limits, bad.mutable_data_ptr<int32_t>(), bad.numel() == B && B > 1);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace cuda
}  // namespace jsvd
