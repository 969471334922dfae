// The start's own batched eigen-solver, float32, n <= 128 (evd_small.h): its two kernels and launcher.
#include "eigen/evd_small.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/util/Exception.h>

#include "common/jacobi_device.cuh"
#include "eigen/evd_tail.cuh"
#include "eigen/tridiag_reduce.cuh"
#include "tuning_knobs.h"

namespace jsvd {
namespace cuda {
namespace eigen {
namespace {

constexpr int kThreads = 128;  // NMAX: a thread a row (reduction), an eigenpair and a column (the tail)
static_assert(kThreads == kEvdSmallMaxCols, "a thread a column");

// The CTA's sum of x, in every thread. One barrier: the caller puts one between two sums (reduce_phases has
// a phase between any two), so that no warp writes red while another still reads the last sum's.
template <typename T>
__device__ T block_sum(T x, T* red) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = x;
  __syncthreads();
  T s = 0;
#pragma unroll
  for (int w = 0; w < kThreads / 32; ++w) s += red[w];
  return s;
}

// A CTA for the phases' sequences (tridiag_reduce.cuh's reduce_phases, evd_tail.cuh's tail_phases): a thread
// each, a barrier after each phase; red: block_sum's 32 values (reduce_phases' sums, a phase between two).
struct DeviceCta {
  float* red;
  template <typename F>
  __device__ __forceinline__ float sum(F f) {
    return block_sum(f(static_cast<int>(threadIdx.x)), red);
  }
  template <typename F>
  __device__ __forceinline__ void all(F f) {
    f(static_cast<int>(threadIdx.x));
    __syncthreads();
  }
  template <typename F>
  __device__ __forceinline__ void first(F f) {
    if (threadIdx.x == 0) f();
  }
  __device__ __forceinline__ void sync() { __syncthreads(); }
};

// G (B, n, n) -> d (B, n), e and tau (B, n - 1), V (B, n, n): reflector k's v in row k, entries k + 2 .. n - 1
// (v_k+1 = 1 implied; a row, so that a step's stores and the back-transformation's loads coalesce). Five
// barriers a step: three phases and two sums (reduce_phases).
__global__ void __launch_bounds__(kThreads) reduce_kernel(const float* __restrict__ G, int n, float* d, float* e,
                                                          float* tau, float* V, const int* skip) {
  __shared__ __align__(16) RegsShared<float, kThreads> sh;
  __shared__ float red[32];
  if (skip != nullptr && *skip != 0) return;  // (a declined batch: evd_small_async's skip)
  const size_t b = blockIdx.x;
  RegsThread<float, kThreads> s;
  DeviceCta cta{red};
  reduce_phases<float, kThreads>(cta, [p = &s](int) -> RegsThread<float, kThreads>& { return *p; }, sh,
                                 G + b * n * n, n, d + b * n, e + b * (n - 1), tau + b * (n - 1), V + b * n * n);
}

// The tridiagonal eigenpairs and the back-transformation (tridiag_eigenpairs.cuh, evd_tail.cuh): V0 (B, n, n)
// row-major, w (B, n) increasing; scratch tail_scratch(n) values a matrix (inverse iteration's states, the
// clusters' round-0 vectors and Gram matrices); *flag |= 1 where a matrix's cluster kept a replaced member. Dynamic
// shared memory: the reflectors' two buffers (first: 16-byte aligned for load4), then Zt (kZtLd n).
// kTailCtasPerSm: as many CTAs as Zt's ~66 KB at n = 128 leave an SM; told to ptxas, which otherwise, given
// load4's vector loads, caps the kernel at 96-128 registers and spills Z's column (nvcc 13.0, sm_90), where
// the 168 that three CTAs allow hold it.
constexpr int kTailCtasPerSm = 3;
__global__ void __launch_bounds__(kThreads, kTailCtasPerSm)
    tail_kernel(const float* d_all, const float* e_all, const float* tau_all, const float* V_all, int n,
                float* V0_all, float* w_all, float* scratch_all, int* flag, const int* skip) {
  extern __shared__ __align__(16) unsigned char raw[];
  __shared__ EigShared<float, kThreads> sh;
  float* vbuf = reinterpret_cast<float*>(raw);
  float* Zt = vbuf + 2 * kThreads;
  const size_t b = blockIdx.x, nn = static_cast<size_t>(n) * n;
  if (skip != nullptr && *skip != 0) {  // (declined: zeros, so that what reads V0 and w reads defined values)
    for (size_t k = threadIdx.x; k < nn; k += kThreads) V0_all[b * nn + k] = 0.0f;
    for (int k = threadIdx.x; k < n; k += kThreads) w_all[b * n + k] = 0.0f;
    return;
  }
  BtThread<float, kThreads> bt;
  DeviceCta cta{nullptr};
  tail_phases<float, kThreads>(cta, [p = &bt](int) -> BtThread<float, kThreads>& { return *p; }, sh, d_all + b * n,
                               e_all + b * (n - 1), tau_all + b * (n - 1), V_all + b * nn, n, Zt, vbuf,
                               scratch_all + b * tail_scratch<kThreads>(n), V0_all + b * nn, w_all + b * n);
  if (threadIdx.x == 0 && sh.replaced) atomicOr(flag, 1);
}

}  // namespace
}  // namespace eigen

bool evd_small_on(int64_t batch, int64_t q) {
  const int k = knobs().start_own_evd;
  return k != 0 && q >= 1 && q <= kEvdSmallMaxCols && (k == 1 || batch >= kEvdSmallMinBatch);
}

at::Tensor evd_small_async(const at::Tensor& G, at::Tensor* failed, at::Tensor* eigenvalues, const at::Tensor& skip) {
  TORCH_CHECK(G.dim() == 3 && G.size(1) == G.size(2) && G.is_contiguous() && G.is_cuda() &&
                  G.scalar_type() == at::kFloat && G.size(1) >= 1 && G.size(1) <= kEvdSmallMaxCols,
              "jsvd internal: evd_small takes a contiguous (B, q, q) float32 CUDA tensor of q <= 128");
  const int64_t B = G.size(0), q = G.size(1);
  const at::TensorOptions f = G.options();
  at::Tensor V0 = at::empty({B, q, q}, f), w = at::empty({B, q}, f);
  const at::Tensor flag = at::zeros({}, f.dtype(at::kInt));
  TORCH_CHECK(!skip.defined() || (skip.numel() == 1 && skip.scalar_type() == at::kInt && skip.is_cuda()),
              "jsvd internal: evd_small's skip is one int32 on the device");
  const int* skip_ptr = skip.defined() ? skip.const_data_ptr<int>() : nullptr;
  if (B > 0) {
    const int64_t ld_e = std::max<int64_t>(q - 1, 1), chunk = std::min<int64_t>(B, kEvdSmallChunk);
    const at::Tensor d = at::empty({B, q}, f), e = at::empty({B, ld_e}, f), tau = at::empty({B, ld_e}, f),
                     V = at::empty({B, q, q}, f);
    const at::Tensor scratch =
        at::empty({chunk, static_cast<int64_t>(eigen::tail_scratch<eigen::kThreads>(static_cast<int>(q)))}, f);
    const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const int n = static_cast<int>(q);
    eigen::reduce_kernel<<<B, eigen::kThreads, 0, stream>>>(G.const_data_ptr<float>(), n, d.data_ptr<float>(),
                                                             e.data_ptr<float>(), tau.data_ptr<float>(),
                                                             V.data_ptr<float>(), skip_ptr);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    const size_t smem = (static_cast<size_t>(eigen::kZtLd<eigen::kThreads>) * q + 2 * eigen::kThreads) * sizeof(float);
    allow_dynamic_smem(eigen::tail_kernel, smem);
    // (the matrices in chunks that share one scratch buffer, one after another on the stream)
    for (int64_t b0 = 0; b0 < B; b0 += chunk) {
      const int64_t nb = std::min(chunk, B - b0);
      eigen::tail_kernel<<<nb, eigen::kThreads, smem, stream>>>(
          d.const_data_ptr<float>() + b0 * q, e.const_data_ptr<float>() + b0 * (q - 1),
          tau.const_data_ptr<float>() + b0 * (q - 1), V.const_data_ptr<float>() + b0 * q * q, n,
          V0.data_ptr<float>() + b0 * q * q, w.data_ptr<float>() + b0 * q, scratch.data_ptr<float>(),
          flag.data_ptr<int>(), skip_ptr);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
  }
  *failed = flag.ne(0);
  if (eigenvalues) *eigenvalues = w;
  return V0;
}

}  // namespace cuda
}  // namespace jsvd
