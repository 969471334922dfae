// Never a non-finite result reported as converged (finite_check.h): the
// singular values of a finite matrix exceed the dtype's range when its entries
// are near the overflow limit, and a numerical failure anywhere upstream shows
// up here rather than as a NaN returned with info >= 0. One read of the
// outputs; no host synchronisation.
#include "engine/finite_check.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>

namespace jsvd {
namespace cuda {
namespace {

constexpr int kWarps = 8;

// A warp per matrix and slice: lane l of slice y reads elements
// 32 (y + j slices) + l, so a warp's reads stay coalesced.
template <typename T>
__device__ bool any_non_finite(const T* x, int64_t len, int lane) {
  bool bad = false;
  const int64_t step = 32 * static_cast<int64_t>(gridDim.y);
  for (int64_t i = 32 * static_cast<int64_t>(blockIdx.y) + lane; i < len; i += step) bad |= !isfinite(x[i]);
  return bad;
}

template <typename T>
__global__ void __launch_bounds__(kWarps * 32)
    flag_non_finite_kernel(const T* S, const T* U, const T* V, int32_t* info, const MatrixDesc* desc,
                           MatrixDesc uni, int n) {
  const int k = blockIdx.x * kWarps + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (k >= n || info[k] < 0) return;  // (a warp's lanes leave together)
  MatrixDesc md = uni;
  if (desc) {
    md = desc[k];
  } else {
    md.s_off *= k;
    md.u_off *= k;
    md.v_off *= k;
  }
  bool bad = false;
  if (S) bad |= any_non_finite(S + md.s_off, md.q, lane);
  if (U) bad |= any_non_finite(U + md.u_off, static_cast<int64_t>(md.p) * md.ucols, lane);
  if (V) bad |= any_non_finite(V + md.v_off, static_cast<int64_t>(md.q) * md.q, lane);
  if (__any_sync(0xffffffffu, bad) && lane == 0) info[k] = -3;
}

}  // namespace

template <typename T>
void launch_flag_non_finite(const T* S, const T* U, const T* V, int32_t* info, const MatrixDesc* desc,
                            const MatrixDesc& uni, int n, cudaStream_t stream) {
  if (n <= 0) return;
  // A few large matrices are read by many warps each (one warp for a 2048^2
  // matrix's U and V took 7.5 ms on the H100); many small ones by a warp each.
  const dim3 grid((n + kWarps - 1) / kWarps, std::max(1, std::min(16384 / n, 8192)));
  flag_non_finite_kernel<T><<<grid, kWarps * 32, 0, stream>>>(S, U, V, info, desc, uni, n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template void launch_flag_non_finite<float>(const float*, const float*, const float*, int32_t*, const MatrixDesc*,
                                            const MatrixDesc&, int, cudaStream_t);
template void launch_flag_non_finite<double>(const double*, const double*, const double*, int32_t*,
                                             const MatrixDesc*, const MatrixDesc&, int, cudaStream_t);

}  // namespace cuda
}  // namespace jsvd
