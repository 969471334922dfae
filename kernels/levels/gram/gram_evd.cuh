// The Gram route's inner solver, shared by the Gram EVD level (one block per
// pair, Gram matrix formed in the kernel: gram_evd_smem.cu) and the GEMM level
// (Gram matrices formed by batched GEMMs: levels/gemm/). Float64 whatever the
// data's type: a float32 Gram matrix's entries carry errors of about
// sqrt(p) eps |a_i||a_j|, the size of the convergence threshold itself
// (docs/robustness.md).
#pragma once

#include "common/jacobi_device.cuh"

namespace jsvd {
namespace cuda {

// Shared memory of the EVD of a c x c matrix: B and J, each double-buffered,
// and the step's rotations.
struct EvdSmem {
  double* B;
  double* Bn;
  double* J;
  double* Jn;
  double* gd;  // G[r][r]
  double* go;  // G[partner(r)][r]
  double* gt;  // +-tau of r's rotation (update form)
  int* partner;
};

__host__ __device__ inline size_t evd_smem_bytes(int64_t c) { return (4 * c * c + 3 * c) * sizeof(double) + c * sizeof(int); }

// Carves an EvdSmem from `raw`; returns the first byte after it.
__device__ inline unsigned char* carve_evd(unsigned char* raw, int c, EvdSmem& s) {
  double* t = reinterpret_cast<double*>(raw);
  s.B = t;
  s.Bn = s.B + c * c;
  s.J = s.Bn + c * c;
  s.Jn = s.J + c * c;
  s.gd = s.Jn + c * c;
  s.go = s.gd + c;
  s.gt = s.go + c;
  s.partner = reinterpret_cast<int*>(s.gt + c);
  return reinterpret_cast<unsigned char*>(s.partner + c);
}

// Tests the pair's Gram matrix B (column-major, every thread of the block):
// returns whether some column pair exceeds `apply` (rotations are due), and
// sets *above when some exceeds `tol` (the pair is not converged). Columns of
// squared norm <= negl are numerically zero and take no part (jacobi_device.cuh).
// With `cmax`, also this thread's largest cosine |b_lj| / sqrt(b_ll b_jj) (xGESVJ's stop).
__device__ inline bool gram_off_diagonal(const double* B, int c, double negl, double apply, double tol, bool* above,
                                         double* cmax = nullptr) {
  int off = 0, abv = 0;
  for (int idx = threadIdx.x; idx < c * c; idx += blockDim.x) {
    const int l = idx / c, j = idx % c;
    if (l < j) {
      const double bll = B[l * c + l], bjj = B[j * c + j], blj = B[idx];
      const bool live = bll > negl && bjj > negl;
      const double norms = sqrt(bll) * sqrt(bjj);
      off |= live && fabs(blj) > apply * norms;
      abv |= live && fabs(blj) > tol * norms;
      if (cmax && live) *cmax = fmax(*cmax, fabs(blj) / norms);
    }
  }
  *above = __syncthreads_or(abv) != 0;
  return __syncthreads_or(off) != 0;
}

// EVD B = J diag J^T by the parallel two-sided Jacobi method, J starting as
// the identity (the caller sets it). In each round-robin step all c/2
// rotations are independent, and every element of G^T B G is updated at once
// from at most four elements of B (W-cycle paper Fig. 5: 6 multiplications,
// 3 additions). Ends with s.B, s.J holding the results (the buffers swap).
__device__ inline void jacobi_evd(EvdSmem& s, int c, double negl, double apply, int max_sweeps) {
  __shared__ int s_rot;
  const int tid = threadIdx.x, nt = blockDim.x;
  const int e = c + (c & 1);
  const double apply2 = apply * apply;
  for (int sweep = 0; sweep < max_sweeps; ++sweep) {
    if (tid == 0) s_rot = 0;
    __syncthreads();
    for (int step = 0; step < e - 1; ++step) {
      for (int pk = tid; pk < e / 2; pk += nt) {
        int i, j;
        round_robin_pair(e, step, pk, i, j);
        if (j >= c) {
          s.partner[i] = i;
          s.gd[i] = 1;
          s.go[i] = 0;
          s.gt[i] = 0;
          continue;
        }
        const double bii = s.B[i * c + i], bjj = s.B[j * c + j], bij = s.B[j * c + i];
        double cs = 1, sn = 0, tau = 0;
        // The step's critical path (a step waits for its slowest rotation):
        // squares instead of square roots in the test (the data are scaled to
        // max|a| = 1, no overflow), and the one-sided levels' rotation from
        // refined MUFU seeds (jacobi_device.cuh).
        if (bii > negl && bjj > negl && bij * bij > apply2 * bii * bjj) {
          const StepRotation<double> r = step_rotation(bjj - bii, bij);
          cs = r.c;
          sn = r.s;
          tau = r.tau;
          s_rot = 1;
        }
        s.partner[i] = j;
        s.partner[j] = i;
        s.gd[i] = cs;
        s.gd[j] = cs;
        s.go[i] = -sn;  // G[j][i]
        s.go[j] = sn;   // G[i][j]
        s.gt[i] = tau;  // J's columns use the update form (jacobi_device.cuh)
        s.gt[j] = -tau;
      }
      __syncthreads();
      for (int idx = tid; idx < c * c; idx += nt) {
        const int col = idx / c, row = idx % c;  // element (row, col)
        const int pr = s.partner[row], pc = s.partner[col];
        const double dr = s.gd[row], orr = s.go[row], dc = s.gd[col], oc = s.go[col];
        double v;
        if (pr == col && pr != row && orr != 0.0) {
          v = 0;  // the element this step's rotation annihilates
        } else {
          v = dr * (dc * s.B[col * c + row] + oc * s.B[pc * c + row]) +
              orr * (dc * s.B[col * c + pr] + oc * s.B[pc * c + pr]);
        }
        s.Bn[idx] = v;
        // J' = J G: column col gets col + o (partner + tau' col), tau' = +-tau
        const double jc = s.J[col * c + row];
        s.Jn[idx] = jc + oc * (s.J[pc * c + row] + s.gt[col] * jc);
      }
      __syncthreads();
      double* t = s.B; s.B = s.Bn; s.Bn = t;
      t = s.J; s.J = s.Jn; s.Jn = t;
    }
    const bool rot = s_rot != 0;
    __syncthreads();
    if (!rot) break;
  }
}

// The block's largest `v` into the non-negative float whose bits are at `slot`, rounded up (every
// thread of the block calls it).
__device__ inline void block_max_into(int32_t* slot, double v) {
  const unsigned bits = __reduce_max_sync(0xffffffffu, __float_as_uint(__double2float_ru(v)));
  if ((threadIdx.x & 31) == 0) atomicMax(slot, static_cast<int32_t>(bits));
}

// The widest pair of both Gram routes (kGramMaxCols, kGemmMaxPair).
constexpr int kEvdMaxCols = 64;

// Steps 2 and 3 of both Gram routes, on the pair's Gram matrix s.B of a
// p-row matrix (s.J = I, set by the caller): the relative tests of the
// one-sided kernels (a pair above tol is not converged: st->rotated = 1;
// rotations are applied down to `apply`, for float32 with vectors its eps, or
// eps / 8 where the data stay in float64 between steps (`f64_data`: the GEMM
// level), so that U's and V's columns end orthogonal to below float32's
// rounding: ||U^T U - I||_F adds up n^2 cosines), then the EVD if some pair
// is above `apply`. Returns whether it ran (J != I).
// float64 (where apply = tol) also records xGESVJ's maxima for end_sweep_kernel
// (converged_by_bound, core.h): the largest cosine tested, and as the sine the
// most that J moves a column's cosine with any column outside the pair, relative
// to that cosine: column x becomes sum_k J_kx a_k, so its cosine with z moves by
// at most sum_{k != x} |J_kx| |a_k| / |x'| times the largest cosine. A column
// meets about q / w pairs a sweep, each of up to 2w columns, so q c s < tol
// bounds the sweep's drift as the scalar rule does.
template <typename T>
__device__ bool gram_pair_evd(EvdSmem& s, int c, int p, double tol_arg, bool with_vectors, bool f64_data,
                              int max_sweeps, MatrixState* st) {
  constexpr bool kBound = sizeof(T) == sizeof(double);
  __shared__ double n0[kBound ? kEvdMaxCols : 1];  // the columns' norms before J (0: numerically zero)
  const double tol = convergence_tol<T>(tol_arg, p);
  const double eps = static_cast<double>(eps_of<T>()) / (f64_data ? 8 : 1);
  const double apply = sizeof(T) == sizeof(float) && with_vectors ? fmin(tol, eps) : tol;
  const double negl = negligible_norm2<T>(p);  // numerically zero columns take no part (jacobi_device.cuh)
  bool above;
  double cmax = 0;
  const bool off = gram_off_diagonal(s.B, c, negl, apply, tol, &above, kBound ? &cmax : nullptr);
  if (above && threadIdx.x == 0) st->rotated = 1;
  if constexpr (kBound)
    for (int l = threadIdx.x; l < c; l += blockDim.x) n0[l] = s.B[l * c + l] > negl ? sqrt(s.B[l * c + l]) : 0.0;
  if (off) jacobi_evd(s, c, negl, apply, max_sweeps);  // (begins and ends with a barrier)
  if constexpr (kBound) {
    double smax = 0;
    if (off)
      for (int x = threadIdx.x; x < c; x += blockDim.x) {
        const double lx = s.B[x * c + x];
        if (lx <= negl) continue;
        double sum = 0;
        for (int k = 0; k < c; ++k)
          if (k != x) sum += fabs(s.J[x * c + k]) * n0[k];
        smax = fmax(smax, sum / sqrt(lx));
      }
    block_max_into(&st->cos_bits, cmax);
    block_max_into(&st->sin_bits, smax);
    if (threadIdx.x == 0) st->tracked = 1;
  }
  return off;
}

}  // namespace cuda
}  // namespace jsvd
