// The float32-solved start's element-wise steps, a block a matrix (start_refine.h).
#include "precondition/start_refine.h"

#include "common/jacobi_device.cuh"  // block_sum

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <cstdint>

namespace jsvd {
namespace cuda {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) trace_scaled_float_kernel(const double* G, float* out, int64_t q) {
  __shared__ double red[32];
  const int64_t n = q * q;
  const double* g = G + blockIdx.x * n;
  double t = 0;
  for (int64_t j = threadIdx.x; j < q; j += kThreads) t += g[j * q + j];
  t = block_sum(t, red);
  // (a G not finite, which start_checks declines, becomes a zero matrix: the eigen-solver may run before that
  // flag is read, eigh_precondition.cpp's one read, and never sees a NaN)
  const bool finite = isfinite(t);
  const double scale = finite && t > 0 ? 1.0 / t : 1.0;
  float* o = out + blockIdx.x * n;
  for (int64_t k = threadIdx.x; k < n; k += kThreads) o[k] = finite ? static_cast<float>(g[k] * scale) : 0.0f;
}

// Two passes over S (the second from L2): the rotations' norm, then I + E scaled (start_refine.h).
__global__ void __launch_bounds__(kThreads) refine_rotation_kernel(const double* S, double* IE, int q,
                                                                   double max_angle, double max_norm) {
  extern __shared__ double d[];  // the eigenvalues' estimates (q)
  __shared__ double red[32];
  const int n = q * q;
  const int64_t off = blockIdx.x * static_cast<int64_t>(n);
  const double* s = S + off;
  for (int j = threadIdx.x; j < q; j += kThreads) d[j] = s[j * q + j];
  __syncthreads();
  // (equal estimates and the diagonal: an infinite or NaN ratio, which the test drops)
  const auto angle = [&](int k) {
    const int i = k / q, j = k - i * q;
    const double e = s[k] / (d[j] - d[i]);
    return fabs(e) <= max_angle ? e : 0.0;
  };
  double sq = 0;
  for (int k = threadIdx.x; k < n; k += kThreads) {
    const double e = angle(k);
    sq += e * e;
  }
  const double scale = fmin(1.0, max_norm / sqrt(block_sum(sq, red)));  // (a zero E: inf, so 1)
  double* out = IE + off;
  for (int k = threadIdx.x; k < n; k += kThreads) {
    const double eye = k % (q + 1) == 0 ? 1.0 : 0.0;
    out[k] = eye + angle(k) * scale;
  }
}

__global__ void __launch_bounds__(kThreads) orth_defect_kernel(const double* F, int q, double limit, bool* flag) {
  __shared__ double red[32];
  const int n = q * q;
  const double* f = F + blockIdx.x * static_cast<int64_t>(n);
  double sq = 0;
  for (int k = threadIdx.x; k < n; k += kThreads) {
    const double e = f[k] - (k % (q + 1) == 0 ? 1.0 : 0.0);
    sq += e * e;
  }
  sq = block_sum(sq, red);
  if (threadIdx.x == 0 && !(sqrt(sq) <= limit)) *flag = true;
}

// (q up to 46340: the kernels index a matrix in int)
void check_square(const at::Tensor& X, const char* what) {
  TORCH_CHECK(X.dim() == 3 && X.is_cuda() && X.is_contiguous() && X.scalar_type() == at::kDouble &&
                  X.size(1) == X.size(2) && X.size(1) <= 46340,
              "jsvd internal: ", what, " takes (B, q, q) contiguous float64");
}

}  // namespace

at::Tensor trace_scaled_float(const at::Tensor& G) {
  check_square(G, "trace_scaled_float");
  const at::Tensor out = at::empty(G.sizes(), G.options().dtype(at::kFloat));
  if (G.numel() == 0) return out;
  trace_scaled_float_kernel<<<G.size(0), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
      G.const_data_ptr<double>(), out.mutable_data_ptr<float>(), G.size(1));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

void refine_rotation(const at::Tensor& S, const at::Tensor& IE, double max_angle, double max_norm) {
  check_square(S, "refine_rotation");
  check_square(IE, "refine_rotation");
  TORCH_CHECK(IE.sizes() == S.sizes() && S.size(1) <= 4096, "jsvd internal: refine_rotation's shapes");
  if (S.numel() == 0) return;
  const int q = static_cast<int>(S.size(1));
  refine_rotation_kernel<<<S.size(0), kThreads, q * sizeof(double), at::cuda::getCurrentCUDAStream()>>>(
      S.const_data_ptr<double>(), IE.mutable_data_ptr<double>(), q, max_angle, max_norm);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void flag_orth_defect(const at::Tensor& F, double limit, const at::Tensor& flag) {
  check_square(F, "flag_orth_defect");
  TORCH_CHECK(flag.is_cuda() && flag.numel() == 1 && flag.scalar_type() == at::kBool,
              "jsvd internal: flag_orth_defect's flag is a device bool");
  if (F.numel() == 0) return;
  orth_defect_kernel<<<F.size(0), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
      F.const_data_ptr<double>(), static_cast<int>(F.size(1)), limit, flag.mutable_data_ptr<bool>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace cuda
}  // namespace jsvd
