// U = P_r^T Q [M 0; 0 I] for the one-launch QR (qr_whole_smem.h), Q = I - Y_s S^{-1} Y_s^T in the
// UT form (Joffrain et al. 2006; Y_s = P_r Y, the reflectors in the sorted rows' order), as a GEMM
// with a small inner dimension:
//   U = E - Y Z,   Z = S^{-1} W,   W = Y_s^T [M 0; 0 I],   E = P_r^T [M 0; 0 I],
// a block per matrix and CB columns of U. W and Z are q x CB, in shared memory (column c < q of W is
// Y_1^T M_c, Y_1 the top q x q of Y_s; beyond, the row c of Y_s); then every row of U is the row of Y
// times Z, streamed from global memory to global memory. It replaced the application of the q
// reflectors one after the other to each column of U, which held all of Y in shared memory (one
// block an SM) and whose loads took most of its time (H100, 1000 x 1024x16 float64: 0.68 ms).
#include <c10/cuda/CUDAException.h>
#include <c10/util/Exception.h>

#include <algorithm>

#include "common/jacobi_device.cuh"
#include "qr/qr_whole_smem.h"

namespace jsvd {
namespace cuda {
namespace {

constexpr int kWyThreads = 256;
// Columns a block: 16 (32 took 254 registers a thread); rows of Y a thread loads at once.
constexpr int kWyColumns = 16;
constexpr int kWyRows = 4;

// W's rows, q padded to whole loads of kWyRows (the padding rows are zero).
__host__ __device__ inline int padded_rows(int q) { return (q + kWyRows - 1) / kWyRows * kWyRows; }

template <typename T, int CB>
__global__ void __launch_bounds__(kWyThreads, 2)
    apply_wy_kernel(const T* __restrict__ Y, const T* __restrict__ S, const int32_t* __restrict__ rowperm,
                    const T* __restrict__ M, T* __restrict__ out, int p, int q, int nc, const QrMember* members) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const QrMember* const mb = members ? members + blockIdx.x : nullptr;
  if (mb) {  // a list's member: its shape (the launch is the largest member's)
    p = mb->p;
    q = mb->q;
    nc = mb->uc;
    if (static_cast<int>(blockIdx.y) * CB >= nc) return;  // none of its columns here (the whole block)
  }
  const int qp = padded_rows(q);
  double* const w = reinterpret_cast<double*>(smem_raw);  // qp x CB, row j at j * CB: W, then Z (zero below q)
  T* const sm = reinterpret_cast<T*>(w + qp * CB);         // q x q: Y_1, then S
  T* const mc = sm + q * q;                                // q x CB, row r at r * CB: the block's columns of M
  int* const pos = reinterpret_cast<int*>(mc + q * CB);    // pos[i]: the position of row i (rowperm)
  const int tid = threadIdx.x, nt = blockDim.x;
  const int64_t k = blockIdx.x, pq = static_cast<int64_t>(p) * q, qq = static_cast<int64_t>(q) * q;
  const int c0 = blockIdx.y * CB, cn = min(CB, nc - c0);
  // Matrix k's Y, S, M, U and rows' order.
  const T* const Yk = Y + (mb ? mb->y : k * pq);
  const T* const Sk = S + (mb ? mb->x : k * qq);
  const T* const Mk = M + (mb ? mb->left : k * qq);
  T* const Uk = out + (mb ? mb->u : k * nc * p);
  const int32_t* const rp = rowperm ? rowperm + (mb ? mb->r : k * p) : nullptr;
  auto row = [&](int r) { return rp ? rp[r] : r; };  // the row at position r

  if (rp)
    for (int r = tid; r < p; r += nt) pos[rp[r]] = r;
  for (int t = tid; t < q * q; t += nt) {  // Y_1, column-major: sm[j * q + r] = Y_s(r, j)
    const int j = t / q, r = t - j * q;
    sm[t] = Yk[static_cast<int64_t>(j) * p + row(r)];
  }
  for (int t = tid; t < q * CB; t += nt) {  // the block's columns of M
    const int r = t / CB, c = c0 + t - r * CB;
    mc[t] = c < q && c < c0 + cn ? Mk[c * q + r] : T(0);
  }
  __syncthreads();
  for (int t = tid; t < qp * CB; t += nt) {
    const int j = t / CB, cl = t - j * CB, c = c0 + cl;
    double v = 0;
    if (cl < cn && j < q) {
      if (c < q) {
        double v1 = 0;  // (two chains)
        int r = 0;
        for (; r + 1 < q; r += 2) {
          v += double(sm[j * q + r]) * double(mc[r * CB + cl]);
          v1 += double(sm[j * q + r + 1]) * double(mc[(r + 1) * CB + cl]);
        }
        if (r < q) v += double(sm[j * q + r]) * double(mc[r * CB + cl]);
        v += v1;
      } else {
        v = double(Yk[static_cast<int64_t>(j) * p + row(c)]);
      }
    }
    w[t] = v;
  }
  __syncthreads();
  for (int t = tid; t < q * q; t += nt) sm[t] = Sk[t];
  __syncthreads();
  // Z = S^{-1} W by back substitution, a thread a column (S upper triangular, column-major).
  if (tid < cn)
    for (int j = q - 1; j >= 0; --j) {
      double z = w[j * CB + tid];
      for (int l = j + 1; l < q; ++l) z -= double(sm[l * q + j]) * w[l * CB + tid];
      w[j * CB + tid] = z / double(sm[j * q + j]);
    }
  __syncthreads();
  for (int i = tid; i < p; i += nt) {
    double acc[CB];
#pragma unroll
    for (int cl = 0; cl < CB; ++cl) acc[cl] = 0;
    for (int j0 = 0; j0 < q; j0 += kWyRows) {  // (kWyRows loads in flight; W's padding rows are zero)
      T y[kWyRows];
#pragma unroll
      for (int u = 0; u < kWyRows; ++u) y[u] = j0 + u < q ? Yk[static_cast<int64_t>(j0 + u) * p + i] : T(0);
#pragma unroll
      for (int u = 0; u < kWyRows; ++u)
#pragma unroll
        for (int cl = 0; cl < CB; ++cl) acc[cl] += double(y[u]) * w[(j0 + u) * CB + cl];
    }
    const int r = rp ? pos[i] : i;
#pragma unroll
    for (int cl = 0; cl < CB; ++cl) {
      const int c = c0 + cl;
      if (cl < cn) {
        const double e = c < q ? (r < q ? double(mc[r * CB + cl]) : 0.0) : (r == c ? 1.0 : 0.0);
        Uk[static_cast<int64_t>(c) * p + i] = T(e - acc[cl]);
      }
    }
  }
}

}  // namespace

size_t apply_wy_smem(int64_t p, int64_t q, size_t elem) {
  return static_cast<size_t>(padded_rows(static_cast<int>(q)) * kWyColumns) * sizeof(double) + static_cast<size_t>(q * kWyColumns + q * q) * elem +
         static_cast<size_t>(p) * sizeof(int);
}

template <typename T>
void launch_apply_wy(const T* Y, const T* S, const int32_t* rowperm, const T* M, T* out, int p, int q, int nc,
                     int64_t B, cudaStream_t stream) {
  if (B == 0 || nc == 0) return;
  TORCH_CHECK(q >= 1 && q <= p && B <= INT32_MAX, "jsvd internal: launch_apply_wy shapes");
  constexpr int cb = kWyColumns;
  const size_t smem = apply_wy_smem(rowperm ? p : 0, q, sizeof(T));
  const dim3 grid(static_cast<unsigned>(B), static_cast<unsigned>((nc + cb - 1) / cb));
  // A thread a row, up to kWyThreads (small matrices: many blocks an SM).
  const int threads = std::min(kWyThreads, std::max(32, (p + 31) / 32 * 32));
  auto kernel = apply_wy_kernel<T, cb>;
  allow_dynamic_smem(kernel, smem);
  kernel<<<grid, threads, smem, stream>>>(Y, S, rowperm, M, out, p, q, nc, nullptr);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename T>
void launch_apply_wy_list(const T* Y, const T* S, const int32_t* rowperm, const T* Ml, T* out, const QrListLaunch& l,
                          cudaStream_t stream) {
  if (l.count == 0) return;
  constexpr int cb = kWyColumns;
  const dim3 grid(static_cast<unsigned>(l.count), static_cast<unsigned>((l.max_uc + cb - 1) / cb));
  const int threads = std::min(kWyThreads, std::max(32, (l.max_p + 31) / 32 * 32));
  auto kernel = apply_wy_kernel<T, cb>;
  allow_dynamic_smem(kernel, l.wy_smem);
  kernel<<<grid, threads, l.wy_smem, stream>>>(Y, S, rowperm, Ml, out, 0, 0, 0, l.members);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template void launch_apply_wy<float>(const float*, const float*, const int32_t*, const float*, float*, int, int, int,
                                     int64_t, cudaStream_t);
template void launch_apply_wy_list<float>(const float*, const float*, const int32_t*, const float*, float*,
                                          const QrListLaunch&, cudaStream_t);
template void launch_apply_wy_list<double>(const double*, const double*, const int32_t*, const double*, double*,
                                           const QrListLaunch&, cudaStream_t);
template void launch_apply_wy<double>(const double*, const double*, const int32_t*, const double*, double*, int, int,
                                      int, int64_t, cudaStream_t);

}  // namespace cuda
}  // namespace jsvd
