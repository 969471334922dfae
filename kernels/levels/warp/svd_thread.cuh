// The register level for the smallest matrices (at most kThreadRows rows):
// a thread per matrix, the whole matrix and V in its registers, no shuffles and
// no barriers (W-cycle §IV-B's register level, one matrix a lane). A million
// 3 x 3 rotation fits (Kabsch, Procrustes) took 0.31 ms in svd_warp_kernel's
// four-lane groups on the H100, which spend most steps on shuffles for three
// rows. The arithmetic is svd_warp_kernel's (svd_warp.cu): the same
// tolerances, rotations and update of the squared norms (eq. (6)), cyclic pair
// order, inner products in double (exact for float32 data).
#pragma once

#include "common/jacobi_device.cuh"

namespace jsvd {
namespace cuda {

constexpr int kThreadRows = 4;  // p <= 4 (and q <= p)
constexpr int kThreadBlock = 128;

template <typename T, bool kWithV>
__global__ void __launch_bounds__(kThreadBlock) svd_thread_kernel(EngineArgs<T> args, const int32_t* mats, int nmats) {
  constexpr int M = kThreadRows;
  const int slot = blockIdx.x * kThreadBlock + threadIdx.x;
  if (slot >= nmats) return;
  const int kmat = list_at(mats, slot);
  const MatrixDesc md = matrix_desc(args, kmat);
  const int p = md.p, q = md.q;

  T a[M][M];  // a[row][column]
  T v[kWithV ? M : 1][kWithV ? M : 1];
  bool bad = false;
  T amax = 0;
  load_register_rows(args, md, 0, 1, a, bad, amax);
  if (bad) {
    write_non_finite(args, md, kmat, 0, 1);
    return;
  }
  if constexpr (kWithV) {
#pragma unroll
    for (int r = 0; r < M; ++r)
#pragma unroll
      for (int c = 0; c < M; ++c) v[r][c] = r == c ? T(1) : T(0);
  }
  const double scale = scale_register_rows(a, amax);
  const StepTolerances tols = step_tolerances<T>(args.tol, p);
  const double tiny2 = negligible_norm2<T>(p);
  double d[M];
  auto exact_norms = [&] {
#pragma unroll
    for (int c = 0; c < M; ++c) {
      d[c] = 0;
#pragma unroll
      for (int r = 0; r < M; ++r) d[c] += double(a[r][c]) * double(a[r][c]);
    }
  };

  int sweeps = 0;
  bool converged = false;
  for (int sweep = 1; sweep <= args.max_sweeps; ++sweep) {
    exact_norms();
    bool rotated = false;
#pragma unroll
    for (int i = 0; i < M - 1; ++i)
#pragma unroll
      for (int j = i + 1; j < M; ++j) {
        if (j >= q || d[i] <= tiny2 || d[j] <= tiny2) continue;
        double g = 0;
#pragma unroll
        for (int r = 0; r < M; ++r) g += double(a[r][i]) * double(a[r][j]);
        const double g2 = g * g;
        if (g2 <= tols.apply2 * d[i] * d[j]) continue;
        const StepRotation<T> rot = step_rotation(static_cast<T>(d[j] - d[i]), static_cast<T>(g));
        if (rot.t == T(0)) continue;  // an angle below T's range is no rotation
        rotated |= g2 > tols.tol2 * d[i] * d[j];
#pragma unroll
        for (int r = 0; r < M; ++r) {
          rotate_pair(a[r][i], a[r][j], rot.s, rot.tau);
          if constexpr (kWithV) rotate_pair(v[r][i], v[r][j], rot.s, rot.tau);
        }
        d[i] = fmax(d[i] - static_cast<double>(rot.t) * g, 0.0);  // eq. (6)
        d[j] = d[j] + static_cast<double>(rot.t) * g;
      }
    sweeps = sweep;
    if (!rotated) {
      converged = true;
      break;
    }
  }

  // S descending by rank counting; U = A's columns normalised; V's columns
  // follow; the finite check of what is written (as svd_warp_kernel).
  exact_norms();
  const double tiny = tiny_norm<T>(p);
  int nonzero = 0;
  bool nonfinite = false;
  T* Ug = args.U ? args.U + md.u_off : nullptr;
  T* Vg = args.U ? args.V + md.v_off : nullptr;
#pragma unroll
  for (int c = 0; c < M; ++c) {
    if (c >= q) continue;
    int rank = 0;
#pragma unroll
    for (int l = 0; l < M; ++l) rank += l < q && (d[l] > d[c] || (d[l] == d[c] && l < c));
    const double nrm = sqrt(d[c]);
    nonzero += nrm > tiny;
    const T sv = static_cast<T>(nrm * scale);
    nonfinite |= !isfinite(sv);
    args.S[md.s_off + rank] = sv;
    if (!Ug) continue;
    const T inv = nrm > tiny ? static_cast<T>(1.0 / nrm) : T(0);  // zero columns are completed below
#pragma unroll
    for (int r = 0; r < M; ++r) {
      if (r >= p) continue;
      const T u = a[r][c] * inv;
      nonfinite |= !isfinite(u);
      Ug[static_cast<int64_t>(rank) * p + r] = u;
      if constexpr (kWithV) {
        if (r < q) {
          nonfinite |= !isfinite(v[r][c]);
          Vg[rank * q + r] = v[r][c];
        }
      }
    }
  }
  // U's columns from the rank on carry no direction (zero columns, and the
  // extra ones of full_matrices): completed here, in the thread that wrote U,
  // as complete_kernel does for the other levels (blocked_steps.cu): the unit
  // vector with the largest component outside the span so far, orthogonalised
  // twice and normalised. The engine launches no completion for this level.
  if (Ug) {
    for (int col = nonzero; col < md.ucols; ++col) {
      double best = -1.0;
      int bt = 0;
#pragma unroll
      for (int t = 0; t < M; ++t) {
        if (t >= p) continue;
        double s = 0;
        for (int j = 0; j < col; ++j) {
          const double u = Ug[j * p + t];
          s += u * u;
        }
        if (1.0 - s > best) {
          best = 1.0 - s;
          bt = t;
        }
      }
      T x[M];
#pragma unroll
      for (int t = 0; t < M; ++t) x[t] = t == bt ? T(1) : T(0);
      for (int pass = 0; pass < 2; ++pass)
        for (int j = 0; j < col; ++j) {
          T coef = 0;
#pragma unroll
          for (int t = 0; t < M; ++t)
            if (t < p) coef += Ug[j * p + t] * x[t];
#pragma unroll
          for (int t = 0; t < M; ++t)
            if (t < p) x[t] -= coef * Ug[j * p + t];
        }
      T ss = 0;
#pragma unroll
      for (int t = 0; t < M; ++t) ss += x[t] * x[t];
      const T nx = sqrt(ss);
#pragma unroll
      for (int t = 0; t < M; ++t)
        if (t < p) Ug[col * p + t] = x[t] / nx;
    }
  }
  args.info[kmat] = !converged ? -1 : nonfinite ? -3 : sweeps;
  args.rank[kmat] = Ug ? md.ucols : nonzero;  // (completed)
}

}  // namespace cuda
}  // namespace jsvd
