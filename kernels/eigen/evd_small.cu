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

template <typename T>
__device__ T block_sum(T x, T* red) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  __syncthreads();  // (red's previous use is over)
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = x;
  __syncthreads();
  T s = 0;
#pragma unroll
  for (int w = 0; w < kThreads / 32; ++w) s += red[w];
  return s;
}

// G (B, n, n) -> d (B, n), e and tau (B, n - 1), V (B, n, n): reflector k's v in column k, rows k + 2 .. n - 1
// (v_k+1 = 1 implied). Three barriers and two sums a step.
__global__ void __launch_bounds__(kThreads) reduce_kernel(const float* __restrict__ G, int n, float* d, float* e,
                                                          float* tau, float* V) {
  __shared__ __align__(16) RegsShared<float, kThreads> sh;
  __shared__ float red[32];
  const int b = blockIdx.x, t = threadIdx.x;
  RegsThread<float, kThreads> s;
  regs_load(s, G + static_cast<size_t>(b) * n * n, n, t);
  float* Vb = V + static_cast<size_t>(b) * n * n;
  float *db = d + static_cast<size_t>(b) * n, *eb = e + static_cast<size_t>(b) * (n - 1),
        *tb = tau + static_cast<size_t>(b) * (n - 1);
  if (n == 1) {
    if (t == 0) db[0] = s.a[0];
    return;
  }
  for (int k = 0; k < n - 2; ++k) {
    regs_owner(s, sh, k, t);
    __syncthreads();
    const float sigma = block_sum(regs_sigma_part(s, sh, k, t), red);
    regs_reflector(s, sh, k, t, sigma, n, db, eb, tb, Vb);
    __syncthreads();
    const float pv = block_sum(regs_symv(s, sh, k), red);
    regs_w(s, sh, k, t, pv);
    __syncthreads();
    regs_update(s, sh, k, t);
    __syncthreads();  // (the next step's owner overwrites xs, which this step's threads may still read)
  }
  regs_end_rows(s, sh, n, t);
  __syncthreads();
  if (t == 0) regs_end_out(sh, n, db, eb, tb);
}

// The tridiagonal eigenpairs and the back-transformation (tridiag_eigenpairs.cuh, evd_tail.cuh): V0 (B, n, n)
// row-major, w (B, n) increasing; scratch 5 kThreads n values a matrix (lagtf's factors, the clusters' round-0
// vectors); *flag |= 1 where a matrix's cluster kept a replaced member. Dynamic shared memory: Zt (kThreads n)
// and the reflectors' two buffers.
__global__ void __launch_bounds__(kThreads) tail_kernel(const float* d_all, const float* e_all, const float* tau_all,
                                                        const float* V_all, int n, float* V0_all, float* w_all,
                                                        float* scratch_all, int* flag) {
  extern __shared__ __align__(16) unsigned char raw[];
  __shared__ EigShared<float, kThreads> sh;
  float* Zt = reinterpret_cast<float*>(raw);
  float* vbuf = Zt + static_cast<size_t>(kThreads) * n;
  const int b = blockIdx.x, j = threadIdx.x;
  const size_t nn = static_cast<size_t>(n) * n;
  f_load(sh, d_all + static_cast<size_t>(b) * n, e_all + static_cast<size_t>(b) * (n - 1), n, j);
  __syncthreads();
  f_split(sh, n, j);
  __syncthreads();
  if (j == 0) f_blocks(sh, n);
  __syncthreads();
  f_bisect(sh, n, j);
  __syncthreads();
  f_clusters(sh, n, j);
  __syncthreads();
  float* scratch = scratch_all + static_cast<size_t>(b) * 5 * kThreads * n;
  float* X1 = scratch + static_cast<size_t>(4) * kThreads * n;
  t_zero(sh, n, j, Zt);
  f_vectors(sh, n, j, Zt, scratch);
  __syncthreads();
  for (int round = 0; round < 2 && sh.max_cluster > 1; ++round) {
    if (round == 1) {
      f_keep(sh, n, j, Zt, X1, true);
      f_resolve(sh, n, j, Zt, scratch);
      __syncthreads();
    }
    for (int s = 1; s < sh.max_cluster; ++s) {
      for (int attempt = 0; attempt < 3; ++attempt) {
        for (int pass = 0; pass < 2; ++pass) {
          f_cgs_dot(sh, n, j, s, Zt);
          __syncthreads();
          f_cgs_sub(sh, n, j, s, Zt);
          __syncthreads();
        }
        f_cgs_norm(sh, n, j, s, Zt, round, attempt);
        __syncthreads();
        const bool again = sh.retry;
        __syncthreads();
        if (j == 0) sh.retry = 0;
        if (!again) break;
      }
    }
    if (round == 1) {
      f_keep(sh, n, j, Zt, X1, false);
      __syncthreads();
    }
  }
  const int rank = j < n ? t_rank(sh, n, j) : 0;
  const float* V = V_all + b * nn;
  const float* tau = tau_all + static_cast<size_t>(b) * (n - 1);
  BtThread<float, kThreads> bt;
  bt_regs_load(bt, Zt, n, j);
  if (n >= 3) bt_regs_v<float, kThreads>(vbuf + ((n - 3) & 1) * kThreads, V, n, n - 3, j);
  for (int k = n - 3; k >= 0; --k) {
    __syncthreads();  // (v_k loaded; every column done with v_k+2, whose buffer v_k-1 takes)
    if (k > 0) bt_regs_v<float, kThreads>(vbuf + ((k - 1) & 1) * kThreads, V, n, k - 1, j);
    bt_regs_apply(bt, vbuf + (k & 1) * kThreads, tau[k], k);
  }
  bt_regs_out(sh, bt, n, j, rank, V0_all + b * nn, w_all + static_cast<size_t>(b) * n);
  if (j == 0 && sh.replaced) atomicOr(flag, 1);
}

}  // namespace
}  // namespace eigen

bool evd_small_on(int64_t batch, int64_t q) {
  const int k = knobs().start_own_evd;
  return k != 0 && q >= 1 && q <= kEvdSmallMaxCols && (k == 1 || batch >= kEvdSmallMinBatch);
}

at::Tensor evd_small_async(const at::Tensor& G, at::Tensor* failed, at::Tensor* eigenvalues) {
  TORCH_CHECK(G.dim() == 3 && G.size(1) == G.size(2) && G.is_contiguous() && G.is_cuda() &&
                  G.scalar_type() == at::kFloat && G.size(1) >= 1 && G.size(1) <= kEvdSmallMaxCols,
              "jsvd internal: evd_small takes a contiguous (B, q, q) float32 CUDA tensor of q <= 128");
  const int64_t B = G.size(0), q = G.size(1);
  const at::TensorOptions f = G.options();
  at::Tensor V0 = at::empty({B, q, q}, f), w = at::empty({B, q}, f);
  const at::Tensor flag = at::zeros({}, f.dtype(at::kInt));
  if (B > 0) {
    const int64_t ld_e = std::max<int64_t>(q - 1, 1), chunk = std::min<int64_t>(B, kEvdSmallChunk);
    const at::Tensor d = at::empty({B, q}, f), e = at::empty({B, ld_e}, f), tau = at::empty({B, ld_e}, f),
                     V = at::empty({B, q, q}, f), scratch = at::empty({chunk, 5 * eigen::kThreads * q}, f);
    const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const int n = static_cast<int>(q);
    eigen::reduce_kernel<<<B, eigen::kThreads, 0, stream>>>(G.const_data_ptr<float>(), n, d.data_ptr<float>(),
                                                             e.data_ptr<float>(), tau.data_ptr<float>(),
                                                             V.data_ptr<float>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    const size_t smem = (static_cast<size_t>(eigen::kThreads) * q + 2 * eigen::kThreads) * sizeof(float);
    allow_dynamic_smem(eigen::tail_kernel, smem);
    // (the matrices in chunks that share one scratch buffer, one after another on the stream)
    for (int64_t b0 = 0; b0 < B; b0 += chunk) {
      const int64_t nb = std::min(chunk, B - b0);
      eigen::tail_kernel<<<nb, eigen::kThreads, smem, stream>>>(
          d.const_data_ptr<float>() + b0 * q, e.const_data_ptr<float>() + b0 * (q - 1),
          tau.const_data_ptr<float>() + b0 * (q - 1), V.const_data_ptr<float>() + b0 * q * q, n,
          V0.data_ptr<float>() + b0 * q * q, w.data_ptr<float>() + b0 * q, scratch.data_ptr<float>(),
          flag.data_ptr<int>());
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
  }
  *failed = flag.ne(0);
  if (eigenvalues) *eigenvalues = w;
  return V0;
}

}  // namespace cuda
}  // namespace jsvd
