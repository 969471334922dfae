// Panel of the blocked Householder QR that preconditions the Jacobi
// (qr_precondition.cpp): LAPACK's xGEQR2 on w <= 32 columns, then xLARFT's T,
// one thread block per matrix with the panel in shared memory.
//
// Step j builds reflector j (xLARFG: H_j = I - tau_j v v^T, v_j = 1) from
// column j's head and the squared norm of its tail, which the warp that
// updated column j in step j - 1 summed (in double) right after its update:
// one barrier a column. Then a warp a column applies H_j to columns c > j,
// reading column j unscaled (v = scale * x below the diagonal); column j
// itself is scaled to v in step j + 1, when nobody reads it. The steps are
// latency-bound (a panel a matrix, few matrices an SM), hence a warp for each
// column (32 warps) and row loops four rows a lane deep.
#include "qr/householder_panel.h"

#include "qr/householder_device.cuh"

#include <c10/cuda/CUDAException.h>

#include <algorithm>

namespace jsvd {
namespace cuda {
namespace {

constexpr int kThreads = 32 * kMaxPanelWidth;
// The warp-per-matrix kernel takes panels of at most 128 rows (H100: faster than the block on
// 10000 32x32 and 1000 64x32 panels, the same on 500 64x64) and 48 KB (a 128 x 32 float64 panel).
constexpr int kWarpPanelMaxRows = 128;
constexpr size_t kWarpPanelMaxBytes = 48 * 1024;

// T (xLARFT, forward, columnwise) by one warp, in place of G = V^T V's upper
// triangle (row-major, leading dimension ld): T(0:j, j) = -tau_j T(0:j, 0:j)
// G(0:j, j), T(j, j) = tau_j (w <= 32).
__device__ __forceinline__ void larft_by_warp(double* st, int ld, const double* tau, int w, int lane) {
  for (int j = 0; j < w; ++j) {
    double acc = 0;
    if (lane < j)
      for (int l = lane; l < j; ++l) acc += st[lane * ld + l] * st[l * ld + j];
    __syncwarp();
    if (lane < j) st[lane * ld + j] = -tau[j] * acc;
    if (lane == j) st[j * ld + j] = tau[j];
    __syncwarp();
  }
}

// Out: R over zeros in A's panel; Y explicit (zeros above, 1 on the diagonal)
// as rows of Yg; T row-major, zero below the diagonal. Columns c0, c0 + cstep,
// ... by this warp; T's entries t0, t0 + tstep, ... by this thread.
template <typename T>
__device__ __forceinline__ void write_panel(const T* a, T* Ag, int64_t a_ld, T* Yg, const double* st, int ld, T* Tg,
                                            int L, int w, int c0, int cstep, int t0, int tstep) {
  const int lane = threadIdx.x & 31;
  for (int c = c0; c < w; c += cstep)
    for (int i = lane; i < L; i += 32) {
      const T v = a[c * L + i];
      Ag[c * a_ld + i] = i <= c ? v : T(0);
      Yg[c * L + i] = i < c ? T(0) : i == c ? T(1) : v;
    }
  for (int t = t0; t < w * w; t += tstep) {
    const int i = t / w, j = t % w;
    Tg[t] = i <= j ? T(st[i * ld + j]) : T(0);
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    householder_panel_kernel(T* __restrict__ A, int64_t a_bs, int64_t a_ld, int L, int w, T* __restrict__ Yt,
                             T* __restrict__ Tm) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* a = reinterpret_cast<T*>(smem_raw);  // L x w, column-major (ld L)
  __shared__ double s_tail[kMaxPanelWidth];               // column j's squared norm below row j
  __shared__ double s_tau[kMaxPanelWidth], s_scale[kMaxPanelWidth], s_beta[kMaxPanelWidth];
  __shared__ double s_t[kMaxPanelWidth][kMaxPanelWidth + 1];  // G = V^T V, then T (upper triangles)
  constexpr int nwarps = kThreads / 32;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  T* const Ag = A + blockIdx.x * a_bs;

  for (int c = warp; c < w; c += nwarps)
    for (int i = lane; i < L; i += 32) a[c * L + i] = Ag[c * a_ld + i];
  __syncthreads();
  if (warp == 0) {
    double t = 0;
    for (int i = 1 + lane; i < L; i += 32) t += double(a[i]) * double(a[i]);
    t = warp_sum(t);
    if (lane == 0) s_tail[0] = t;
  }
  __syncthreads();

  for (int j = 0; j < w; ++j) {
    const T* x = a + j * L;
    const Reflector h =
        begin_block_step(x, a + (j > 0 ? j - 1 : 0) * L, j, L, s_tail, s_tau, s_scale, s_beta, tid, kThreads);
    const double tau = h.tau, scale = h.scale;
    // H_j applied to columns c > j: y -= tau (y_j + scale x^T y) [1; scale x].
    for (int c = j + 1 + warp; c < w; c += nwarps) {
      T* y = a + c * L;
      const double s = warp_sum(lane_dot_t(x, y, j + 1 + lane, L));
      const double wc = tau * (double(y[j]) + scale * s);
      const T ws = T(wc * scale);  // (the update in T: lane_dot_t)
      __syncwarp();  // every lane has read y[j] before lane 0 writes it
      if (lane == 0) y[j] = T(double(y[j]) - wc);
      int i = j + 1 + lane;
      for (; i + 96 < L; i += 128) {  // (loads first: y and x share the array)
        const T x0 = x[i], x1 = x[i + 32], x2 = x[i + 64], x3 = x[i + 96];
        const T y0 = y[i], y1 = y[i + 32], y2 = y[i + 64], y3 = y[i + 96];
        y[i] = y0 - ws * x0;
        y[i + 32] = y1 - ws * x1;
        y[i + 64] = y2 - ws * x2;
        y[i + 96] = y3 - ws * x3;
      }
      for (; i < L; i += 32) y[i] -= ws * x[i];
      if (c == j + 1) {  // the next reflector's tail, from the rows this warp wrote
        __syncwarp();
        const double t = warp_sum(lane_dot(y, y, c + 1 + lane, L));
        if (lane == 0) s_tail[c] = t;
      }
    }
    __syncthreads();
  }
  scale_to_reflector(a + (w - 1) * L, w - 1, L, s_scale[w - 1], s_beta[w - 1], tid, kThreads);
  __syncthreads();

  // G(i, j) = v_i^T v_j for i < j (v_j: zeros above row j, 1 at j).
  for (int t = warp; t < w * w; t += nwarps) {
    const int i = t / w, j = t % w;
    if (i >= j) continue;
    const double s = warp_sum(lane_dot_t(a + i * L, a + j * L, j + 1 + lane, L));
    if (lane == 0) s_t[i][j] = s + double(a[i * L + j]);
  }
  __syncthreads();
  if (warp == 0) larft_by_warp(&s_t[0][0], kMaxPanelWidth + 1, s_tau, w, lane);
  __syncthreads();
  write_panel(a, Ag, a_ld, Yt + static_cast<int64_t>(blockIdx.x) * w * L, &s_t[0][0], kMaxPanelWidth + 1,
              Tm + static_cast<int64_t>(blockIdx.x) * w * w, L, w, warp, nwarps, tid, kThreads);
}

// The same panel with one warp per matrix, for batches of many small panels
// (the 32-warp block above spends most of its time at barriers on them:
// 10000 32x32 float32 QRs took 3.8 ms on the H100). Per warp, in shared
// memory: G/T, tau and the panel; only __syncwarp. Reflector j is built from
// the tail its own warp sums, then applied column by column.
template <typename T>
__global__ void householder_panel_warp_kernel(T* __restrict__ A, int64_t a_bs, int64_t a_ld, int L, int w,
                                              T* __restrict__ Yt, T* __restrict__ Tm, int nmat, int warp_bytes) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int lane = threadIdx.x & 31, wi = threadIdx.x >> 5;
  const int k = blockIdx.x * (blockDim.x >> 5) + wi;
  if (k >= nmat) return;  // whole warps only: nothing below syncs more than a warp
  double* const st = reinterpret_cast<double*>(smem_raw + static_cast<size_t>(wi) * warp_bytes);  // w x (w + 1)
  double* const s_tau = st + w * (w + 1);
  T* const a = reinterpret_cast<T*>(s_tau + w);  // L x w, column-major (ld L)
  T* const Ag = A + k * a_bs;
  for (int c = 0; c < w; ++c)
    for (int i = lane; i < L; i += 32) a[c * L + i] = Ag[c * a_ld + i];
  __syncwarp();

  for (int j = 0; j < w; ++j) {
    T* const x = a + j * L;
    const Reflector h = householder_reflector(double(x[j]), warp_sum(lane_dot(x, x, j + 1 + lane, L)));
    const double tau = h.tau, scale = h.scale;
    for (int c = j + 1; c < w; ++c) {  // y -= tau (y_j + scale x^T y) [1; scale x]
      T* const y = a + c * L;
      const double s = warp_sum(lane_dot_t(x, y, j + 1 + lane, L));
      const double wc = tau * (double(y[j]) + scale * s);
      const T ws = T(wc * scale);
      __syncwarp();  // every lane has read y[j] and x^T y before y changes
      if (lane == 0) y[j] = T(double(y[j]) - wc);
      for (int i = j + 1 + lane; i < L; i += 32) y[i] -= ws * x[i];
    }
    __syncwarp();  // column j is read by nobody any more: it becomes its reflector
    scale_to_reflector(x, j, L, scale, h.beta, lane, 32);
    if (lane == 0) s_tau[j] = tau;
    __syncwarp();
  }
  // G(i, j) = v_i^T v_j for i < j, then T in its place.
  for (int j = 1; j < w; ++j)
    for (int i = 0; i < j; ++i) {
      const double g = warp_sum(lane_dot_t(a + i * L, a + j * L, j + 1 + lane, L));
      if (lane == 0) st[i * (w + 1) + j] = g + double(a[i * L + j]);
    }
  __syncwarp();
  larft_by_warp(st, w + 1, s_tau, w, lane);
  write_panel(a, Ag, a_ld, Yt + static_cast<int64_t>(k) * w * L, st, w + 1, Tm + static_cast<int64_t>(k) * w * w, L,
              w, 0, 1, lane, 32);
}

// Per warp of householder_panel_warp_kernel: G/T and tau (double), then the panel.
size_t warp_panel_bytes(int64_t rows, int64_t w, size_t elem) {
  return static_cast<size_t>(w * (w + 2)) * sizeof(double) + static_cast<size_t>(rows * w) * elem;
}

}  // namespace

size_t householder_panel_smem(int64_t rows, int64_t w, size_t elem) {
  return static_cast<size_t>(rows * w) * elem;
}

template <typename T>
void launch_householder_panel(T* A, int64_t a_bs, int64_t a_ld, int rows, int w, T* Yt, T* Tm, int nmat,
                              cudaStream_t stream) {
  // A warp a matrix where the blocks (two an SM) would take more than one wave and a warp's panel
  // is small; otherwise the block, which spreads one matrix's steps over 32 warps.
  int dev = 0, sms = 0;
  C10_CUDA_CHECK(cudaGetDevice(&dev));
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const size_t wb = (warp_panel_bytes(rows, w, sizeof(T)) + 15) / 16 * 16;
  if (static_cast<int64_t>(nmat) > 2 * static_cast<int64_t>(sms) && rows <= kWarpPanelMaxRows &&
      wb <= kWarpPanelMaxBytes) {
    const int per_block = static_cast<int>(std::min<size_t>(8, kWarpPanelMaxBytes * 2 / wb));
    auto kernel = householder_panel_warp_kernel<T>;
    const size_t smem = wb * per_block;
    C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    kernel<<<(nmat + per_block - 1) / per_block, 32 * per_block, smem, stream>>>(A, a_bs, a_ld, rows, w, Yt, Tm, nmat,
                                                                              static_cast<int>(wb));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return;
  }
  const size_t smem = householder_panel_smem(rows, w, sizeof(T));
  auto kernel = householder_panel_kernel<T>;
  C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  kernel<<<nmat, kThreads, smem, stream>>>(A, a_bs, a_ld, rows, w, Yt, Tm);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template void launch_householder_panel<float>(float*, int64_t, int64_t, int, int, float*, float*, int, cudaStream_t);
template void launch_householder_panel<double>(double*, int64_t, int64_t, int, int, double*, double*, int,
                                               cudaStream_t);

}  // namespace cuda
}  // namespace jsvd
