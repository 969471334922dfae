// orth_polish's step on one factor (orth_polish.h), by a block or a warp: the block and warp kernels of
// orth_polish_kernel.cu, and the warp level's kernel where it polishes its own outputs (svd_warp.cu).
#pragma once

#include <cuda_runtime.h>

#include "engine/orth_polish_kernel.h"

namespace jsvd {
namespace cuda {

// One factor by kThreads threads (a block, or a warp: Sync's barrier and sum), this one at lane `tid`.
// Q: rows x cols column-major at g (leading dimension rows), copied to shared memory (`smem`) with an
// odd leading dimension; E = Q^T Q - I beside it in float (its entries are of order eps: float keeps
// their relative precision in half the space of double). Both products by 4 x 4 tiles a thread, whose
// rows and columns are strided by a quarter of the range, so that consecutive threads take consecutive
// columns (E) or rows (the update): distinct banks, and coalesced writes. A tile's 16 independent sums
// take 8 shared loads; a sum an element took 1.5 loads a multiply-add and ran at the shared memory's
// rate (H100, stop 56: 0.51 ms for 200 matrices of 128², 0.30 for 10000 of 32²; with the tiles 0.28 and
// 0.24, but 8-column factors 0.048 -> 0.12 ms at 10000 matrices: latency-bound).
template <int kThreads, typename Sync>
__device__ __forceinline__ void polish_factor(float* g, int r, int c, float* smem, int tid, Sync sync) {
  const int ld = r | 1;
  float* Q = smem;
  float* E = Q + static_cast<size_t>(ld) * c;
  for (int e = tid; e < r * c; e += kThreads) {
    const int j = e / r, i = e - j * r;
    Q[j * ld + i] = g[e];
  }
  sync.barrier();
  // E by tiles (ti, tj), ti <= tj, of the entries (ti + a h, tj + b h), each a float64 sum of float32's
  // exact products. Every pair {i, j} lies in one computed tile (i mod h, j mod h) or its mirror; a
  // diagonal tile holds each of its pairs twice and keeps a <= b. ||E||_F^2, off-diagonal entries twice.
  // (Each entry's sum runs over k in order whatever the tiling: a warp and a block give equal factors.)
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
  // (NaN propagates: such a matrix is skipped)
  if (!(sync.sum(defect) <= kPolishMaxDefect * kPolishMaxDefect)) return;
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

struct BlockSync {
  double* total;  // shared, zeroed before the first barrier
  __device__ void barrier() const { __syncthreads(); }
  __device__ double sum(double x) const {
#pragma unroll
    for (int o = 16; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
    if ((threadIdx.x & 31) == 0) atomicAdd(total, x);
    __syncthreads();
    return *total;
  }
};

struct WarpSync {
  __device__ void barrier() const { __syncwarp(); }
  __device__ double sum(double x) const {
    // (E's entries, written above, are read by other lanes below: the shuffles alone order no memory)
    __syncwarp();
#pragma unroll
    for (int o = 16; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
  }
};

}  // namespace cuda
}  // namespace jsvd
