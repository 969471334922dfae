// The GEMM level's own kernels (gemm_level.h): copies between the engine's
// buffers and the float64 work buffers, the GEMMs' pointer tables, and the
// pairs' Gram EVD (step 2).
#include "levels/gemm/gemm_level.h"

#include <c10/cuda/CUDAException.h>

#include "common/round_robin.h"
#include "levels/gram/gram_evd.cuh"

namespace jsvd {
namespace cuda {
namespace {

// in: the matrix, zero-padded, into the work buffer, and V = I; else the
// work buffer back into A and the V workspace (the padding dropped: after
// whole sweeps every column is in its own slot again).
template <typename T>
__global__ void copy_kernel(EngineArgs<T> args, const int32_t* mats, GemmShape g, double* xa, double* xv, bool in) {
  const int b = blockIdx.y;
  const MatrixDesc md = matrix_desc(args, list_at(mats, b));
  const int64_t m = g.m, n = g.n, mp = g.m_pad, np = g.n_pad;
  T* A = args.A + md.a_off;
  double* X = xa + b * mp * np;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < mp * np; idx += gridDim.x * int64_t(blockDim.x)) {
    const int64_t j = idx / mp, i = idx - j * mp;
    const bool real = i < m && j < n;
    if (in)
      X[idx] = real ? static_cast<double>(A[j * m + i]) : 0.0;
    else if (real)
      A[j * m + i] = static_cast<T>(X[idx]);
  }
  if (!args.Vw) return;  // (V not wanted)
  T* Vw = args.Vw + md.v_off;
  double* Y = xv + b * np * np;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < np * np; idx += gridDim.x * int64_t(blockDim.x)) {
    const int64_t j = idx / np, i = idx - j * np;
    if (in)
      Y[idx] = i == j ? 1.0 : 0.0;
    else if (i < n && j < n)
      Vw[j * n + i] = static_cast<T>(Y[idx]);
  }
}

// Table layout (pointers, NG = nmats P split, NU = 2 nmats P):
//   gram_a[2][NG], gram_c[NG], upd_a[2][NU], upd_j[NU], upd_c[2][NU], vupd_a[2][NU], vupd_c[2][NU]
__global__ void tables_kernel(GemmShape g, int nmats, double* xa0, double* xa1, double* xv0, double* xv1,
                              double* gram, double* rot, void** t) {
  const int64_t P = g.pairs, s = g.split, c = g.c(), w = g.w, mp = g.m_pad, np = g.n_pad;
  const int64_t NG = nmats * P * s, NU = 2 * nmats * P;
  double* xa[2] = {xa0, xa1};
  double* xv[2] = {xv0, xv1};
  void** gram_a = t;
  void** gram_c = gram_a + 2 * NG;
  void** upd_a = gram_c + NG;
  void** upd_j = upd_a + 2 * NU;
  void** upd_c = upd_j + NU;
  void** vupd_a = upd_c + 2 * NU;
  void** vupd_c = vupd_a + 2 * NU;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < NG; e += gridDim.x * int64_t(blockDim.x)) {
    const int64_t pair = e / s, r = e - pair * s;  // pair = b P + p: its 2w columns start at pair c mp
    for (int t2 = 0; t2 < 2; ++t2) gram_a[t2 * NG + e] = xa[t2] + pair * c * mp + r * g.chunk();
    gram_c[e] = gram + e * c * c;
  }
  // Update u = 2 (b P + p) + h: half h of pair p's result goes to the slot
  // whose circle_source is slot 2p + h.
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < NU; e += gridDim.x * int64_t(blockDim.x)) {
    const int64_t b = e / (2 * P), d = e - b * 2 * P;  // d: the destination slot
    const int64_t src = P == 1 ? d : circle_source(static_cast<int>(d), static_cast<int>(P));  // (one pair: it stays)
    const int64_t pair = b * P + src / 2, h = src % 2;
    for (int t2 = 0; t2 < 2; ++t2) {
      upd_a[t2 * NU + e] = xa[t2] + pair * c * mp;
      upd_c[t2 * NU + e] = xa[1 - t2] + b * mp * np + d * w * mp;
      if (xv0) {
        vupd_a[t2 * NU + e] = xv[t2] + pair * c * np;
        vupd_c[t2 * NU + e] = xv[1 - t2] + b * np * np + d * w * np;
      }
    }
    upd_j[e] = rot + pair * c * c + h * w * c;
  }
}

// A 64 x 64 EVD is latency-bound (63 dependent steps a sweep, one block a
// pair, a step's pairs only): a thread per 4 elements.
constexpr int kEvdThreads = 1024;

template <typename T>
__global__ void __launch_bounds__(kEvdThreads)
    pair_evd_kernel(EngineArgs<T> args, const int32_t* mats, GemmShape g, const double* gram, double* rot, int inner_sweeps) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int64_t pair = blockIdx.x, P = g.pairs;
  const int k = list_at(mats, static_cast<int>(pair / P));
  const int c = static_cast<int>(g.c()), cc = c * c, s = static_cast<int>(g.split);
  double* J = rot + pair * cc;
  EvdSmem e;
  carve_evd(smem_raw, c, e);
  const bool done = args.state[k].converged;
  for (int idx = threadIdx.x; idx < cc; idx += blockDim.x) {
    double v = 0;
    if (!done)
      for (int r = 0; r < s; ++r) v += gram[(pair * s + r) * cc + idx];
    e.B[idx] = v;
    e.J[idx] = idx / c == idx % c ? 1.0 : 0.0;
  }
  __syncthreads();
  // (the same tests and thresholds as the Gram EVD level)
  if (!done) gram_pair_evd<T>(e, c, static_cast<int>(g.m), args.tol, args.Vw != nullptr, /*f64_data=*/true, inner_sweeps, &args.state[k]);
  for (int idx = threadIdx.x; idx < cc; idx += blockDim.x) J[idx] = e.J[idx];
}

}  // namespace

template <typename T>
void launch_gemm_copy(const EngineArgs<T>& args, const int32_t* mats, int nmats, const GemmShape& g, double* xa,
                      double* xv, bool in, cudaStream_t stream) {
  const int64_t per = g.m_pad * g.n_pad;
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>((per + 255) / 256, 4096)), nmats);
  copy_kernel<T><<<grid, 256, 0, stream>>>(args, mats, g, xa, xv, in);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void launch_gemm_tables(const GemmShape& g, int nmats, double* const* xa, double* const* xv, double* gram,
                        double* rot, void** tables, cudaStream_t stream) {
  const int64_t n = std::max<int64_t>(nmats * g.pairs * g.split, 2 * nmats * g.pairs);
  tables_kernel<<<static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 1024)), 256, 0, stream>>>(
      g, nmats, xa[0], xa[1], xv[0], xv[1], gram, rot, tables);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename T>
void launch_gemm_pair_evd(const EngineArgs<T>& args, const int32_t* mats, int nmats, const GemmShape& g,
                          const double* gram, double* rot, int inner_sweeps, cudaStream_t stream) {
  const size_t smem = evd_smem_bytes(g.c());
  auto kernel = pair_evd_kernel<T>;
  allow_dynamic_smem(kernel, smem);
  kernel<<<static_cast<unsigned>(nmats * g.pairs), kEvdThreads, smem, stream>>>(args, mats, g, gram, rot, inner_sweeps);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

#define JSVD_GEMM_LEVEL(T)                                                                                        \
  template void launch_gemm_copy<T>(const EngineArgs<T>&, const int32_t*, int, const GemmShape&, double*, double*, \
                                    bool, cudaStream_t);                                                          \
  template void launch_gemm_pair_evd<T>(const EngineArgs<T>&, const int32_t*, int, const GemmShape&, const double*, \
                                        double*, int, cudaStream_t);
JSVD_GEMM_LEVEL(float)
JSVD_GEMM_LEVEL(double)
#undef JSVD_GEMM_LEVEL

}  // namespace cuda
}  // namespace jsvd
