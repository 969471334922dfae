// The batched start's convergence check on G and V0 (start_converged.h).
#include "precondition/start_converged.h"

#include "common/jacobi_device.cuh"  // block_sum
#include "core.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace jsvd {
namespace cuda {
namespace {

constexpr int kThreads = 256;

// Column j's rank in the descending order of C's diagonal (row-major q x q), ties by index: this thread's
// share, the columns i = first, first + step, ... (both kernels that order the outputs, and the CPU's
// stable sort, give the same order).
__device__ __forceinline__ int rank_part(const double* c, int q, int j, int first, int step) {
  const double cj = c[static_cast<int64_t>(j) * (q + 1)];
  int r = 0;
  for (int i = first; i < q; i += step) {
    const double ci = c[static_cast<int64_t>(i) * (q + 1)];
    r += ci > cj || (ci == cj && i < j);
  }
  return r;
}

// A block a matrix: T = G V0 and C = V0^T T in shared memory (float64), the test of every pair and
// column, the order of C's diagonal, and the outputs in that order.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    start_converged_kernel(const double* Gg, const double* V0g, int64_t vb, int64_t vi, int64_t vj, int q,
                           int64_t rows, double tol, double* Vs, T* Vt, T* S, int32_t* fails) {
  extern __shared__ double sm[];
  double* sg = sm;            // G, then C
  double* sv = sg + q * q;    // V0, [i * q + j]
  double* st = sv + q * q;    // T = G V0
  int* perm = reinterpret_cast<int*>(st + q * q);  // perm[r]: the column of rank r
  const int64_t k = blockIdx.x;
  const int tid = threadIdx.x, qq = q * q;
  for (int e = tid; e < qq; e += kThreads) {
    const int i = e / q, j = e % q;
    sg[e] = Gg[k * qq + e];
    sv[e] = V0g[k * vb + i * vi + j * vj];
  }
  __syncthreads();
  for (int e = tid; e < qq; e += kThreads) {
    const int i = e / q, j = e % q;
    double t = 0;
    for (int l = 0; l < q; ++l) t = fma(sg[i * q + l], sv[l * q + j], t);
    st[e] = t;
  }
  __syncthreads();
  for (int e = tid; e < qq; e += kThreads) {  // (G is no longer read: C over it)
    const int i = e / q, j = e % q;
    double c = 0;
    for (int l = 0; l < q; ++l) c = fma(sv[l * q + i], st[l * q + j], c);
    sg[e] = c;
  }
  __syncthreads();
  double fro = 0;  // ||M||_F^2 = trace(C) (V0 orthogonal)
  for (int j = 0; j < q; ++j) fro += sg[j * q + j];
  const ConvergedStart test = converged_start(fro, rows, q, tol);
  bool fail = !ConvergedStart::fro_ok(fro);
  for (int e = tid; e < qq; e += kThreads) {
    const int i = e / q, j = e % q;
    if (i <= j) fail |= !test.entry_ok(sg, q, i, j);
  }
  for (int j = tid; j < q; j += kThreads) perm[rank_part(sg, q, j, 0, 1)] = j;
  fail = __syncthreads_or(fail);
  if (fail) {
    if (tid == 0) atomicAdd(fails, 1);
    return;
  }
  for (int e = tid; e < qq; e += kThreads) {
    const int i = e / q, r = e % q;
    const int j = perm[r];
    const double v = sv[i * q + j];
    Vs[k * qq + e] = v / sqrt(sg[j * q + j]);
    Vt[k * qq + r * q + i] = static_cast<T>(v);
  }
  for (int r = tid; r < q; r += kThreads) S[k * q + r] = static_cast<T>(sqrt(sg[perm[r] * q + perm[r]]));
}

// The same test on matrices beyond one block: blockIdx.y the matrix, the blocks along x a share each of
// C's upper triangle; bad[k] set where a pair or column of matrix k fails.
__global__ void __launch_bounds__(kThreads) converged_test_kernel(const double* Cg, int64_t first, int q, int64_t rows,
                                                                  double tol, StartTest kind, int32_t* bad) {
  __shared__ double red[32];
  const int64_t k = first + blockIdx.y, qq = static_cast<int64_t>(q) * q;
  const double* c = Cg + k * qq;
  double f = 0;  // ||M||_F^2 = trace(C)
  for (int j = threadIdx.x; j < q; j += kThreads) f += c[static_cast<int64_t>(j) * (q + 1)];
  const double fro = block_sum(f, red);
  const ConvergedStart test = converged_start(kind, fro, rows, q, tol);
  bool fail = !ConvergedStart::fro_ok(fro);
  for (int64_t e = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; e < qq;
       e += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t i = e / q, j = e % q;
    if (i <= j) fail |= !test.entry_ok(c, q, i, j);
  }
  if (__syncthreads_or(fail) && threadIdx.x == 0) atomicOr(bad + k, 1);
}

// The eigen-solvers' routes' outputs where the test passed (converged_outputs): a block per column j of
// X (blockIdx.x) and matrix (blockIdx.y): its rank r in C's descending diagonal (rank_part), then
// S_r = sqrt(C_jj), U's packed row r = X's row j / S_r and V's packed row r = V0's column j. One pass
// over X, where sort, gathers and casts took six.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    converged_outputs_kernel(const double* Cg, const double* Xg, const double* V0g, int64_t vb, int64_t vi,
                             int64_t vj, int64_t first, int q, int64_t p, T* U, T* Vt, T* S) {
  __shared__ int red[32];
  const int64_t k = first + blockIdx.y, qq = static_cast<int64_t>(q) * q;
  const int j = blockIdx.x;
  const double* c = Cg + k * qq;
  const int r = block_sum(rank_part(c, q, j, threadIdx.x, kThreads), red);
  const double s = sqrt(c[static_cast<int64_t>(j) * (q + 1)]);
  if (threadIdx.x == 0) S[k * q + r] = static_cast<T>(s);
  if (U == nullptr) return;
  const double* x = Xg + (k * q + j) * p;
  T* u = U + (k * q + r) * p;
  for (int64_t i = threadIdx.x; i < p; i += kThreads) u[i] = static_cast<T>(x[i] / s);
  T* v = Vt + k * qq + static_cast<int64_t>(r) * q;
  for (int i = threadIdx.x; i < q; i += kThreads) v[i] = static_cast<T>(V0g[k * vb + i * vi + j * vj]);
}

}  // namespace

at::Tensor converged_fails(const at::Tensor& C, int64_t rows, double tol, StartTest kind) {
  TORCH_CHECK(C.dim() == 3 && C.is_contiguous() && C.scalar_type() == at::kDouble && C.size(1) == C.size(2),
              "jsvd internal: converged_fails' arguments");
  const int64_t B = C.size(0), q = C.size(1);
  const at::Tensor bad = at::zeros({B}, C.options().dtype(at::kInt));
  if (B > 0 && q > 0) {
    const int64_t tiles = std::min<int64_t>((q * q + kThreads - 1) / kThreads, std::max<int64_t>(1, 1024 / B));
    for (int64_t first = 0; first < B; first += 65535) {  // (a grid's y extent)
      const int64_t n = std::min<int64_t>(B - first, 65535);
      converged_test_kernel<<<dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(n)), kThreads, 0,
                              at::cuda::getCurrentCUDAStream()>>>(C.const_data_ptr<double>(), first,
                                                                  static_cast<int>(q), rows, tol, kind,
                                                                  bad.mutable_data_ptr<int32_t>());
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
  }
  return bad.sum().to(at::kInt);
}

CoreResult converged_outputs(const at::Tensor& C, const at::Tensor& X, const at::Tensor& V0, bool compute_uv,
                             at::ScalarType dtype) {
  TORCH_CHECK(C.dim() == 3 && C.is_contiguous() && C.scalar_type() == at::kDouble && C.size(1) == C.size(2) &&
                  X.dim() == 3 && X.is_contiguous() && X.scalar_type() == at::kDouble &&
                  X.size(0) == C.size(0) && X.size(1) == C.size(1) && V0.sizes() == C.sizes() &&
                  V0.scalar_type() == at::kDouble && (dtype == at::kFloat || dtype == at::kDouble),
              "jsvd internal: converged_outputs' arguments");
  const int64_t B = C.size(0), q = C.size(1), p = X.size(2);
  CoreResult r;
  r.S = at::empty({B * q}, C.options().dtype(dtype));
  r.info = at::ones({B}, C.options().dtype(at::kInt));  // (what the Jacobi's one sweep on X would report)
  if (compute_uv) {
    r.U = at::empty({B * q * p}, r.S.options());
    r.V = at::empty({B * q * q}, r.S.options());
  }
  const auto launch = [&](auto zero) {
    using T = decltype(zero);
    for (int64_t first = 0; B > 0 && q > 0 && first < B; first += 65535) {  // (a grid's y extent)
      const int64_t n = std::min<int64_t>(B - first, 65535);
      converged_outputs_kernel<T><<<dim3(static_cast<unsigned>(q), static_cast<unsigned>(n)), kThreads, 0,
                                    at::cuda::getCurrentCUDAStream()>>>(
          C.const_data_ptr<double>(), X.const_data_ptr<double>(), V0.const_data_ptr<double>(), V0.stride(0),
          V0.stride(1), V0.stride(2), first, static_cast<int>(q), p,
          compute_uv ? r.U.mutable_data_ptr<T>() : nullptr, compute_uv ? r.V.mutable_data_ptr<T>() : nullptr,
          r.S.mutable_data_ptr<T>());
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
  };
  if (dtype == at::kDouble) launch(0.0); else launch(0.0f);
  return r;
}

StartConverged start_converged(const at::Tensor& G, const at::Tensor& V0, int64_t rows, double tol,
                               at::ScalarType dtype) {
  TORCH_CHECK(G.dim() == 3 && G.is_contiguous() && G.scalar_type() == at::kDouble && V0.sizes() == G.sizes() &&
                  V0.scalar_type() == at::kDouble && dtype == at::kFloat,
              "jsvd internal: start_converged's arguments");
  const int64_t B = G.size(0), q = G.size(1);
  StartConverged out;
  out.Vs = at::empty({B, q, q}, G.options());
  out.Vt = at::empty({B, q, q}, G.options().dtype(dtype));
  out.S = at::empty({B, q}, G.options().dtype(dtype));
  const size_t smem = 3 * q * q * sizeof(double) + q * sizeof(int);
  // (the batched start's Gram matrices have at most 64 columns, 96 KB; beyond a block's shared memory
  // every matrix counts as not passing, and the caller takes the Jacobi on X)
  const bool fits = smem <= at::cuda::getCurrentDeviceProperties()->sharedMemPerBlockOptin;
  out.fails = at::full({}, fits ? 0 : B, G.options().dtype(at::kInt));
  if (B == 0 || q == 0 || !fits) return out;
  auto kernel = start_converged_kernel<float>;
  if (smem > 48 * 1024) C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  kernel<<<B, kThreads, smem, at::cuda::getCurrentCUDAStream()>>>(
      G.const_data_ptr<double>(), V0.const_data_ptr<double>(), V0.stride(0), V0.stride(1), V0.stride(2),
      static_cast<int>(q), rows, tol,
      out.Vs.mutable_data_ptr<double>(), out.Vt.mutable_data_ptr<float>(), out.S.mutable_data_ptr<float>(),
      out.fails.mutable_data_ptr<int32_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

}  // namespace cuda
}  // namespace jsvd
