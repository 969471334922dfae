// Rotation of a block-column pair through the EVD of its Gram matrix, for
// pairs too tall to hold in shared memory (W-cycle paper §III, group (ii), and
// §IV-C). One thread block per pair [A_i A_j] (c = w_i + w_j columns):
//   1. B = A_ij^T A_ij, streaming A_ij's rows through shared memory;
//   2.-3. unless every column pair already passes the relative orthogonality
//      test, EVD B = J diag J^T in float64 (gram_evd.cuh: gram_pair_evd);
//   4. [A_i A_j] <- [A_i A_j] J and [V_i V_j] <- [V_i V_j] J, row chunk by row chunk.
#include "levels/gram/gram_evd_smem.h"

#include "levels/gram/gram_evd.cuh"

#include <c10/cuda/CUDAException.h>

namespace jsvd {
namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kChunk = 64;  // rows staged per pass
constexpr int kMaxEntries = kGramMaxCols * kGramMaxCols / kThreads;

// The EVD's buffers (gram_evd.cuh), then the row staging.
struct GramSmem {
  EvdSmem evd;
  double* X;  // kChunk x c staging, leading dimension kChunk + 1
};

__device__ GramSmem carve(unsigned char* raw, int c) {
  GramSmem s;
  const uintptr_t after = reinterpret_cast<uintptr_t>(carve_evd(raw, c, s.evd));
  s.X = reinterpret_cast<double*>((after + 15) / 16 * 16);
  return s;
}

// Global column of the pair's column l: block i's w0 columns from c0, then block j's from c1.
__device__ __forceinline__ int pair_col(int l, int c0, int w0, int c1) { return l < w0 ? c0 + l : c1 + (l - w0); }

// X <- rows [r0, r0 + rows) of the pair's c columns (leading dimension ld in global memory).
template <typename T>
__device__ void stage_rows(double* X, const T* base, int64_t ld, int r0, int rows, int c, int c0, int w0, int c1) {
  for (int idx = threadIdx.x; idx < rows * c; idx += kThreads) {
    const int l = idx / rows, r = idx - l * rows;
    X[l * (kChunk + 1) + r] = base[static_cast<int64_t>(pair_col(l, c0, w0, c1)) * ld + r0 + r];
  }
}

// rows [0, n) of the pair's columns (leading dimension ld in global memory) <- rows * J
template <typename T>
__device__ void apply_rotation(T* base, int64_t ld, int n, int c, int c0, int w0, int c1, const GramSmem& s) {
  const int tid = threadIdx.x;
  for (int r0 = 0; r0 < n; r0 += kChunk) {
    const int rows = min(kChunk, n - r0);
    stage_rows(s.X, base, ld, r0, rows, c, c0, w0, c1);
    __syncthreads();
    for (int idx = tid; idx < rows * c; idx += kThreads) {
      const int j = idx / rows, r = idx - j * rows;
      double acc = 0;
      for (int l = 0; l < c; ++l) acc += s.X[l * (kChunk + 1) + r] * s.evd.J[j * c + l];
      base[static_cast<int64_t>(pair_col(j, c0, w0, c1)) * ld + r0 + r] = static_cast<T>(acc);
    }
    __syncthreads();
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) gram_evd_kernel(EngineArgs<T> args, const PairTask* tasks) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const PairTask pt = tasks[blockIdx.x];
  const int k = pt.k;
  if (args.state[k].converged) return;
  const int c0 = pt.c0, c1 = pt.c1, w0 = pt.w0w1 & 0xffff, w1 = (pt.w0w1 >> 16) & kPairWidthMask;
  const int c = w0 + w1;
  const MatrixDesc md = matrix_desc(args, k);
  const int p = md.p;
  const int tid = threadIdx.x;
  GramSmem s = carve(smem_raw, c);
  T* A = args.A + md.a_off;

  // 1. Gram matrix; thread tid owns entries tid, tid + kThreads, ...
  double acc[kMaxEntries];
#pragma unroll
  for (int e = 0; e < kMaxEntries; ++e) acc[e] = 0;
  for (int r0 = 0; r0 < p; r0 += kChunk) {
    const int rows = min(kChunk, p - r0);
    stage_rows(s.X, A, p, r0, rows, c, c0, w0, c1);
    __syncthreads();
#pragma unroll
    for (int e = 0; e < kMaxEntries; ++e) {
      const int idx = tid + e * kThreads;
      if (idx < c * c) {
        const double* x = s.X + (idx / c) * (kChunk + 1);
        const double* y = s.X + (idx % c) * (kChunk + 1);
        double a = 0;
        for (int r = 0; r < rows; ++r) a += x[r] * y[r];
        acc[e] += a;
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int e = 0; e < kMaxEntries; ++e) {
    const int idx = tid + e * kThreads;
    if (idx < c * c) {
      s.evd.B[idx] = acc[e];
      s.evd.J[idx] = (idx / c == idx % c) ? 1.0 : 0.0;
    }
  }
  __syncthreads();

  // 2.-3. Already orthogonal? Else the EVD (gram_evd.cuh).
  if (!gram_pair_evd<T>(s.evd, c, p, args.tol, args.Vw != nullptr, /*f64_data=*/false, args.max_sweeps, &args.state[k])) return;

  // 4. Apply J to the pair's columns of A and of the V workspace.
  apply_rotation(A, p, p, c, c0, w0, c1, s);
  if (args.Vw) apply_rotation(args.Vw + md.v_off, md.q, md.q, c, c0, w0, c1, s);
}

}  // namespace

size_t gram_evd_smem_bytes(int64_t c) {
  return evd_smem_bytes(c) + 16 + (kChunk + 1) * c * sizeof(double);
}

template <typename T>
void launch_gram_evd(const EngineArgs<T>& args, const PairTask* tasks, int ntasks, int64_t max_c, cudaStream_t stream) {
  if (ntasks == 0) return;
  TORCH_CHECK(max_c <= kGramMaxCols, "jsvd internal: Gram EVD pair wider than ", kGramMaxCols);
  const size_t smem = gram_evd_smem_bytes(max_c);
  auto kernel = gram_evd_kernel<T>;
  allow_dynamic_smem(kernel, smem);
  kernel<<<ntasks, kThreads, smem, stream>>>(args, tasks);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template void launch_gram_evd<float>(const EngineArgs<float>&, const PairTask*, int, int64_t, cudaStream_t);
template void launch_gram_evd<double>(const EngineArgs<double>&, const PairTask*, int, int64_t, cudaStream_t);

}  // namespace cuda
}  // namespace jsvd
