// orth_polish's kernels (orth_polish.h): a block or a warp a factor (U's first q columns, or V) of a matrix.
#include "engine/orth_polish_kernel.h"

#include <c10/cuda/CUDAException.h>

#include "common/jacobi_device.cuh"

namespace jsvd {
namespace cuda {
namespace {

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

__device__ __forceinline__ float* task_factor(float* U, float* V, const PolishTask* tasks, int nu, int t,
                                              const PolishTask& uni_u, const PolishTask& uni_v, int& r, int& c) {
  const bool is_v = t >= nu;
  PolishTask task;
  if (tasks) {
    task = tasks[t];
  } else {
    task = is_v ? uni_v : uni_u;
    task.off *= is_v ? t - nu : t;
  }
  r = task.rows;
  c = task.cols;
  return (is_v ? V : U) + task.off;
}

// A block a factor. kThreads: small factors take small blocks, many an SM (a block's time is mostly its
// loads' and barriers' latency there). Task t = first + blockIdx.x, skipping `skip` tasks from
// blockIdx.x = split on (a list's block-sized factors lie on both sides of its warp-sized ones).
template <int kThreads>
__global__ void __launch_bounds__(kThreads)
    orth_polish_kernel(float* U, float* V, const PolishTask* tasks, int nu, int first, int split, int skip,
                       PolishTask uni_u, PolishTask uni_v) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ double s_defect;
  const int t = first + blockIdx.x + (static_cast<int>(blockIdx.x) >= split ? skip : 0);
  int r, c;
  float* g = task_factor(U, V, tasks, nu, t, uni_u, uni_v, r, c);
  if (threadIdx.x == 0) s_defect = 0;
  polish_factor<kThreads>(g, r, c, reinterpret_cast<float*>(smem_raw), threadIdx.x, BlockSync{&s_defect});
}

// Factors of at most kPolishWarpMaxCols columns and kPolishWarpMaxRows rows, a warp each,
// kPolishWarpsPerBlock a block, tasks [first, last): on 8-32-column factors the block kernel above
// leaves most of its threads idle and an SM holds few of its blocks (the 32-block limit), so its time
// is latency; a warp a factor keeps four times as many factors in flight an SM, without block barriers.
__global__ void __launch_bounds__(32 * kPolishWarpsPerBlock)
    orth_polish_warp_kernel(float* U, float* V, const PolishTask* tasks, int nu, int first, int last,
                            PolishTask uni_u, PolishTask uni_v, int warp_floats) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int w = threadIdx.x / 32;
  const int t = first + blockIdx.x * kPolishWarpsPerBlock + w;
  if (t >= last) return;  // (a whole warp: no barrier below involves another warp)
  int r, c;
  float* g = task_factor(U, V, tasks, nu, t, uni_u, uni_v, r, c);
  polish_factor<32>(g, r, c, reinterpret_cast<float*>(smem_raw) + static_cast<size_t>(w) * warp_floats,
                    threadIdx.x & 31, WarpSync{});
}

}  // namespace

size_t polish_smem_bytes(int64_t rows, int64_t cols) {
  return static_cast<size_t>((rows | 1) * cols + cols * cols) * sizeof(float);
}

void launch_orth_polish(float* U, float* V, const PolishTask* tasks, int nu, int first, int count, size_t smem,
                        int max_cols, const PolishTask& uni_u, const PolishTask& uni_v, bool warp, int split,
                        int skip, cudaStream_t stream) {
  if (count <= 0) return;
  if (warp) {
    const int warp_floats = (static_cast<int>(smem / sizeof(float)) + 3) & ~3;  // (16-byte aligned slices)
    const size_t bytes = static_cast<size_t>(warp_floats) * sizeof(float) * kPolishWarpsPerBlock;
    allow_dynamic_smem(orth_polish_warp_kernel, bytes);
    orth_polish_warp_kernel<<<(count + kPolishWarpsPerBlock - 1) / kPolishWarpsPerBlock,
                              32 * kPolishWarpsPerBlock, bytes, stream>>>(U, V, tasks, nu, first, first + count,
                                                                          uni_u, uni_v, warp_floats);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return;
  }
  const auto go = [&](auto kernel, int threads) {
    allow_dynamic_smem(kernel, smem);
    kernel<<<count, threads, smem, stream>>>(U, V, tasks, nu, first, split, skip, uni_u, uni_v);
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
