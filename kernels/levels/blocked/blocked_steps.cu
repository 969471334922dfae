// The per-matrix steps around the sweeps of the blocked levels, and the
// completion of U: prologue (scale, V = I), end of sweep (convergence
// bookkeeping on the device), finalisation (S, U, V sorted by descending S),
// and the orthonormal completion of U columns that carry no direction.
// W-cycle paper Algorithm 1 (one-sided Jacobi on column blocks) and Algorithm 2
// step 2 (a matrix that does not fit whole goes down a level, into block pairs).
#include "levels/blocked/blocked_steps.h"

#include "common/jacobi_device.cuh"
#include "core.h"  // converged_by_bound

#include <c10/cuda/CUDAException.h>

#include <algorithm>

namespace jsvd {
namespace cuda {
namespace {

// The per-matrix passes over A, V and U are spread over the whole GPU: a warp
// per column, kPassCols columns per block, blocks (matrix, column group). One
// block per matrix used to do them, which left a single large matrix with one
// busy SM for a good part of the call (docs/kernel-notes.md).
constexpr int kPassThreads = 256;
constexpr int kPassCols = kPassThreads / 32;

// f(c) for each of this warp's columns c < q.
template <typename F>
__device__ __forceinline__ void for_warp_columns(int q, F f) {
  const int warp = threadIdx.x >> 5;
  for (int c = blockIdx.y * kPassCols + warp; c < q; c += gridDim.y * kPassCols) f(c);
}

dim3 pass_grid(int n, int64_t max_q) {
  const int64_t groups = std::min<int64_t>((max_q + kPassCols - 1) / kPassCols, 65535);
  return dim3(static_cast<unsigned>(n), static_cast<unsigned>(groups));
}

// Prologue, pass 1: max|a| and the non-finite check of each matrix, folded
// into its zeroed state by atomics: scale takes max|a| (the bits of
// non-negative doubles order as unsigned integers), converged the flag.
template <typename T>
__global__ void __launch_bounds__(kPassThreads) amax_kernel(EngineArgs<T> args, const int32_t* mats) {
  __shared__ T red[32];
  const int k = list_at(mats, blockIdx.x);
  const MatrixDesc md = matrix_desc(args, k);
  const int lane = threadIdx.x & 31;
  int bad = 0;
  T amax = 0;
  for_warp_columns(md.q, [&](int c) {
    const T* x = args.A + md.a_off + static_cast<int64_t>(c) * md.p;
#pragma unroll 4
    for (int r = lane; r < md.p; r += 32) {
      const T v = x[r];
      bad |= !isfinite(v);
      amax = fmax(amax, fabs(v));  // fmax drops NaN: amax stays a number
    }
  });
  bad = __syncthreads_or(bad);
  amax = block_max(amax, red);
  if (threadIdx.x == 0) {
    MatrixState& st = args.state[k];
    atomicMax(reinterpret_cast<unsigned long long*>(&st.scale),
              static_cast<unsigned long long>(__double_as_longlong(static_cast<double>(amax))));
    if (bad) atomicOr(&st.converged, 1);
  }
}

// Prologue, pass 2: divide by max|a| (not a non-finite or zero matrix), V
// workspace = I, info.
template <typename T>
__global__ void __launch_bounds__(kPassThreads) scale_kernel(EngineArgs<T> args, const int32_t* mats) {
  const int k = list_at(mats, blockIdx.x);
  const MatrixDesc md = matrix_desc(args, k);
  const int lane = threadIdx.x & 31;
  const double amax = args.state[k].scale;
  const bool bad = args.state[k].converged != 0;
  if (!bad && amax > 0) {
    const T div = static_cast<T>(amax);  // (a division: 1 / max|a| overflows for subnormal max|a|)
    for_warp_columns(md.q, [&](int c) {
      T* x = args.A + md.a_off + static_cast<int64_t>(c) * md.p;
#pragma unroll 4
      for (int r = lane; r < md.p; r += 32) x[r] /= div;
    });
  }
  if (args.Vw) {  // (V wanted)
    for_warp_columns(md.q, [&](int c) {
      T* v = args.Vw + md.v_off + static_cast<int64_t>(c) * md.q;
#pragma unroll 4
      for (int r = lane; r < md.q; r += 32) v[r] = r == c ? T(1) : T(0);
    });
  }
  if (blockIdx.y == 0 && threadIdx.x == 0) args.info[k] = bad ? -2 : 0;
}

// One thread per matrix: a sweep that rotated nothing means convergence, and so
// does one after which xGESVJ's bound holds (`bound`, where the matrix's level
// tracks it: float64 only; converged_by_bound, core.h).
template <typename T>
__global__ void end_sweep_kernel(EngineArgs<T> args, const int32_t* mats, int n, int32_t* active, bool bound) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  const int k = list_at(mats, t);
  MatrixState& st = args.state[k];
  if (!st.converged) {
    st.sweeps += 1;
    bool done = !st.rotated;
    if (!done && bound && st.tracked && st.sweeps > 1) {
      const MatrixDesc md = matrix_desc(args, k);
      done = converged_by_bound(__int_as_float(st.cos_bits), __int_as_float(st.sin_bits), md.q,
                                convergence_tol<T>(args.tol, md.p));
    }
    if (done) st.converged = 1;
    else if (active) atomicAdd(active, 1);
  }
  st.rotated = 0;
  st.cos_bits = 0;
  st.sin_bits = 0;
}

// Finalisation, pass 1: the exact squared norm of every column.
template <typename T>
__global__ void __launch_bounds__(kPassThreads)
    column_norms_kernel(EngineArgs<T> args, const int32_t* mats, double* norms) {
  const int k = list_at(mats, blockIdx.x);
  const MatrixDesc md = matrix_desc(args, k);
  const int lane = threadIdx.x & 31;
  for_warp_columns(md.q, [&](int c) {
    const T* x = args.A + md.a_off + static_cast<int64_t>(c) * md.p;
    double acc = 0;
#pragma unroll 4
    for (int r = lane; r < md.p; r += 32) acc += double(x[r]) * double(x[r]);
    acc = group_sum<32>(acc);
    if (lane == 0) norms[md.s_off + c] = acc;
  });
}

// Finalisation, pass 2, one block per matrix: S descending, each column's
// position in it (order), info and rank. Dynamic smem: q doubles (launch_finalize rounds it up).
template <typename T>
__global__ void order_kernel(EngineArgs<T> args, const int32_t* mats, const double* norms, int32_t* order) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ int s_rank;
  const int k = list_at(mats, blockIdx.x);
  const MatrixDesc md = matrix_desc(args, k);
  if (args.info[k] == -2) {  // the prologue found NaN or Inf
    write_non_finite(args, md, k, threadIdx.x, blockDim.x);
    return;
  }
  double* d = reinterpret_cast<double*>(smem_raw);
  for (int l = threadIdx.x; l < md.q; l += blockDim.x) d[l] = norms[md.s_off + l];
  if (threadIdx.x == 0) s_rank = 0;
  __syncthreads();
  const MatrixState st = args.state[k];
  const double scale = st.scale > 0 ? st.scale : 1.0;  // a zero matrix was not scaled
  write_descending_s(d, md.q, md.p, scale, args.S + md.s_off, order + md.s_off, &s_rank, args.info + k, args.rank + k,
                     st.converged ? st.sweeps : -1);
}

// Finalisation, pass 3: U = the normalised columns and V = the workspace's
// columns, each at its place in S's order.
template <typename T>
__global__ void __launch_bounds__(kPassThreads)
    scatter_kernel(EngineArgs<T> args, const int32_t* mats, const double* norms, const int32_t* order) {
  const int k = list_at(mats, blockIdx.x);
  const MatrixDesc md = matrix_desc(args, k);
  if (args.info[k] == -2) return;  // order_kernel wrote NaN
  const int lane = threadIdx.x & 31, p = md.p, q = md.q;
  const double tiny = tiny_norm<T>(p);
  for_warp_columns(q, [&](int l) {
    const double nrm = sqrt(norms[md.s_off + l]);
    const T inv = nrm > tiny ? static_cast<T>(1.0 / nrm) : T(0);  // completed later
    const int o = order[md.s_off + l];
    const T* x = args.A + md.a_off + static_cast<int64_t>(l) * p;
    T* u = args.U + md.u_off + static_cast<int64_t>(o) * p;
#pragma unroll 4
    for (int r = lane; r < p; r += 32) u[r] = x[r] * inv;
    if (!args.V) return;  // (U only: SvdOptions::want_v)
    const T* vw = args.Vw + md.v_off + static_cast<int64_t>(l) * q;
    T* v = args.V + md.v_off + static_cast<int64_t>(o) * q;
#pragma unroll 4
    for (int r = lane; r < q; r += 32) v[r] = vw[r];
  });
}

// The block, for a matrix whose rank < ncols (complete_kernel sends no other): fills U's columns rank ..
// ncols-1 (which carry no direction) with an orthonormal basis of the complement of the first rank
// columns. Greedy, NB columns a round: the round's candidates are the unit vectors e_t whose components
// outside the current span are largest (the projector's diagonal, kept in smem), each at least half the
// largest; they are orthogonalised against U twice together ("twice is enough"; U read once a pass for
// all of them, where one candidate a round read it four times a column: a rank-one 1024² float32 matrix
// took 355 ms, H100, docs/experiments.md stop 42), then among themselves by CholeskyQR twice, a
// candidate that keeps less than half its norm (nearly in the others' span) left to a later round.
// Dynamic smem: complete_smem.
template <typename T, int NB>
__device__ void complete_matrix(const EngineArgs<T>& args, int k, int full, unsigned char* smem_raw) {
  __shared__ double red[32];
  __shared__ int red_i[32];
  __shared__ int s_cand[NB], s_nc, s_na, s_pos[NB];
  __shared__ double s_best[NB];
  const MatrixDesc md = matrix_desc(args, k);
  const int p = md.p;
  const int ncols = full ? md.ucols : md.q;
  const int tid = threadIdx.x, nt = blockDim.x, lane = tid & 31, warp = tid >> 5, nw = nt >> 5;
  double* pdiag = reinterpret_cast<double*>(smem_raw);  // p
  double* G = pdiag + p;                                 // NB x NB: the candidates' Gram matrix
  double* R = G + NB * NB;                               // NB x NB: its Cholesky factor's inverse
  T* X = reinterpret_cast<T*>(R + NB * NB);              // p x NB, column-major: the candidates
  T* C = X + static_cast<size_t>(p) * NB;                // ncols x NB, row-major: U^T X
  T* U = args.U + md.u_off;
  int col = args.rank[k];
  for (int t = tid; t < p; t += nt) {
    double s = 0;
    for (int j = 0; j < col; ++j) {
      const double u = U[static_cast<int64_t>(j) * p + t];
      s += u * u;
    }
    pdiag[t] = 1.0 - s;
  }
  __syncthreads();
  while (col < ncols) {
    // The candidates: argmax of the projector's diagonal, NB times (each taken out while the next is found).
    const int want = min(NB, ncols - col);
    if (tid == 0) s_nc = 0;
    for (int c = 0; c < want; ++c) {
      double best = -1.0;
      int bi = 0;
      for (int t = tid; t < p; t += nt)
        if (pdiag[t] > best) { best = pdiag[t]; bi = t; }
      for (int off = 16; off > 0; off /= 2) {
        const double ob = __shfl_xor_sync(0xffffffffu, best, off);
        const int oi = __shfl_xor_sync(0xffffffffu, bi, off);
        if (ob > best || (ob == best && oi < bi)) { best = ob; bi = oi; }
      }
      if (lane == 0) { red[warp] = best; red_i[warp] = bi; }
      __syncthreads();
      if (tid == 0) {
        best = red[0];
        bi = red_i[0];
        for (int w = 1; w < nw; ++w)
          if (red[w] > best || (red[w] == best && red_i[w] < bi)) { best = red[w]; bi = red_i[w]; }
        if (c == 0 || best >= 0.5 * s_best[0]) {
          s_cand[c] = bi;
          s_best[c] = best;
          pdiag[bi] = -2.0;  // (out of the next argmax)
          s_nc = c + 1;
        }
      }
      __syncthreads();
      if (s_nc <= c) break;
    }
    const int nc = s_nc;
    if (tid < nc) pdiag[s_cand[tid]] = s_best[tid];
    for (int t = tid; t < p; t += nt)
#pragma unroll
      for (int c = 0; c < NB; ++c) X[c * p + t] = c < nc && t == s_cand[c] ? T(1) : T(0);
    __syncthreads();
    for (int pass = 0; pass < 2; ++pass) {
      for (int j = warp; j < col; j += nw) {  // C = U[:, :col]^T X, a warp a row
        const T* u = U + static_cast<int64_t>(j) * p;
        T acc[NB];
#pragma unroll
        for (int c = 0; c < NB; ++c) acc[c] = 0;
        for (int t = lane; t < p; t += 32) {
          const T ut = u[t];
#pragma unroll
          for (int c = 0; c < NB; ++c) acc[c] += ut * X[c * p + t];
        }
#pragma unroll
        for (int c = 0; c < NB; ++c) {
          const T v = group_sum<32>(acc[c]);
          if (lane == 0) C[j * NB + c] = v;
        }
      }
      __syncthreads();
      for (int t = tid; t < p; t += nt) {  // X -= U[:, :col] C
        T acc[NB];
#pragma unroll
        for (int c = 0; c < NB; ++c) acc[c] = 0;
        for (int j = 0; j < col; ++j) {
          const T ut = U[static_cast<int64_t>(j) * p + t];
#pragma unroll
          for (int c = 0; c < NB; ++c) acc[c] += ut * C[j * NB + c];
        }
#pragma unroll
        for (int c = 0; c < NB; ++c) X[c * p + t] -= acc[c];
      }
      __syncthreads();
    }
    // Among themselves: CholeskyQR twice, X <- X R^{-1}; the first pass leaves out the candidates that
    // keep less than half their norm (the first always stays).
    for (int pass = 0; pass < 2; ++pass) {
      for (int pr = warp; pr < NB * NB; pr += nw) {  // G = X^T X
        const int a = pr / NB, c = pr % NB;
        if (a > c) continue;
        double acc = 0;
        for (int t = lane; t < p; t += 32) acc += double(X[a * p + t]) * double(X[c * p + t]);
        acc = group_sum<32>(acc);
        if (lane == 0) G[a * NB + c] = G[c * NB + a] = acc;
      }
      __syncthreads();
      if (tid == 0) {
        // Upper Cholesky factor L^T of the kept candidates' G (in G's upper triangle), then its inverse.
        int na = 0;
        int keep[NB];
        for (int c = 0; c < nc; ++c) {
          double d = G[c * NB + c];
          const double g0 = d;
          for (int i = 0; i < na; ++i) {
            const int a = keep[i];
            double r = G[a * NB + c];
            for (int i2 = 0; i2 < i; ++i2) r -= G[keep[i2] * NB + a] * G[keep[i2] * NB + c];
            r /= G[a * NB + a];
            G[a * NB + c] = r;
            d -= r * r;
          }
          const bool kept = pass == 1 ? s_pos[c] >= 0 : g0 > 0.0 && (na == 0 || d >= 0.25 * g0);
          if (kept && d > 0.0) {
            G[c * NB + c] = sqrt(d);
            keep[na++] = c;
          }
          if (pass == 0) s_pos[c] = kept && d > 0.0 ? na - 1 : -1;
        }
        // R = (L^T)^{-1} on the kept ones, upper triangular, zero elsewhere.
        for (int i = 0; i < NB * NB; ++i) R[i] = 0.0;
        for (int i = na - 1; i >= 0; --i) {
          const int c = keep[i];
          R[c * NB + c] = 1.0 / G[c * NB + c];
          for (int j = i + 1; j < na; ++j) {
            const int e = keep[j];
            double sacc = 0;
            for (int l = i + 1; l <= j; ++l) sacc += G[c * NB + keep[l]] * R[keep[l] * NB + e];
            R[c * NB + e] = -sacc / G[c * NB + c];
          }
        }
        s_na = na;
      }
      __syncthreads();
      for (int t = tid; t < p; t += nt) {  // X <- X R
        T x[NB];
#pragma unroll
        for (int a = 0; a < NB; ++a) x[a] = X[a * p + t];
#pragma unroll
        for (int c = 0; c < NB; ++c) {
          double acc = 0;
#pragma unroll
          for (int a = 0; a < NB; ++a) acc += double(x[a]) * R[a * NB + c];
          X[c * p + t] = T(acc);
        }
      }
      __syncthreads();
    }
    // The kept candidates become U's next columns, in the order they were found.
    const int na = s_na;
    for (int t = tid; t < p; t += nt) {
      double dp = 0;
      for (int c = 0; c < nc; ++c) {
        const int pos = s_pos[c];
        if (pos < 0) continue;
        const T v = X[c * p + t];
        U[static_cast<int64_t>(col + pos) * p + t] = v;
        dp += double(v) * double(v);
      }
      pdiag[t] -= dp;
    }
    col += na;
    __syncthreads();
    if (na == 0) break;  // (no direction left outside the span: cannot happen while col < ncols <= p)
  }
}

// A block per `tile` matrices: each of `tile` threads reads one matrix's rank,
// and the block completes only those that lack columns. Small matrices (most
// of full rank, each completed in microseconds) come 256 a block: a block per
// matrix cost 0.97 ms at a million 3 x 3 matrices (H100). Larger ones keep a
// block each, so that many rank-deficient ones complete in parallel.
constexpr int kCompleteThreads = 256;

template <typename T, int NB>
__global__ void __launch_bounds__(kCompleteThreads)
    complete_kernel(EngineArgs<T> args, const int32_t* mats, int n, int tile, int full) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ int todo[kCompleteThreads];
  __shared__ int ntodo;
  if (threadIdx.x == 0) ntodo = 0;
  __syncthreads();
  const int b = blockIdx.x * tile + threadIdx.x;
  if (threadIdx.x < tile && b < n) {
    const int k = list_at(mats, b);
    const MatrixDesc md = matrix_desc(args, k);
    if (args.rank[k] < (full ? md.ucols : md.q)) todo[atomicAdd(&ntodo, 1)] = k;
  }
  __syncthreads();
  const int count = ntodo;
  for (int t = 0; t < count; ++t) complete_matrix<T, NB>(args, todo[t], full, smem_raw);
}

}  // namespace

size_t complete_smem(int64_t p, int64_t cols, int nb, size_t elem) {
  return static_cast<size_t>(p) * sizeof(double) + static_cast<size_t>(2 * nb * nb) * sizeof(double) +
         static_cast<size_t>((p + cols) * nb) * elem;
}

template <typename T>
void launch_prologue(const EngineArgs<T>& args, const int32_t* mats, int n, int64_t max_q, cudaStream_t stream) {
  if (n == 0) return;
  const dim3 grid = pass_grid(n, max_q);
  amax_kernel<T><<<grid, kPassThreads, 0, stream>>>(args, mats);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  scale_kernel<T><<<grid, kPassThreads, 0, stream>>>(args, mats);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename T>
void launch_end_sweep(const EngineArgs<T>& args, const int32_t* mats, int n, int32_t* active, bool bound,
                      cudaStream_t stream) {
  if (n == 0) return;
  end_sweep_kernel<T><<<(n + 255) / 256, 256, 0, stream>>>(args, mats, n, active, bound);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename T>
void launch_finalize(const EngineArgs<T>& args, const int32_t* mats, int n, int64_t max_q, double* norms,
                     int32_t* order, cudaStream_t stream) {
  if (n == 0) return;
  const dim3 grid = pass_grid(n, max_q);
  column_norms_kernel<T><<<grid, kPassThreads, 0, stream>>>(args, mats, norms);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  // (a multiple of four doubles: ptxas may merge write_descending_s's unrolled loads of d into 16-byte ones
  // past an odd q's last entry, which compute-sanitizer flags as out of bounds: a 200 x 117 float64, stop 81)
  const size_t smem = static_cast<size_t>((max_q + 3) & ~int64_t(3)) * sizeof(double);
  auto kernel = order_kernel<T>;
  allow_dynamic_smem(kernel, smem);
  kernel<<<n, 256, smem, stream>>>(args, mats, norms, order);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  if (args.U) {
    scatter_kernel<T><<<grid, kPassThreads, 0, stream>>>(args, mats, norms, order);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
}

template <typename T>
void launch_complete(const EngineArgs<T>& args, const int32_t* mats, int n, int64_t max_p, int64_t max_cols,
                     bool full, size_t smem_per_block, cudaStream_t stream) {
  if (n == 0) return;
  // Candidates a round: the most whose columns fit (at least 1: complete_u sends no larger matrix).
  int nb = 16;
  while (nb > 1 && complete_smem(max_p, max_cols, nb, sizeof(T)) + kCompleteStaticSmem > smem_per_block) nb /= 2;
  const size_t smem = complete_smem(max_p, max_cols, nb, sizeof(T));
  const int tile = max_p <= 32 ? kCompleteThreads : 1;
  auto go = [&](auto kernel) {
    allow_dynamic_smem(kernel, smem);
    kernel<<<(n + tile - 1) / tile, kCompleteThreads, smem, stream>>>(args, mats, n, tile, full ? 1 : 0);
  };
  switch (nb) {
    case 16: go(complete_kernel<T, 16>); break;
    case 8: go(complete_kernel<T, 8>); break;
    case 4: go(complete_kernel<T, 4>); break;
    case 2: go(complete_kernel<T, 2>); break;
    default: go(complete_kernel<T, 1>);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template void launch_prologue<float>(const EngineArgs<float>&, const int32_t*, int, int64_t, cudaStream_t);
template void launch_prologue<double>(const EngineArgs<double>&, const int32_t*, int, int64_t, cudaStream_t);
template void launch_end_sweep<float>(const EngineArgs<float>&, const int32_t*, int, int32_t*, bool, cudaStream_t);
template void launch_end_sweep<double>(const EngineArgs<double>&, const int32_t*, int, int32_t*, bool, cudaStream_t);
template void launch_finalize<float>(const EngineArgs<float>&, const int32_t*, int, int64_t, double*, int32_t*,
                                     cudaStream_t);
template void launch_finalize<double>(const EngineArgs<double>&, const int32_t*, int, int64_t, double*, int32_t*,
                                      cudaStream_t);
template void launch_complete<float>(const EngineArgs<float>&, const int32_t*, int, int64_t, int64_t, bool, size_t,
                                     cudaStream_t);
template void launch_complete<double>(const EngineArgs<double>&, const int32_t*, int, int64_t, int64_t, bool, size_t,
                                      cudaStream_t);

}  // namespace cuda
}  // namespace jsvd
