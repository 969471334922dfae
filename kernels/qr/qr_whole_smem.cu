// The QR preconditioning of a small matrix in one thread block (Drmac & Veselic's xGEJSV path, as
// qr_precondition.h describes it), and the application of its reflectors to the Jacobi's vectors.
//
// qr_whole_kernel: the matrix is read into shared memory; its scaling by max|a|, the order of its
// rows (float64, row_order.cuh) and columns, the Householder QR (xGEQR2), R^T and, for float64, the
// second QR of R^T all happen there, and only X = R^T (or R2^T) and the reflectors go back: Q's in
// the UT form that apply_wy.cu applies to U, Q2's as they are. One barrier a column.
//
// apply_reflectors_kernel (V: Q2 and the column order): an output column in registers, across a
// group of lanes, takes the reflectors (in shared memory, shared by the block) last to first:
// y -= tau v (v^T y).
//
// Both give a column a group of g lanes (a power of two, about 8 rows a lane), not a warp: the
// first version's warp-wide sums of one row a lane made these kernels instruction-bound at small
// sizes (H100, 10000 32x32 float64: 2.0 ms for the QRs and 2.5 ms for the two applications, against
// 1.1 and 0.4 ms now; the Jacobi on R2^T takes 2.5: docs/robustness.md).
#include "qr/qr_whole_smem.h"

#include <c10/cuda/CUDAException.h>
#include <c10/util/Exception.h>

#include <algorithm>

#include "host_device.h"
#include "common/jacobi_device.cuh"
#include "qr/householder_device.cuh"
#include "qr/row_order.cuh"

namespace jsvd {
namespace cuda {
namespace {

constexpr int kMaxThreads = 1024, kApplyThreads = 256;

// Lanes a column: a power of two, at most 32, with at most 8 rows a lane where that allows.
JSVD_HOST_DEVICE inline int lanes_for_rows(int rows) {
  int g = 1;
  while (g < 32 && g * 8 < rows) g *= 2;
  return g;
}

// Column stride: rows padded so that the groups of a warp, reading the same rows of neighbouring
// columns, fall on different banks (as svd_smem.h's column_stride).
JSVD_HOST_DEVICE inline int qr_ld(int rows, int g) { return g >= 32 ? rows : rows + (g - rows % 32 + 32) % 32; }

JSVD_HOST_DEVICE inline int qr_whole_threads(int p, int q) {
  const int t = lanes_for_rows(p) * q;
  return t >= kMaxThreads ? kMaxThreads : (t + 31) / 32 * 32;
}

// The per-column arrays (double) and the column map (int) first, then the rows' keys and positions
// (row_order.cuh), before the matrices, 16-byte aligned.
JSVD_HOST_DEVICE inline size_t qr_whole_head(int64_t q) { return static_cast<size_t>(4 * q) * sizeof(double) + (q + 3) / 4 * 16; }

// Sum over the g lanes of a group, g known at run time (jacobi_device.cuh's group_sum: at compile
// time); every lane of the warp calls it.
__device__ __forceinline__ double lanes_sum(double v, int g) {
  for (int o = g / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// xGEQR2 of the L x n matrix a (column stride ld) by the whole block, g lanes a column. Column j
// becomes [R(0:j, j); v_j below the diagonal] (v_j(j) = 1 implied), tau_j in s_tau[j]. Step j's
// reflector comes from column j's head and the squared norm of its tail, which the group that
// updated column j in step j - 1 summed; column j - 1 is scaled to its reflector in step j, when
// nobody reads it. The products and a lane's share of a sum are in T, as in xGEQR2, the sum over the
// lanes and the tails' norms in double (householder_device.cuh's lane_dot_t).
template <typename T>
__device__ void householder_in_smem(T* a, int ld, int L, int n, int g, double* s_tail, double* s_tau,
                                    double* s_scale, double* s_beta) {
  const int tid = threadIdx.x, nt = blockDim.x, lg = tid & (g - 1), grp = tid / g, G = nt / g;
  if (tid < 32) {
    const double t = warp_sum(lane_dot(a, a, 1 + tid, L));
    if (tid == 0) s_tail[0] = t;
  }
  __syncthreads();
  for (int j = 0; j < n; ++j) {
    const T* x = a + j * ld;
    const Reflector h = begin_block_step(x, a + (j > 0 ? j - 1 : 0) * ld, j, L, s_tail, s_tau, s_scale, s_beta, tid, nt);
    const double tau = h.tau, scale = h.scale;
    // y -= tau (y_j + scale x^T y) [1; scale x] for the columns right of j; every lane runs the same
    // trips (the group sums shuffle across the warp).
    for (int base = j + 1; base < n; base += G) {
      const int c = base + grp;
      const bool on = c < n;
      if (base + (tid & ~31) / g >= n) continue;  // no column for any group of this warp (its sums need no one else)
      T* y = a + (on ? c : j) * ld;
      T sl = 0;  // a lane's share in T, the group's sum in double (see above)
      if (on)
        for (int i = j + 1 + lg; i < L; i += g) sl += x[i] * y[i];
      const double sd = lanes_sum(double(sl), g);
      const double wc = tau * (double(y[j]) + scale * sd), ws = wc * scale;
      __syncwarp();  // every lane has read y[j] before its group's lane 0 writes it
      if (on) {
        if (lg == 0) y[j] = T(double(y[j]) - wc);
        const T wt = T(ws);
        for (int i = j + 1 + lg; i < L; i += g) y[i] -= wt * x[i];
      }
      __syncwarp();
      double t = 0;  // the next reflector's tail, from the rows this group wrote
      if (c == j + 1)
        for (int i = c + 1 + lg; i < L; i += g) t += double(y[i]) * double(y[i]);
      t = lanes_sum(t, g);
      if (c == j + 1 && lg == 0) s_tail[c] = t;
    }
    __syncthreads();
  }
  scale_to_reflector(a + (n - 1) * ld, n - 1, L, s_scale[n - 1], s_beta[n - 1], tid, nt);
  __syncthreads();
}

// Copies the p x q matrix src (column-major, consecutive) into a (column stride ld), element (i, c)
// from src[from(c, i)] divided by div, kUnroll loads in flight a thread: one block fills an SM at these
// sizes, so the loads' latency, not the bandwidth, was the copy's time. A thread's elements are
// tid + n nt in column-major order, their (c, i) stepped without a division each.
constexpr int kUnroll = 8;
template <typename T, typename From>
__device__ __forceinline__ void load_matrix(T* a, int ld, const T* src, int p, int q, T div, From from) {
  const int nt = blockDim.x, dq = nt / p, dr = nt - dq * p;
  int c = threadIdx.x / p, i = threadIdx.x - c * p;
  while (c < q) {
    T v[kUnroll];
    int cu[kUnroll], iu[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      cu[u] = c;
      iu[u] = i;
      v[u] = c < q ? src[from(c, i)] : T(0);
      c += dq;
      i += dr;
      if (i >= p) {
        i -= p;
        ++c;
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (cu[u] < q) a[cu[u] * ld + iu[u]] = div == T(1) ? v[u] : v[u] / div;  // (1 / div overflows for subnormal div)
  }
}

template <typename T>
__global__ void __launch_bounds__(kMaxThreads) qr_whole_kernel(QrWholeArgs<T> args) {
  T* const X = args.X;  // (a list's X is written over its A)
  T* const __restrict__ S = args.S;
  T* const __restrict__ Y2 = args.Y2;
  T* const __restrict__ tau2 = args.tau2;
  int64_t* const __restrict__ perm = args.perm;
  int32_t* const __restrict__ rowperm = args.rowperm;
  const QrMember* const mb = args.members ? args.members + blockIdx.x : nullptr;
  const int p = mb ? mb->p : args.p, q = mb ? mb->q : args.q;
  const bool sort = args.sort, row_sort = args.row_sort, twice = args.twice, keep = args.keep;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ T s_red[32];
  double* const d = reinterpret_cast<double*>(smem_raw);  // column norms, then the tails
  double* const s_tau = d + q;
  double* const s_scale = s_tau + q;
  double* const s_beta = s_scale + q;
  int* const col = reinterpret_cast<int*>(s_beta + q);
  double* const key = reinterpret_cast<double*>(smem_raw + qr_whole_head(q));  // the rows' keys, then their positions
  int* const ridx = reinterpret_cast<int*>(key + row_sort_length(p));            // the row at each position
  const int g1 = lanes_for_rows(p), g2 = lanes_for_rows(q), ld1 = qr_ld(p, g1), ld2 = qr_ld(q, g2);
  T* const a = reinterpret_cast<T*>(smem_raw + qr_whole_head(q) + row_keys_smem(p));  // p x q, column stride ld1
  T* const x = a + static_cast<size_t>(ld1) * q;                                        // q x q, column stride ld2
  const int tid = threadIdx.x, nt = blockDim.x, lane = tid & 31, warp = tid >> 5, nw = nt >> 5;
  const int lg = tid & (g1 - 1), grp = tid / g1, G = nt / g1;
  const int64_t k = blockIdx.x;
  const int64_t qq = static_cast<int64_t>(q) * q;
  // Matrix k's offsets: W, Y, (S, Y2), (perm, tau2), rowperm and X.
  const int64_t o_y = mb ? mb->y : k * p * q, o_x = mb ? mb->x : k * qq, o_t = mb ? mb->t : k * q,
                o_r = mb ? mb->r : k * p, o_X = mb ? mb->a : k * qq;
  const T* const Ak = args.A + (mb ? mb->a : k * args.sb);
  const int64_t sc = mb ? p : args.sc, sr = mb ? 1 : args.sr;

  load_matrix(a, ld1, Ak, p, q, T(1), [=](int c, int i) { return c * sc + i * sr; });
  __syncthreads();
  // max|a| (NaN passes through fmax: a matrix with NaN stays non-finite and the engine flags it), and
  // each row's max|a_ij|, its key.
  T m = 0;
  for (int i = tid; i < p; i += nt) {
    T r = 0;
    bool nan = false;
    for (int c = 0; c < q; ++c) {
      const T v = fabs(a[c * ld1 + i]);
      nan |= isnan(v);
      r = fmax(r, v);
    }
    m = fmax(m, r);
    if (row_sort) key[i] = row_key(double(r), nan);
  }
  m = block_max(m, s_red);  // (its barriers also publish the keys)
  const T s = m > T(0) ? m : T(1);  // (a division below: 1 / max|a| overflows for subnormal max|a|)
  if (tid == 0) args.scale[k] = s;
  for (int c = warp; c < q; c += nw) {
    double t = 0;
    for (int i = lane; i < p; i += 32) {
      const double v = double(a[c * ld1 + i] / s);
      t += v * v;
    }
    t = warp_sum(t);
    if (lane == 0) d[c] = t;
  }
  __syncthreads();
  order_columns(d, q, sort, col, perm + o_t);
  if (row_sort) {
    sort_rows_by_key(key, ridx, p);  // (its barriers also publish col)
    if (keep)
      for (int r = tid; r < p; r += nt) rowperm[o_r + r] = ridx[r];
  }
  __syncthreads();
  // The rows and columns in their order, scaled (read again: from L2).
  load_matrix(a, ld1, Ak, p, q, s, [=](int c, int i) { return col[c] * sc + (row_sort ? ridx[i] : i) * sr; });
  __syncthreads();

  householder_in_smem(a, ld1, p, q, g1, d, s_tau, s_scale, s_beta);
  if (keep) {
    // Q = H_0 ... H_{q-1} = I - Y S^{-1} Y^T (the UT transform: S = T^{-1}, strictly upper Y^T Y with
    // 1 / tau_j on the diagonal; Joffrain et al., "Accumulating Householder transformations,
    // revisited", 2006), for apply_wy.cu. Y goes out explicit and in A's row order: zeros above the
    // diagonal, ones on it, and a zero column for a reflector that is the identity (tau_j = 0, where
    // S_jj = 1 keeps S invertible).
    int* const pos = reinterpret_cast<int*>(key);  // pos[i]: the position of row i
    if (row_sort)
      for (int r = tid; r < p; r += nt) pos[ridx[r]] = r;
    __syncthreads();
    T* const Yk = args.Y + o_y;
    for (int c = warp; c < q; c += nw) {
      const bool id = s_tau[c] == 0.0;
      for (int i = lane; i < p; i += 32) {
        const int r = row_sort ? pos[i] : i;
        Yk[static_cast<int64_t>(c) * p + i] = id || r < c ? T(0) : r == c ? T(1) : a[c * ld1 + r];
      }
    }
    // S's strictly upper part: y_i^T y_j over rows >= j (y_j's 1 at row j), a group of g1 lanes a pair.
    const int npairs = q * (q - 1) / 2;
    for (int base = 0; base < npairs; base += G) {
      const int t = base + grp;
      int j = static_cast<int>((1.0 + sqrt(1.0 + 8.0 * t)) / 2.0);
      while (j * (j - 1) / 2 > t) --j;
      while ((j + 1) * j / 2 <= t) ++j;
      const int i = t - j * (j - 1) / 2;  // 0 <= i < j
      const bool on = t < npairs && s_tau[min(i, q - 1)] != 0.0 && s_tau[min(j, q - 1)] != 0.0;
      T sl = 0;  // (in T, as householder_in_smem's sums)
      if (on)
        for (int r = j + 1 + lg; r < p; r += g1) sl += a[i * ld1 + r] * a[j * ld1 + r];
      const double sd = lanes_sum(double(sl), g1);
      if (t < npairs && lg == 0) S[o_x + j * q + i] = on ? T(double(a[i * ld1 + j]) + sd) : T(0);
    }
    for (int j = tid; j < q; j += nt) {
      S[o_x + j * q + j] = s_tau[j] != 0.0 ? T(1.0 / s_tau[j]) : T(1);
      for (int i = j + 1; i < q; ++i) S[o_x + j * q + i] = T(0);
    }
  }
  // x = R^T: column i of x is row i of R.
  for (int t = tid; t < q * q; t += nt) {
    const int i = t / q, r = t - i * q;
    x[i * ld2 + r] = r >= i ? a[r * ld1 + i] : T(0);
  }
  __syncthreads();
  T* const Xk = X + o_X;
  if (!twice) {
    for (int t = tid; t < q * q; t += nt) Xk[t] = x[(t / q) * ld2 + t % q];
    return;
  }
  householder_in_smem(x, ld2, q, q, g2, d, s_tau, s_scale, s_beta);
  if (keep) {
    for (int t = tid; t < q * q; t += nt) Y2[o_x + t] = x[(t / q) * ld2 + t % q];
    for (int j = tid; j < q; j += nt) tau2[o_t + j] = T(s_tau[j]);
  }
  for (int t = tid; t < q * q; t += nt) {  // R2^T
    const int i = t / q, r = t - i * q;
    Xk[t] = r >= i ? x[r * ld2 + i] : T(0);
  }
}

// R rows a lane (rows lg + g t), g lanes a column, kApplyThreads / g columns a block.
template <typename T, int R>
__global__ void __launch_bounds__(kApplyThreads)
    apply_reflectors_kernel(const T* __restrict__ Y, int L, int r, const T* __restrict__ tau, const T* __restrict__ M,
                            T* __restrict__ out, const int64_t* __restrict__ perm, int g, const QrMember* members) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int tid = threadIdx.x, nt = blockDim.x, lg = tid & (g - 1), grp = tid / g, G = nt / g;
  const int64_t k = blockIdx.x;
  // Matrix k's offsets: Y, tau, M, out and perm.
  int64_t o_y = k * L * r, o_t = k * r, o_m = k * L * L, o_out = o_m, o_p = k * L;
  if (members) {  // a list's member: L = q, and r = q reflectors (r > 0) or none
    const QrMember& mb = members[k];
    L = mb.q;
    r = r > 0 ? L : 0;
    o_y = mb.x;
    o_t = o_p = mb.t;
    o_m = mb.right;
    o_out = mb.v;
    if (static_cast<int>(blockIdx.y) * G >= L) return;  // none of its columns here (the whole block)
  }
  double* const s_tau = reinterpret_cast<double*>(smem_raw);
  T* const v = reinterpret_cast<T*>(smem_raw + (r + 1) / 2 * 16);  // L x r, column stride L
  const int64_t lr = static_cast<int64_t>(L) * r;
  for (int64_t t = tid; t < lr; t += nt) v[t] = Y[o_y + t];
  for (int h = tid; h < r; h += nt) s_tau[h] = double(tau[o_t + h]);
  __syncthreads();
  const int j = blockIdx.y * G + grp;
  const bool on = j < L;
  if (blockIdx.y * G + (tid & ~31) / g >= L) return;  // a warp without a column (after the block's barrier)
  T y[R];
#pragma unroll
  for (int t = 0; t < R; ++t) {
    const int i = lg + g * t;
    y[t] = !on || i >= L ? T(0) : M[o_m + static_cast<int64_t>(j) * L + i];
  }
  for (int h = r - 1; h >= 0; --h) {
    const double th = s_tau[h];
    if (th == 0.0) continue;  // (the same in every lane)
    const T* vh = v + static_cast<size_t>(h) * L;
    T cf[R];  // v's entries in this lane's rows: 0 above row h, 1 at h
    double sd = 0;
#pragma unroll
    for (int t = 0; t < R; ++t) {
      const int i = lg + g * t;
      cf[t] = i > h && i < L ? vh[i] : T(i == h ? 1 : 0);
      sd += double(cf[t]) * double(y[t]);
    }
    const double w = th * lanes_sum(sd, g);
#pragma unroll
    for (int t = 0; t < R; ++t) y[t] = T(double(y[t]) - w * double(cf[t]));
  }
  if (!on) return;
  T* const oj = out + o_out + static_cast<int64_t>(j) * L;
#pragma unroll
  for (int t = 0; t < R; ++t) {
    const int i = lg + g * t;
    if (i < L) oj[perm ? perm[o_p + i] : i] = y[t];
  }
}

// A list's members' S times their scales, a block a member.
template <typename T>
__global__ void scale_s_list_kernel(T* __restrict__ S, const T* __restrict__ scale, const QrMember* __restrict__ members) {
  const QrMember& m = members[blockIdx.x];
  const T s = scale[blockIdx.x];
  for (int j = threadIdx.x; j < m.q; j += blockDim.x) S[m.s + j] *= s;
}

// Rows a lane of the application: 8, or 16 or 32 for 256 to 1024 rows (qr_whole_fits).
int apply_rows_per_lane(int L) { return L <= 256 ? 8 : L <= 512 ? 16 : 32; }

}  // namespace

size_t qr_whole_smem(int64_t p, int64_t q, size_t elem) {
  const int ld1 = qr_ld(static_cast<int>(p), lanes_for_rows(static_cast<int>(p)));
  const int ld2 = qr_ld(static_cast<int>(q), lanes_for_rows(static_cast<int>(q)));
  return qr_whole_head(q) + row_keys_smem(static_cast<int>(p)) + static_cast<size_t>(ld1 * q + ld2 * q) * elem;
}

size_t apply_reflectors_smem(int64_t L, int64_t r, size_t elem) {
  return static_cast<size_t>((r + 1) / 2 * 16) + static_cast<size_t>(L * r) * elem;
}

bool qr_whole_fits(int64_t p, int64_t q, size_t elem, size_t smem_per_block) {
  // (the factorisation kernel's own s_red counts against the limit too)
  return p <= kQrWholeMaxRows && qr_whole_smem(p, q, elem) + 32 * sizeof(double) <= smem_per_block &&
         apply_reflectors_smem(q, q, elem) <= smem_per_block && apply_wy_smem(p, q, elem) <= smem_per_block;
}

template <typename T>
void launch_qr_whole(const QrWholeArgs<T>& a, int64_t B, cudaStream_t stream) {
  if (B == 0) return;
  TORCH_CHECK(a.members == nullptr && a.p >= a.q && a.q >= 1 && a.p <= kQrWholeMaxRows && B <= INT32_MAX, "jsvd internal: launch_qr_whole shapes");
  const size_t smem = qr_whole_smem(a.p, a.q, sizeof(T));
  auto kernel = qr_whole_kernel<T>;
  allow_dynamic_smem(kernel, smem);
  kernel<<<static_cast<unsigned>(B), qr_whole_threads(a.p, a.q), smem, stream>>>(a);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename T>
void launch_apply_reflectors(const T* Y, int L, int r, const T* tau, const T* M, T* out, const int64_t* perm, int64_t B,
                             cudaStream_t stream) {
  if (B == 0 || L == 0) return;
  TORCH_CHECK(r <= L && L <= kQrWholeMaxRows && B <= INT32_MAX, "jsvd internal: launch_apply_reflectors shapes");
  // Blocks of at most kApplyThreads, no more lanes than the columns take (idle groups still run the loop).
  const int g = lanes_for_rows(L), threads = std::min(kApplyThreads, (g * L + 31) / 32 * 32), per_block = threads / g;
  const size_t smem = apply_reflectors_smem(L, r, sizeof(T));
  const dim3 grid(static_cast<unsigned>(B), static_cast<unsigned>((L + per_block - 1) / per_block));
  auto go = [&](auto kernel) {
    allow_dynamic_smem(kernel, smem);
    kernel<<<grid, threads, smem, stream>>>(Y, L, r, tau, M, out, perm, g, nullptr);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  };
  switch (apply_rows_per_lane(L)) {
    case 8: return go(apply_reflectors_kernel<T, 8>);
    case 16: return go(apply_reflectors_kernel<T, 16>);
    default: return go(apply_reflectors_kernel<T, 32>);
  }
}

QrListLaunch qr_list_launch(const QrMember* dev, const std::vector<QrMember>& host, size_t elem, bool row_sort) {
  QrListLaunch l;
  l.members = dev;
  l.count = static_cast<int64_t>(host.size());
  for (const QrMember& m : host) {
    TORCH_CHECK(m.p >= m.q && m.q >= 1 && m.p <= kQrWholeMaxRows, "jsvd internal: a list member the one-launch QR cannot take");
    l.max_p = std::max(l.max_p, m.p);
    l.max_q = std::max(l.max_q, m.q);
    l.max_uc = std::max(l.max_uc, m.uc);
    l.qr_threads = std::max(l.qr_threads, qr_whole_threads(m.p, m.q));
    // (per member: a row's padding, qr_ld, is not monotone in the rows)
    l.qr_smem = std::max(l.qr_smem, qr_whole_smem(m.p, m.q, elem));
    l.wy_smem = std::max(l.wy_smem, apply_wy_smem(row_sort ? m.p : 0, m.q, elem));
  }
  return l;
}

template <typename T>
void launch_qr_whole_list(const QrWholeArgs<T>& a, const QrListLaunch& l, cudaStream_t stream) {
  if (l.count == 0) return;
  TORCH_CHECK(a.members == l.members && l.count <= INT32_MAX, "jsvd internal: launch_qr_whole_list");
  auto kernel = qr_whole_kernel<T>;
  allow_dynamic_smem(kernel, l.qr_smem);
  kernel<<<static_cast<unsigned>(l.count), l.qr_threads, l.qr_smem, stream>>>(a);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename T>
void launch_apply_reflectors_list(const T* Y2, bool twice, const T* tau2, const T* Mr, T* out, const int64_t* perm,
                                  const QrListLaunch& l, cudaStream_t stream) {
  if (l.count == 0) return;
  // The largest member's launch: every smaller one's columns fit its groups (R g >= L).
  const int L = l.max_q, g = lanes_for_rows(L), threads = std::min(kApplyThreads, (g * L + 31) / 32 * 32),
            per_block = threads / g;
  const size_t smem = apply_reflectors_smem(L, twice ? L : 0, sizeof(T));
  const dim3 grid(static_cast<unsigned>(l.count), static_cast<unsigned>((L + per_block - 1) / per_block));
  auto go = [&](auto kernel) {
    allow_dynamic_smem(kernel, smem);
    kernel<<<grid, threads, smem, stream>>>(Y2, L, twice ? L : 0, tau2, Mr, out, perm, g, l.members);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  };
  switch (apply_rows_per_lane(L)) {
    case 8: return go(apply_reflectors_kernel<T, 8>);
    case 16: return go(apply_reflectors_kernel<T, 16>);
    default: return go(apply_reflectors_kernel<T, 32>);
  }
}

template <typename T>
void launch_scale_s_list(T* S, const T* scale, const QrListLaunch& l, cudaStream_t stream) {
  if (l.count == 0) return;
  scale_s_list_kernel<T><<<static_cast<unsigned>(l.count), std::min(256, (l.max_q + 31) / 32 * 32), 0, stream>>>(
      S, scale, l.members);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

#define JSVD_QR_LIST_INSTANTIATE(T)                                                                            \
  template void launch_qr_whole_list<T>(const QrWholeArgs<T>&, const QrListLaunch&, cudaStream_t);             \
  template void launch_apply_reflectors_list<T>(const T*, bool, const T*, const T*, T*, const int64_t*,        \
                                                const QrListLaunch&, cudaStream_t);                            \
  template void launch_scale_s_list<T>(T*, const T*, const QrListLaunch&, cudaStream_t);
JSVD_QR_LIST_INSTANTIATE(float)
JSVD_QR_LIST_INSTANTIATE(double)
#undef JSVD_QR_LIST_INSTANTIATE

template void launch_qr_whole<float>(const QrWholeArgs<float>&, int64_t, cudaStream_t);
template void launch_qr_whole<double>(const QrWholeArgs<double>&, int64_t, cudaStream_t);
template void launch_apply_reflectors<float>(const float*, int, int, const float*, const float*, float*, const int64_t*,
                                             int64_t, cudaStream_t);
template void launch_apply_reflectors<double>(const double*, int, int, const double*, const double*, double*,
                                              const int64_t*, int64_t, cudaStream_t);

}  // namespace cuda
}  // namespace jsvd
