// The one-launch QR of a matrix of at most 32 columns held in registers (the register level of
// batched-qr-svd-hmatrix-compression.txt): a thread block per matrix, each thread a few whole rows.
//
// Step k of the Householder QR needs, over the rows below k, x_m^T x_k for every column m: for m > k
// what the reflector does to column m, for m = k the tail's squared norm, for m < k (reflectors by
// then) the entries of S = T^{-1} = Y^T Y (the UT form that apply_wy.cu applies). So a step is a
// thread's rows times its row vector, one block-wide sum of those q values (shuffles that halve the
// values a lane holds at each stage, then a partial sum per warp through shared memory: one barrier),
// and the update of the thread's own rows. Row k reaches everyone through shared memory with the sums.
// Those sums bound it (ncu, H100, 1024 x 16 float64: 310k warp instructions a matrix, against 370k for
// the shared-memory kernel's column-per-group loops): a thread's 2 RPT N multiply-adds a step against
// ~11 N instructions of the sum, as float64 rows fill the registers at one or two a thread. So the
// planner takes it for float64 of >= 4 rows a column only (qr_precondition.cpp, docs/experiments.md).
//
// The results are launch_qr_whole's (qr_whole_smem.h): the same scaling, row order (row_order.cuh),
// column order, Y, S, R^T, and the second QR of R^T, which one warp does the same way.
#include "qr/qr_whole_regs.h"

#include <c10/cuda/CUDAException.h>
#include <c10/util/Exception.h>

#include "common/jacobi_device.cuh"
#include "qr/householder_device.cuh"
#include "qr/qr_whole_smem.h"
#include "qr/row_order.cuh"

namespace jsvd {
namespace cuda {
namespace {

constexpr unsigned kFull = 0xffffffffu;

// Block size of an instantiation: 32 columns of sums in double take 64 registers more.
constexpr int regs_threads(int n) { return n > 16 ? 256 : 512; }
// Rows a thread may hold: 64 registers of the matrix, at most 2 rows (kQrWholeMaxRows over 512
// threads; 4 float32 rows of 16 columns spilled 2 KB a thread).
constexpr int max_rows_per_thread(int n, size_t elem) {
  return static_cast<int>(256 / (n * elem)) > 2 ? 2 : static_cast<int>(256 / (n * elem));
}
// Columns of the instantiation for q, and its rows a thread for p (0: none fits).
int columns_for(int64_t q) { return q <= 8 ? 8 : q <= 16 ? 16 : 32; }
int rows_per_thread(int64_t p, int n, size_t elem) {
  const int threads = regs_threads(n);
  for (int r = 1; r <= max_rows_per_thread(n, elem); r *= 2)
    if ((p + r - 1) / r <= threads) return r;
  return 0;
}

// One halving stage of transpose_sum, and the next (a template, so that every index is a constant:
// a loop over o was not unrolled, and its run-time indices put v in local memory).
template <int O, int N>
__device__ __forceinline__ void halve(double (&v)[N], int lane) {
  if constexpr (O > 0) {
    const bool up = (lane & O) != 0;
#pragma unroll
    for (int i = 0; i < O; ++i) {
      const double lo = v[i], hi = v[i + O];
      const double give = up ? lo : hi, keep = up ? hi : lo;
      v[i] = keep + __shfl_xor_sync(kFull, give, O);
    }
    halve<O / 2>(v, lane);
  }
}

// v[0, N) summed over the warp (N <= 32, a power of two): each halving stage trades half of a lane's
// values with its partner (N - 1 shuffles in all, against 5 N for a sum per value), then the groups of
// N lanes are added. Lane l gets the total of v[l & (N - 1)].
template <int N>
__device__ __forceinline__ double transpose_sum(double (&v)[N]) {
  halve<N / 2>(v, threadIdx.x & 31);
  double s = v[0];
#pragma unroll
  for (int o = N; o < 32; o *= 2) s += __shfl_xor_sync(kFull, s, o);
  return s;
}

// v <- its sum over the block (kBlock; red: a slot per warp and value) or over the warp, the same
// in every thread (every warp adds the same partial sums in the same order). Returns the total of
// v[lane & (N - 1)].
template <int N, bool kBlock>
__device__ __forceinline__ double sum_all(double (&v)[N], double* red) {
  double t = transpose_sum<N>(v);
  if constexpr (kBlock) {
    const int lane = threadIdx.x & 31, nw = blockDim.x >> 5;
    if (lane < N) red[(threadIdx.x >> 5) * N + lane] = t;
    __syncthreads();
    t = 0;
    for (int w = 0; w < nw; ++w) t += red[w * N + (lane & (N - 1))];
  }
#pragma unroll
  for (int m = 0; m < N; ++m) v[m] = __shfl_sync(kFull, t, m);
  return t;
}

// xGEQR2 of the rows in x (a thread's rows tid + i nt; rows >= p are zero) in place, tau_k in
// s_tau[k]. kBlock false: one warp's rows (nt = 32), no barrier.
//
// The columns rotate: at step k, register column 0 holds column k, 1 .. N - k - 1 the columns right
// of it, N - k .. N - 1 the reflectors v_0 .. v_{k-1}; each step ends by moving column 0 to the end.
// So every step is the same code with constant register indices, and the loop is not unrolled: the
// unrolled steps (N copies of the body) ran from the instruction cache's misses, 3x slower than the
// shared-memory kernel at 32 columns (H100). On return column m < q is in register column
// N - q + m: [R(m, m) on row m; v_m below] and R(m, :) on row m.
//
// Where S is given, its column k (q x q, column-major): v_m^T v_k above the diagonal, 1 / tau_k on it
// (0 and 1 for the identity, tau = 0, as qr_whole_kernel writes them), a lane an entry. rowk, red:
// two buffers each (a step's parity), so that one barrier a step separates a buffer's reads from its
// next writes.
template <typename T, int N, int RPT, bool kBlock>
__device__ __forceinline__ void householder_steps(T (&x)[RPT][N], int q, double* red, double* rowk, double* s_tau,
                                                  T* S) {
  const int tid = threadIdx.x, nt = kBlock ? blockDim.x : 32, nw = blockDim.x >> 5;
#pragma unroll 1
  for (int k = 0; k < q; ++k) {
    double* const rk = rowk + (k & 1) * N;
    if (tid == k) {
#pragma unroll
      for (int j = 0; j < N; ++j) rk[j] = double(x[0][j]);
    }
    double g[N];
#pragma unroll
    for (int j = 0; j < N; ++j) g[j] = 0;
#pragma unroll
    for (int i = 0; i < RPT; ++i)
      if (tid + i * nt > k) {
        const double xk = double(x[i][0]);
#pragma unroll
        for (int j = 0; j < N; ++j) g[j] += double(x[i][j]) * xk;
      }
    const double own = sum_all<N, kBlock>(g, red + (k & 1) * nw * N);
    if constexpr (!kBlock) __syncwarp();  // (rk)
    const Reflector h = householder_reflector(rk[0], g[0]);
    const int live = N - k;  // register columns [1, live): the columns right of k
    if (h.tau != 0.0) {
      const double sc = h.scale;
#pragma unroll
      for (int j = 1; j < N; ++j) {
        const double w = j < live ? h.tau * (rk[j] + sc * g[j]) : 0.0, ws = w * sc;  // tau v^T a_j, v = [1; sc a_k]
#pragma unroll
        for (int i = 0; i < RPT; ++i)
          if (tid + i * nt > k) x[i][j] = T(double(x[i][j]) - ws * double(x[i][0]));
        if (tid == k) x[0][j] = T(rk[j] - w);
      }
#pragma unroll
      for (int i = 0; i < RPT; ++i)
        if (tid + i * nt > k) x[i][0] = T(double(x[i][0]) * sc);
    }
    if (tid == k) x[0][0] = T(h.beta);
    if (S && tid < N) {  // lane j: the entry of the column in register column j
      const int j = tid, m = j == 0 ? k : j < live ? k + j : j - live;
      const bool on = h.tau != 0.0 && (m >= k || s_tau[m] != 0.0);
      if (m < q) S[static_cast<int64_t>(k) * q + m] = m < k ? (on ? T(rk[j] + h.scale * own) : T(0))
                                                     : m == k ? T(on ? 1.0 / h.tau : 1.0) : T(0);
    }
    if (tid == 0) s_tau[k] = h.tau;  // (read by warp 0 after the next step's barrier)
#pragma unroll
    for (int i = 0; i < RPT; ++i) {
      const T first = x[i][0];
#pragma unroll
      for (int j = 0; j + 1 < N; ++j) x[i][j] = x[i][j + 1];
      x[i][N - 1] = first;
    }
  }
}

template <typename T, int N, int RPT>
__global__ void __launch_bounds__(regs_threads(N)) qr_regs_kernel(QrWholeArgs<T> a) {
  constexpr int kWarps = regs_threads(N) / 32;
  extern __shared__ __align__(16) unsigned char smem_raw[];  // row_sort: the rows' keys, then their positions
  __shared__ double red[2 * kWarps * N];
  __shared__ double rowk[2 * N];
  __shared__ double s_tau[N];
  __shared__ double d[N];
  __shared__ int col[N];
  __shared__ T s_red[32];
  __shared__ T tile[N][N + 1];  // R, for the second QR
  double* const key = reinterpret_cast<double*>(smem_raw);
  int* const ridx = reinterpret_cast<int*>(key + row_sort_length(a.p));
  const int tid = threadIdx.x, nt = blockDim.x, p = a.p, q = a.q;
  const int64_t mat = blockIdx.x, qq = static_cast<int64_t>(q) * q;
  const T* const Ak = a.A + mat * a.sb;
  auto at = [&](int r, int c) { return Ak[c * a.sc + r * a.sr]; };
  T* const Yk = a.Y + mat * p * q;

  // The rows as they are, for max|a|, the rows' keys and the columns' norms.
  T x[RPT][N];
  T mx = 0;
#pragma unroll
  for (int i = 0; i < RPT; ++i) {
    const int r = tid + i * nt;
    T rmax = 0;
    bool nan = false;
#pragma unroll
    for (int c = 0; c < N; ++c) {
      x[i][c] = r < p && c < q ? at(r, c) : T(0);
      const T v = fabs(x[i][c]);
      nan |= isnan(v);
      rmax = fmax(rmax, v);  // (NaN passes: the matrix stays non-finite and the engine flags it)
    }
    if (a.row_sort && r < p) key[r] = row_key(double(rmax), nan);
    mx = fmax(mx, rmax);
  }
  mx = block_max(mx, s_red);  // (its barriers also publish the keys)
  const T s = mx > T(0) ? mx : T(1);  // (divisions below: 1 / max|a| overflows for subnormal max|a|)
  if (tid == 0) a.scale[mat] = s;
  if (a.sort) {
    double g[N];
#pragma unroll
    for (int c = 0; c < N; ++c) g[c] = 0;
#pragma unroll
    for (int i = 0; i < RPT; ++i)
#pragma unroll
      for (int c = 0; c < N; ++c) {
        const double v = double(x[i][c] / s);
        g[c] += v * v;
      }
    sum_all<N, true>(g, red);
    if (tid == 0)
#pragma unroll
      for (int c = 0; c < N; ++c) d[c] = g[c];
    __syncthreads();
  }
  order_columns(d, q, a.sort, col, a.perm + mat * q);
  if (a.row_sort) {
    sort_rows_by_key(key, ridx, p);  // (its barriers also publish col)
    if (a.keep)
      for (int r = tid; r < p; r += nt) a.rowperm[mat * p + r] = ridx[r];
  }
  __syncthreads();
  // The rows and columns in their order, scaled (read again, from L2, where either is sorted).
  int orig[RPT];
#pragma unroll
  for (int i = 0; i < RPT; ++i) {
    const int r = tid + i * nt;
    orig[i] = a.row_sort && r < p ? ridx[r] : r;
#pragma unroll
    for (int c = 0; c < N; ++c) {
      if (a.sort || a.row_sort)
        x[i][c] = r < p && c < q ? at(orig[i], col[c]) : T(0);
      x[i][c] = x[i][c] / s;
    }
  }

  householder_steps<T, N, RPT, true>(x, q, red, rowk, s_tau, a.keep ? a.S + mat * qq : nullptr);
  __syncthreads();  // (s_tau)
  // Below, register column j holds column m = j - (N - q), none where m < 0.
  if (a.keep) {
    // Y explicit, in A's row order (as qr_whole_kernel: zero above the diagonal, one on it, a zero
    // column for tau = 0).
#pragma unroll
    for (int i = 0; i < RPT; ++i) {
      const int r = tid + i * nt;
      if (r >= p) continue;
#pragma unroll
      for (int j = 0; j < N; ++j) {
        const int m = j - (N - q);
        if (m >= 0)
          Yk[static_cast<int64_t>(m) * p + orig[i]] = s_tau[m] == 0.0 || r < m ? T(0) : r == m ? T(1) : x[i][j];
      }
    }
  }
  T* const Xk = a.X + mat * qq;
  if (!a.twice) {  // X = R^T: column i of X is row i of R, held by thread i
    if (tid < q)
#pragma unroll
      for (int j = 0; j < N; ++j) {
        const int m = j - (N - q);
        if (m >= 0) Xk[static_cast<int64_t>(tid) * q + m] = m >= tid ? x[0][j] : T(0);
      }
    return;
  }
  // R^T = Q2 R2 by warp 0: lane r takes row r of R^T (column r of R, through tile).
  if (tid < N) {
#pragma unroll
    for (int c = 0; c < N; ++c) tile[tid][c] = T(0);
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const int m = j - (N - q);
      if (m >= tid && tid < q) tile[tid][m] = x[0][j];
    }
  }
  __syncthreads();
  if (tid >= 32) return;
  T y[1][N];
#pragma unroll
  for (int m = 0; m < N; ++m) y[0][m] = tid < N ? tile[m][tid] : T(0);
  householder_steps<T, N, 1, false>(y, q, nullptr, rowk, s_tau, nullptr);
  __syncwarp();  // (s_tau)
  if (tid >= q) return;
#pragma unroll
  for (int j = 0; j < N; ++j) {
    const int m = j - (N - q);
    if (m < 0) continue;
    if (a.keep) a.Y2[mat * qq + static_cast<int64_t>(m) * q + tid] = y[0][j];
    Xk[static_cast<int64_t>(tid) * q + m] = m >= tid ? y[0][j] : T(0);  // R2^T
  }
  if (a.keep) a.tau2[mat * q + tid] = T(s_tau[tid]);
}

template <typename T, int N, int RPT>
void launch_one(const QrWholeArgs<T>& a, int64_t B, cudaStream_t stream) {
  const int threads = std::max(32, ((a.p + RPT - 1) / RPT + 31) / 32 * 32);
  const size_t smem = a.row_sort ? row_keys_smem(a.p) : 0;
  auto kernel = qr_regs_kernel<T, N, RPT>;
  allow_dynamic_smem(kernel, smem);
  kernel<<<static_cast<unsigned>(B), threads, smem, stream>>>(a);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename T, int N>
void launch_columns(int rpt, const QrWholeArgs<T>& a, int64_t B, cudaStream_t stream) {
  constexpr int kMax = max_rows_per_thread(N, sizeof(T));
  if (rpt == 1) return launch_one<T, N, 1>(a, B, stream);
  if constexpr (kMax >= 2)
    if (rpt == 2) return launch_one<T, N, 2>(a, B, stream);
  TORCH_CHECK(false, "jsvd internal: launch_qr_regs rows a thread");
}

}  // namespace

bool qr_regs_fits(int64_t p, int64_t q, size_t elem) {
  return q >= 1 && q <= 32 && p >= q && p <= kQrWholeMaxRows && rows_per_thread(p, columns_for(q), elem) > 0;
}

template <typename T>
void launch_qr_regs(const QrWholeArgs<T>& a, int64_t B, cudaStream_t stream) {
  if (B == 0) return;
  TORCH_CHECK(a.members == nullptr && qr_regs_fits(a.p, a.q, sizeof(T)) && B <= INT32_MAX,
              "jsvd internal: launch_qr_regs shapes");
  const int n = columns_for(a.q), rpt = rows_per_thread(a.p, n, sizeof(T));
  if (n == 8) return launch_columns<T, 8>(rpt, a, B, stream);
  if (n == 16) return launch_columns<T, 16>(rpt, a, B, stream);
  return launch_columns<T, 32>(rpt, a, B, stream);
}

template void launch_qr_regs<float>(const QrWholeArgs<float>&, int64_t, cudaStream_t);
template void launch_qr_regs<double>(const QrWholeArgs<double>&, int64_t, cudaStream_t);

}  // namespace cuda
}  // namespace jsvd
