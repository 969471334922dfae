// orth_polish's kernel (orth_polish.h): a block a factor (U's first q columns, or V) of a matrix.
#include "engine/orth_polish_kernel.h"

#include <c10/cuda/CUDAException.h>

#include "common/jacobi_device.cuh"

namespace jsvd {
namespace cuda {
namespace {

// Q: rows x cols column-major at base + off (leading dimension rows), copied to shared memory with an
// odd leading dimension; E = Q^T Q - I beside it in float (its entries are of order eps: float keeps
// their relative precision in half the space of double). Both products by 4 x 4 tiles a thread, whose
// rows and columns are strided by a quarter of the range, so that consecutive threads take consecutive
// columns (E) or rows (the update): distinct banks, and coalesced writes. A tile's 16 independent sums
// take 8 shared loads; a sum an element took 1.5 loads a multiply-add and ran at the shared memory's
// rate (H100, stop 56: 0.51 ms for 200 matrices of 128², 0.30 for 10000 of 32²; with the tiles 0.28 and
// 0.24, but 8-column factors 0.048 -> 0.12 ms at 10000 matrices: latency-bound). kThreads: small factors
// take small blocks, many an SM (a block's time is mostly its loads' and barriers' latency there).
template <int kThreads>
__global__ void __launch_bounds__(kThreads)
    orth_polish_kernel(float* U, float* V, const PolishTask* tasks, int nu, PolishTask uni_u, PolishTask uni_v) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ double s_defect;
  const int t = blockIdx.x;
  const bool is_v = t >= nu;
  PolishTask task;
  if (tasks) {
    task = tasks[t];
  } else {
    task = is_v ? uni_v : uni_u;
    task.off *= is_v ? t - nu : t;
  }
  float* g = (is_v ? V : U) + task.off;
  const int r = task.rows, c = task.cols, ld = r | 1;
  float* Q = reinterpret_cast<float*>(smem_raw);
  float* E = Q + static_cast<size_t>(ld) * c;
  const int tid = threadIdx.x;
  if (tid == 0) s_defect = 0;
  for (int e = tid; e < r * c; e += kThreads) {
    const int j = e / r, i = e - j * r;
    Q[j * ld + i] = g[e];
  }
  __syncthreads();
  // E by tiles (ti, tj), ti <= tj, of the entries (ti + a h, tj + b h), each a float64 sum of float32's
  // exact products. Every pair {i, j} lies in one computed tile (i mod h, j mod h) or its mirror; a
  // diagonal tile holds each of its pairs twice and keeps a <= b. ||E||_F^2, off-diagonal entries twice.
  const int h = (c + 3) / 4;
  double defect = 0;
  for (int e = tid; e < h * h; e += kThreads) {
    const int ti = e / h, tj = e - ti * h;
    if (tj < ti) continue;
    int xo[4], yo[4];
#pragma unroll
    for (int a = 0; a < 4; ++a) {
      xo[a] = min(ti + a * h, c - 1) * ld;  // (beyond c: a repeated column, not stored)
      yo[a] = min(tj + a * h, c - 1) * ld;
    }
    double acc[4][4] = {};
    for (int k = 0; k < r; ++k) {
      double u[4], v[4];
#pragma unroll
      for (int a = 0; a < 4; ++a) {
        u[a] = Q[xo[a] + k];
        v[a] = Q[yo[a] + k];
      }
#pragma unroll
      for (int a = 0; a < 4; ++a)
#pragma unroll
        for (int b = 0; b < 4; ++b) acc[a][b] = fma(u[a], v[b], acc[a][b]);
    }
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        const int i = ti + a * h, j = tj + b * h;
        if (i >= c || j >= c || (ti == tj && a > b)) continue;
        const double w = acc[a][b] - (i == j ? 1.0 : 0.0);
        E[i * c + j] = E[j * c + i] = static_cast<float>(w);
        defect += (i == j ? 1.0 : 2.0) * w * w;
      }
  }
#pragma unroll
  for (int o = 16; o > 0; o /= 2) defect += __shfl_xor_sync(0xffffffffu, defect, o);
  if ((tid & 31) == 0) atomicAdd(&s_defect, defect);  // (NaN propagates: such a matrix is skipped below)
  __syncthreads();
  if (!(s_defect <= kPolishMaxDefect * kPolishMaxDefect)) return;
  // Q - Q E / 2 by tiles of rows ri + s hr and columns jq + u hc.
  const int hr = (r + 3) / 4, hc = h;
  for (int e = tid; e < hr * hc; e += kThreads) {
    const int jq = e / hr, ri = e - jq * hr;
    int ro[4], co[4];
#pragma unroll
    for (int a = 0; a < 4; ++a) {
      ro[a] = min(ri + a * hr, r - 1);
      co[a] = min(jq + a * hc, c - 1);
    }
    float acc[4][4] = {};
    for (int l = 0; l < c; ++l) {
      float x[4], y[4];
#pragma unroll
      for (int a = 0; a < 4; ++a) {
        x[a] = Q[l * ld + ro[a]];
        y[a] = E[l * c + co[a]];
      }
#pragma unroll
      for (int a = 0; a < 4; ++a)
#pragma unroll
        for (int b = 0; b < 4; ++b) acc[a][b] = fmaf(x[a], y[b], acc[a][b]);
    }
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        const int i = ri + a * hr, j = jq + b * hc;
        if (i < r && j < c) g[j * r + i] = Q[j * ld + i] - 0.5f * acc[a][b];
      }
  }
}

}  // namespace

size_t polish_smem_bytes(int64_t rows, int64_t cols) {
  return static_cast<size_t>((rows | 1) * cols + cols * cols) * sizeof(float);
}

void launch_orth_polish(float* U, float* V, const PolishTask* tasks, int nu, int ntasks, int max_cols,
                        const PolishTask& uni_u, const PolishTask& uni_v, size_t smem, cudaStream_t stream) {
  if (ntasks <= 0) return;
  const auto go = [&](auto kernel, int threads) {
    allow_dynamic_smem(kernel, smem);
    kernel<<<ntasks, threads, smem, stream>>>(U, V, tasks, nu, uni_u, uni_v);
  };
  if (max_cols <= 16)
    go(orth_polish_kernel<64>, 64);
  else if (max_cols <= 48)
    go(orth_polish_kernel<128>, 128);
  else
    go(orth_polish_kernel<512>, 512);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace cuda
}  // namespace jsvd
