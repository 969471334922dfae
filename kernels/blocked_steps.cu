// The per-matrix steps around the sweeps of the blocked levels, and the
// completion of U: prologue (scale, V = I), end of sweep (convergence
// bookkeeping on the device), finalisation (S, U, V sorted by descending S),
// and the orthonormal completion of U columns that carry no direction.
#include "blocked_steps.h"

#include "jacobi_device.cuh"

#include <c10/cuda/CUDAException.h>

namespace jsvd {
namespace cuda {
namespace {

template <typename T>
__device__ T block_reduce_max(T v, T* red) {
  for (int off = 16; off > 0; off /= 2) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, off));
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  T m = 0;
  for (int i = 0; i < (blockDim.x + 31) / 32; ++i) m = fmax(m, red[i]);
  __syncthreads();
  return m;
}

template <typename T>
__device__ T block_reduce_sum(T v, T* red) {
  for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  T s = 0;
  for (int i = 0; i < (blockDim.x + 31) / 32; ++i) s += red[i];
  __syncthreads();
  return s;
}

// One block per matrix: reject non-finite input, divide by max|a|, V = I.
template <typename T>
__global__ void prologue_kernel(EngineArgs<T> args, const int32_t* mats) {
  __shared__ T red[32];
  const int k = list_at(mats, blockIdx.x);
  const MatrixDesc md = matrix_desc(args, k);
  T* A = args.A + md.a_off;
  const int64_t n = static_cast<int64_t>(md.p) * md.q;
  int bad = 0;
  T amax = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const T v = A[i];
    bad |= !isfinite(v);
    amax = fmax(amax, fabs(v));
  }
  bad = __syncthreads_or(bad);
  amax = block_reduce_max(amax, red);
  if (!bad && amax > T(0)) {
    const T inv = T(1) / amax;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) A[i] *= inv;
  }
  if (args.U) {
    T* V = args.Vw + md.v_off;
    for (int64_t i = threadIdx.x; i < static_cast<int64_t>(md.q) * md.q; i += blockDim.x)
      V[i] = (i / md.q == i % md.q) ? T(1) : T(0);
  }
  if (threadIdx.x == 0) {
    MatrixState st;
    st.scale = amax > T(0) ? static_cast<double>(amax) : 1.0;
    st.rotated = 0;
    st.sweeps = 0;
    st.converged = bad;
    args.state[k] = st;
    args.info[k] = bad ? -2 : 0;
  }
}

// One thread per matrix: a sweep that rotated nothing means convergence.
__global__ void end_sweep_kernel(MatrixState* state, const int32_t* mats, int n, int32_t* active) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  MatrixState& st = state[list_at(mats, t)];
  if (!st.converged) {
    st.sweeps += 1;
    if (!st.rotated) st.converged = 1;
    else if (active) atomicAdd(active, 1);
  }
  st.rotated = 0;
}

// One block per matrix: S = column norms (descending), U = normalised columns,
// V = the workspace's columns in the same order. Dynamic smem: q doubles + q ints.
template <typename T>
__global__ void finalize_kernel(EngineArgs<T> args, const int32_t* mats) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ int s_rank;
  const int k = list_at(mats, blockIdx.x);
  const MatrixDesc md = matrix_desc(args, k);
  const int p = md.p, q = md.q;
  const int tid = threadIdx.x, nt = blockDim.x, lane = tid & 31, warp = tid >> 5, nw = nt >> 5;
  if (args.info[k] == -2) {  // the prologue found NaN or Inf
    write_non_finite(args, md, k, tid, nt);
    return;
  }
  double* d = reinterpret_cast<double*>(smem_raw);
  int* order = reinterpret_cast<int*>(d + q);
  const T* A = args.A + md.a_off;
  for (int l = warp; l < q; l += nw) {
    const T* x = A + static_cast<int64_t>(l) * p;
    double acc = 0;
    for (int r = lane; r < p; r += 32) acc += double(x[r]) * double(x[r]);
    acc = group_sum<32>(acc);
    if (lane == 0) d[l] = acc;
  }
  if (tid == 0) s_rank = 0;
  __syncthreads();
  const MatrixState st = args.state[k];
  write_descending_s(d, q, st.scale, args.S + md.s_off, order, &s_rank, args.info + k, args.rank + k,
                     st.converged ? st.sweeps : -1);
  const double tiny = static_cast<double>(tiny_norm<T>());
  if (!args.U) return;
  for (int l = warp; l < q; l += nw) {
    const double nrm = sqrt(d[l]);
    const T inv = nrm > tiny ? static_cast<T>(1.0 / nrm) : T(0);  // completed later
    const T* x = A + static_cast<int64_t>(l) * p;
    T* u = args.U + md.u_off + static_cast<int64_t>(order[l]) * p;
    for (int r = lane; r < p; r += 32) u[r] = x[r] * inv;
    const T* vw = args.Vw + md.v_off + static_cast<int64_t>(l) * q;
    T* v = args.V + md.v_off + static_cast<int64_t>(order[l]) * q;
    for (int r = lane; r < q; r += 32) v[r] = vw[r];
  }
}

// One block per matrix: fill U's columns rank .. ncols-1 (which carry no
// direction) with an orthonormal basis of the complement of the first rank
// columns. Greedy: the next column starts from the unit vector e_t whose
// component outside the current span is largest (diag of the projector,
// kept in smem), then is orthogonalised twice ("twice is enough") and normalised.
// Dynamic smem: p doubles (projector diagonal) + p T (the new column) + ncols T.
template <typename T>
__global__ void complete_kernel(EngineArgs<T> args, const int32_t* mats, int full) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ double red[32];
  __shared__ int red_i[32];
  const int k = list_at(mats, blockIdx.x);
  const MatrixDesc md = matrix_desc(args, k);
  const int p = md.p;
  const int ncols = full ? md.ucols : md.q;
  const int r0 = args.rank[k];
  if (r0 >= ncols) return;
  const int tid = threadIdx.x, nt = blockDim.x, lane = tid & 31, warp = tid >> 5, nw = nt >> 5;
  double* pdiag = reinterpret_cast<double*>(smem_raw);
  T* x = reinterpret_cast<T*>(pdiag + p);
  T* coef = x + p;
  T* U = args.U + md.u_off;
  for (int t = tid; t < p; t += nt) {
    double s = 0;
    for (int j = 0; j < r0; ++j) {
      const double u = U[static_cast<int64_t>(j) * p + t];
      s += u * u;
    }
    pdiag[t] = 1.0 - s;
  }
  __syncthreads();
  for (int col = r0; col < ncols; ++col) {
    // argmax of the projector's diagonal
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
    best = red[0];
    bi = red_i[0];
    for (int w = 1; w < nw; ++w)
      if (red[w] > best || (red[w] == best && red_i[w] < bi)) { best = red[w]; bi = red_i[w]; }
    for (int t = tid; t < p; t += nt) x[t] = t == bi ? T(1) : T(0);
    __syncthreads();
    for (int pass = 0; pass < 2; ++pass) {
      for (int j = warp; j < col; j += nw) {  // coef = U[:, :col]^T x
        const T* u = U + static_cast<int64_t>(j) * p;
        T acc = 0;
        for (int t = lane; t < p; t += 32) acc += u[t] * x[t];
        acc = group_sum<32>(acc);
        if (lane == 0) coef[j] = acc;
      }
      __syncthreads();
      for (int t = tid; t < p; t += nt) {  // x -= U[:, :col] coef
        T acc = 0;
        for (int j = 0; j < col; ++j) acc += U[static_cast<int64_t>(j) * p + t] * coef[j];
        x[t] -= acc;
      }
      __syncthreads();
    }
    T ss = 0;
    for (int t = tid; t < p; t += nt) ss += x[t] * x[t];
    __shared__ T redt[32];
    const T nrm = sqrt(block_reduce_sum(ss, redt));
    T* u = U + static_cast<int64_t>(col) * p;
    for (int t = tid; t < p; t += nt) {
      const T v = x[t] / nrm;
      u[t] = v;
      pdiag[t] -= static_cast<double>(v) * static_cast<double>(v);
    }
    __syncthreads();
  }
}

}  // namespace

template <typename T>
void launch_prologue(const EngineArgs<T>& args, const int32_t* mats, int n, cudaStream_t stream) {
  if (n == 0) return;
  prologue_kernel<T><<<n, 256, 0, stream>>>(args, mats);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void launch_end_sweep(MatrixState* state, const int32_t* mats, int n, int32_t* active, cudaStream_t stream) {
  if (n == 0) return;
  end_sweep_kernel<<<(n + 255) / 256, 256, 0, stream>>>(state, mats, n, active);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename T>
void launch_finalize(const EngineArgs<T>& args, const int32_t* mats, int n, int64_t max_q, cudaStream_t stream) {
  if (n == 0) return;
  const size_t smem = static_cast<size_t>(max_q) * (sizeof(double) + sizeof(int));
  auto kernel = finalize_kernel<T>;
  allow_dynamic_smem(kernel, smem);
  kernel<<<n, 256, smem, stream>>>(args, mats);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename T>
void launch_complete(const EngineArgs<T>& args, const int32_t* mats, int n, int64_t max_p, int64_t max_cols,
                     bool full, cudaStream_t stream) {
  if (n == 0) return;
  const size_t smem = static_cast<size_t>(max_p) * (sizeof(double) + sizeof(T)) + static_cast<size_t>(max_cols) * sizeof(T);
  auto kernel = complete_kernel<T>;
  allow_dynamic_smem(kernel, smem);
  kernel<<<n, 256, smem, stream>>>(args, mats, full ? 1 : 0);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template void launch_prologue<float>(const EngineArgs<float>&, const int32_t*, int, cudaStream_t);
template void launch_prologue<double>(const EngineArgs<double>&, const int32_t*, int, cudaStream_t);
template void launch_finalize<float>(const EngineArgs<float>&, const int32_t*, int, int64_t, cudaStream_t);
template void launch_finalize<double>(const EngineArgs<double>&, const int32_t*, int, int64_t, cudaStream_t);
template void launch_complete<float>(const EngineArgs<float>&, const int32_t*, int, int64_t, int64_t, bool, cudaStream_t);
template void launch_complete<double>(const EngineArgs<double>&, const int32_t*, int, int64_t, int64_t, bool, cudaStream_t);

}  // namespace cuda
}  // namespace jsvd
