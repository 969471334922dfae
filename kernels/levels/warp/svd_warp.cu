// One-sided Jacobi SVD of a whole small matrix (at most 32 columns) held in
// registers: a group of NC lanes per matrix (NC = the column count rounded up
// to a power of two), 32 / NC matrices per warp, no block barrier (a step's
// two exchanges go through a small per-warp buffer, warp_exchange.cuh). This
// is the W-cycle's whole-matrix level (§IV-B) for the sizes where the
// shared-memory kernel is bound by its three block barriers per round-robin
// step (benchmarks/RESULTS.md: about 1.5 us a step at 500x16x16).
//
// Layout: lane i of a group holds rows i, i + NC, ... (R of them) of A and
// row i of V. A column never leaves its register slot's lanes; rotating a
// column pair is the same 2x2 update of every lane's row slice.
// Round-robin ordering with fixed pair slots: the pairs of a step are the
// register slots (2k, 2k+1), and after each step the slots are permuted by the
// circle method (paper §II-B; circle_source in round_robin.h), the same
// permutation every step, so every register index is a compile-time constant
// and the arrays stay in registers.
// After NC - 1 steps (one sweep) every pair has met once and every column is
// back in its own slot.
//
// One step, for the NC/2 pairs of every group at once:
//  1. each lane stages its rows' share of x^T y for every pair (float32:
//     products rounded once, sums in double; float64: in double);
//  2. lanes 2k and 2k+1 each add half of pair k's shares, and swap halves;
//  3. those lanes compute the rotation (Rutishauser, update form) and carry the
//     pair's squared norms by eq. (6); the norms are recomputed exactly once
//     per sweep (a butterfly reduce-scatter), so they cannot drift;
//  4. lane 2k stores (s, tau), every lane reads its group's and rotates its
//     rows of A and V, then the slots are permuted.
#include "levels/warp/svd_warp.h"

#include "common/jacobi_device.cuh"
#include "common/round_robin.h"
#include "levels/warp/svd_thread.cuh"
#include "levels/warp/warp_exchange.cuh"

#include <c10/cuda/CUDAException.h>

namespace jsvd {
namespace cuda {
namespace {

constexpr unsigned kFull = 0xffffffffu;
constexpr int kWarpBlock = 128;  // threads per block

// One butterfly stage of reduce_scatter: 2H values -> H, partner at lane
// distance O; then the next stage. Templates, so every index is a constant.
template <int H, int O, typename A, int N>
__device__ __forceinline__ void scatter_stage(A (&x)[N], int li) {
  if constexpr (H >= 1) {
    const bool up = (li & O) != 0;
#pragma unroll
    for (int i = 0; i < H; ++i) {
      const A send = up ? x[i] : x[i + H];
      const A keep = up ? x[i + H] : x[i];
      x[i] = keep + __shfl_xor_sync(kFull, send, O);
    }
    scatter_stage<H / 2, O / 2>(x, li);
  }
}

// x[k] holds this lane's share of pair k's sum (k < NC/2). Returns the sum over
// the group of x[k] for k = (lane in group) / 2: each butterfly stage halves
// the values a lane carries, keeping the half its partner does not.
template <int NC, typename A>
__device__ __forceinline__ A reduce_scatter(A (&x)[NC / 2], int li) {
  scatter_stage<NC / 4, NC / 2>(x, li);
  return x[0] + __shfl_xor_sync(kFull, x[0], 1);
}

// The columns of one row slice move to the next step's slots (circle_source):
// with every index a constant, register moves.
template <int NC, typename T>
__device__ __forceinline__ void next_slots(T (&x)[NC]) {
  T old[NC];
#pragma unroll
  for (int c = 0; c < NC; ++c) old[c] = x[c];
#pragma unroll
  for (int c = 0; c < NC; ++c) x[c] = old[circle_source(c, NC / 2)];
}

// Blocks per SM the register allocation must allow: 4 (16 warps, 128
// registers) where that costs no more than a few spilled bytes (ptxas -v,
// sm_90), so the schedulers have warps to switch between (ncu, 10000x32x32:
// 12 warps per SM at 130 registers); the larger shapes spill at 128.
template <typename T, int NC, int R>
constexpr int kWarpMinBlocks = NC * R * sizeof(T) <= 128 ? 4 : 1;

template <typename T, int NC, int R, bool kWithV>
__global__ void __launch_bounds__(kWarpBlock, kWarpMinBlocks<T, NC, R>)
    svd_warp_kernel(EngineArgs<T> args, const int32_t* mats, int nmats) {
  constexpr int P = NC / 2;
  using Acc = double;  // inner products and norms (exact products for float32)

  const int lane = threadIdx.x & 31;
  const int li = lane & (NC - 1);  // lane within the matrix's group
  const int gbase = lane - li;
  const int kp = li >> 1;          // the pair whose rotation this lane computes
  const unsigned gmask = NC == 32 ? kFull : ((1u << NC) - 1u) << gbase;
  const int slot = (blockIdx.x * kWarpBlock + threadIdx.x) / NC;
  using Ex = WarpExchange<T, NC, R>;
  // Two steps a loop iteration halve the register moves of the slot permutation
  // (next_slots), where no register cap makes that spill (SASS, sm_90: 32 x 32
  // float64, 372 -> 307 instructions a step; H100 10000 x 32² float64 4.2 ->
  // 4.07 ms, 2000 x 64x32 float32 0.46 -> 0.43).
  constexpr int kStepUnroll = kWarpMinBlocks<T, NC, R> == 1 ? 2 : 1;
  __shared__ typename Ex::Buffer exchange[kWarpBlock / 32];
  auto& ex = exchange[threadIdx.x / 32];
  const int grp = lane / NC;  // the matrix's group within the warp
  // Every lane of the warp takes part in every shuffle, so groups without a
  // matrix (the grid's tail) or already finished keep stepping, idle.
  const bool live = slot < nmats;
  const int kmat = live ? list_at(mats, slot) : 0;
  MatrixDesc md{};
  if (live) md = matrix_desc(args, kmat);
  const int p = md.p, q = md.q;

  T a[R][NC];
  T v[kWithV ? NC : 1];
  bool bad = false;
  T amax = 0;
  load_register_rows(args, md, li, NC, a, bad, amax);  // a lane's rows: li, li + NC, ...
  if constexpr (kWithV) {
#pragma unroll
    for (int c = 0; c < NC; ++c) v[c] = (c == li && li < q) ? T(1) : T(0);
  }
#pragma unroll
  for (int off = NC / 2; off > 0; off /= 2) amax = fmax(amax, __shfl_xor_sync(kFull, amax, off));
  bad = (__ballot_sync(kFull, bad) & gmask) != 0;

  if (live && bad) write_non_finite(args, md, kmat, li, NC);
  bool done = !live || bad;

  const double scale = scale_register_rows(a, amax);

  // Convergence at tol, rotations applied down to eps where the inner
  // products are exact (float32 data, double sums): jacobi_device.cuh.
  const StepTolerances tols = step_tolerances<T>(args.tol, p);
  const double tol2 = tols.tol2, apply2 = tols.apply2;
  const double tiny2 = negligible_norm2<T>(p);

  // Squared norms of slots 2 kp and 2 kp + 1, exact.
  auto exact_norms = [&](Acc& dT, Acc& dB) {
    Acc xT[P], xB[P];
#pragma unroll
    for (int k = 0; k < P; ++k) {
      xT[k] = 0;
      xB[k] = 0;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        xT[k] += Acc(a[r][2 * k]) * Acc(a[r][2 * k]);
        xB[k] += Acc(a[r][2 * k + 1]) * Acc(a[r][2 * k + 1]);
      }
    }
    dT = reduce_scatter<NC>(xT, li);
    dB = reduce_scatter<NC>(xB, li);
  };

  Acc dT = 0, dB = 0;
  int sweeps = 0;
  bool converged = false;
  for (int sweep = 1; sweep <= args.max_sweeps; ++sweep) {
    if (!__any_sync(kFull, !done)) break;
    exact_norms(dT, dB);
    bool rotated = false;
#pragma unroll kStepUnroll
    for (int step = 0; step < NC - 1; ++step) {
      // 1. This lane's rows' share of every pair's x^T y, staged.
#pragma unroll
      for (int k = 0; k < P; ++k) {
        if constexpr (sizeof(T) == sizeof(float)) {
          // Float32: each product rounded once in float (two rows' products
          // summed in one FFMA), then summed in double by the readers, as in
          // the shared-memory kernels' steps: one conversion per two rows.
#pragma unroll
          for (int w = 0; w < Ex::W; ++w) {
            const int r = 2 * w;
            const float pr = a[r][2 * k] * a[r][2 * k + 1];
            Ex::put_share(ex, k, w, lane, r + 1 < R ? fmaf(a[r + 1][2 * k], a[r + 1][2 * k + 1], pr) : pr);
          }
        } else {
          T x = 0;
#pragma unroll
          for (int r = 0; r < R; ++r) x += a[r][2 * k] * a[r][2 * k + 1];
          Ex::put_share(ex, k, 0, lane, x);
        }
      }
      __syncwarp();
      // 2. Pair kp's inner product: half the group's shares in each of its two lanes.
      const Acc half = Ex::half_sum(ex, grp, kp, li & 1);
      const Acc g = half + __shfl_xor_sync(kFull, half, 1);
      // 3. Its rotation, in both lanes (Rutishauser, update form), and the
      // pair's squared norms carried by eq. (6).
      T s = 0, tau = 0;  // s = 0: no rotation
      if (!done && dT > tiny2 && dB > tiny2) {  // the decision of svd_smem_kernel.cuh's phase 2, written out
        const Acc g2 = g * g;
        if (g2 > apply2 * dT * dB) {
          // The angle in the data's precision; dB - dT in double, where it may cancel.
          const StepRotation<T> rot = step_rotation(static_cast<T>(dB - dT), static_cast<T>(g));
          const T t = rot.t;
          if (t != T(0)) {  // an angle below T's range is no rotation (as in svd_smem_kernel.cuh)
            rotated |= g2 > tol2 * dT * dB;
            s = rot.s;
            tau = rot.tau;
            dT = fmax(dT - static_cast<Acc>(t) * g, Acc(0));  // eq. (6)
            dB = dB + static_cast<Acc>(t) * g;
          }
        }
      }
      // 4. Every pair's rotation to every lane of the group, and applied.
      if ((li & 1) == 0) Ex::put_rotation(ex, grp, kp, s, tau);
      __syncwarp();
#pragma unroll
      for (int k0 = 0; k0 < P; k0 += Ex::kRotLoad) {
        T sk[Ex::kRotLoad], tk[Ex::kRotLoad];
        Ex::get_rotations(ex, grp, k0, sk, tk);
#pragma unroll
        for (int j = 0; j < Ex::kRotLoad; ++j) {
          const int k = k0 + j;
#pragma unroll
          for (int r = 0; r < R; ++r) rotate_pair(a[r][2 * k], a[r][2 * k + 1], sk[j], tk[j]);
          if constexpr (kWithV) rotate_pair(v[2 * k], v[2 * k + 1], sk[j], tk[j]);
        }
      }
      // Next step's slots. The columns: a static permutation of registers.
#pragma unroll
      for (int r = 0; r < R; ++r) next_slots(a[r]);
      if constexpr (kWithV) next_slots(v);
      // The norms follow their columns: slot 2k takes slot 2k-2 (k >= 2),
      // slot 2 takes slot 1, slot 2k+1 takes slot 2k+3, slot 2P-1 takes 2P-2.
      const Acc outT = kp == 0 ? dB : dT;
      const Acc inT = __shfl_sync(kFull, outT, gbase + 2 * (kp > 0 ? kp - 1 : 0));
      const Acc inB = __shfl_sync(kFull, dB, gbase + 2 * (kp < P - 1 ? kp + 1 : P - 1));
      const Acc nT = kp == 0 ? dT : inT;
      const Acc nB = kp == P - 1 ? dT : inB;
      dT = nT;
      dB = nB;
    }
    const bool group_rotated = (__ballot_sync(kFull, rotated) & gmask) != 0;
    if (!done) {
      sweeps = sweep;
      if (!group_rotated) {
        converged = true;
        done = true;
      }
    }
  }

  // Finalise: exact norms; S descending by rank counting; U = A's columns
  // normalised; V's rows follow.
  exact_norms(dT, dB);
  const Acc own = (li & 1) ? dB : dT;  // squared norm of column li
  const double tiny = tiny_norm<T>(p);
  int rank = 0, nonzero = 0;
#pragma unroll
  for (int c = 0; c < NC; ++c) {
    const Acc dc = __shfl_sync(kFull, own, gbase + c);
    rank += (dc > own) || (dc == own && c < li);
    nonzero += c < q && sqrt(dc) > tiny;
  }
  // A group's lanes all return here or none do: the shuffles below name only
  // the group's lanes (gmask).
  if (!live || bad) return;
  const double nrm = sqrt(own);
  const T sv = static_cast<T>(nrm * scale);
  if (li < q) args.S[md.s_off + rank] = sv;
  // The finite check of S, U and V (engine/finite_check.h) is done here, on
  // the values as they are written: a separate pass cost 0.46 ms of a million
  // 3 x 3 matrices' 1.7 ms (H100), the level kernel itself 0.31.
  bool nonfinite = li < q && !isfinite(sv);
  const T inv = nrm > tiny ? static_cast<T>(1.0 / nrm) : T(0);  // zero columns are completed later
  T* Ug = args.U ? args.U + md.u_off : nullptr;
  T* Vg = args.U ? args.V + md.v_off : nullptr;
#pragma unroll
  for (int c = 0; c < NC; ++c) {
    const int rc = __shfl_sync(gmask, rank, gbase + c);
    const T ic = __shfl_sync(gmask, inv, gbase + c);
    if (!Ug || c >= q) continue;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int row = r * NC + li;
      const T u = a[r][c] * ic;
      nonfinite |= row < p && !isfinite(u);
      if (row < p) Ug[static_cast<int64_t>(rc) * p + row] = u;
    }
    if constexpr (kWithV) {
      nonfinite |= li < q && !isfinite(v[c]);
      if (li < q) Vg[rc * q + li] = v[c];
    }
  }
  nonfinite = (__ballot_sync(gmask, nonfinite) & gmask) != 0;
  if (li == 0) {
    args.info[kmat] = !converged ? -1 : nonfinite ? -3 : sweeps;
    args.rank[kmat] = nonzero;
  }
}

// Values of A a lane may hold: beyond this the kernel spills (ptxas -v, sm_90).
constexpr int max_lane_values(size_t elem) { return elem == 4 ? 64 : 32; }

template <typename T, int NC, int R>
void launch_shape(const EngineArgs<T>& args, const int32_t* mats, int nmats, bool with_v, cudaStream_t stream) {
  if constexpr (NC * R > max_lane_values(sizeof(T))) {
    TORCH_CHECK(false, "jsvd internal: the warp kernel does not hold ", NC * R, " values per lane for this dtype");
  } else {
    const int64_t threads = static_cast<int64_t>(nmats) * NC;
    const int blocks = static_cast<int>((threads + kWarpBlock - 1) / kWarpBlock);
    if (with_v) svd_warp_kernel<T, NC, R, true><<<blocks, kWarpBlock, 0, stream>>>(args, mats, nmats);
    else svd_warp_kernel<T, NC, R, false><<<blocks, kWarpBlock, 0, stream>>>(args, mats, nmats);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
}

}  // namespace

WarpLaunch svd_warp_config(int64_t p, int64_t q, size_t elem) {
  WarpLaunch cfg;
  if (q < 1 || q > 32 || p < q) return cfg;
  if (p <= kThreadRows) {  // a thread per matrix (svd_thread.cuh)
    cfg.lanes = 1;
    cfg.rows = static_cast<int>(p);
    return cfg;
  }
  int nc = 4;
  while (nc < q) nc *= 2;
  for (int r : {1, 2, 4}) {
    if (p <= r * nc && r * nc <= max_lane_values(elem)) {
      cfg.lanes = nc;
      cfg.rows = r;
      break;
    }
  }
  return cfg;
}

template <typename T>
void launch_svd_warp(const EngineArgs<T>& args, const int32_t* mats, int nmats, const WarpLaunch& cfg, bool with_v,
                     cudaStream_t stream) {
  if (nmats == 0) return;
  if (cfg.lanes == 1) {
    const int blocks = (nmats + kThreadBlock - 1) / kThreadBlock;
    if (with_v) svd_thread_kernel<T, true><<<blocks, kThreadBlock, 0, stream>>>(args, mats, nmats);
    else svd_thread_kernel<T, false><<<blocks, kThreadBlock, 0, stream>>>(args, mats, nmats);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return;
  }
  switch (cfg.lanes * 8 + cfg.rows) {
    case 32 * 8 + 1: return launch_shape<T, 32, 1>(args, mats, nmats, with_v, stream);
    case 32 * 8 + 2: return launch_shape<T, 32, 2>(args, mats, nmats, with_v, stream);
    case 16 * 8 + 1: return launch_shape<T, 16, 1>(args, mats, nmats, with_v, stream);
    case 16 * 8 + 2: return launch_shape<T, 16, 2>(args, mats, nmats, with_v, stream);
    case 16 * 8 + 4: return launch_shape<T, 16, 4>(args, mats, nmats, with_v, stream);
    case 8 * 8 + 1: return launch_shape<T, 8, 1>(args, mats, nmats, with_v, stream);
    case 8 * 8 + 2: return launch_shape<T, 8, 2>(args, mats, nmats, with_v, stream);
    case 8 * 8 + 4: return launch_shape<T, 8, 4>(args, mats, nmats, with_v, stream);
    case 4 * 8 + 1: return launch_shape<T, 4, 1>(args, mats, nmats, with_v, stream);
    case 4 * 8 + 2: return launch_shape<T, 4, 2>(args, mats, nmats, with_v, stream);
    case 4 * 8 + 4: return launch_shape<T, 4, 4>(args, mats, nmats, with_v, stream);
    default: TORCH_CHECK(false, "jsvd internal: no warp kernel for ", cfg.lanes, " lanes x ", cfg.rows, " rows");
  }
}

template void launch_svd_warp<float>(const EngineArgs<float>&, const int32_t*, int, const WarpLaunch&, bool,
                                     cudaStream_t);
template void launch_svd_warp<double>(const EngineArgs<double>&, const int32_t*, int, const WarpLaunch&, bool,
                                      cudaStream_t);

}  // namespace cuda
}  // namespace jsvd
