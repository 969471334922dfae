// orth_polish's kernels (orth_polish.h): a block or a warp a factor (U's first q columns, or V) of a matrix.
#include "engine/orth_polish_kernel.h"

#include <c10/cuda/CUDAException.h>

#include "common/jacobi_device.cuh"
#include "engine/orth_polish_device.cuh"

namespace jsvd {
namespace cuda {
namespace {

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
