// One-sided Jacobi SVD of a matrix, or of a block-column pair, held entirely in
// shared memory (W-cycle paper §IV-B): the kernel of levels "whole" and "pair".
//
// One thread block per task. Its columns are orthogonalised by round-robin
// steps; each rotation is handled by a group of TPP lanes (TPP = α·32,
// α ∈ {1, ½, ¼, ⅛}), which splits the rows among its lanes. Squared column
// norms are carried from rotation to rotation by eq. (6) and recomputed exactly
// at the start of every sweep, so they cannot drift.
//
// Whole mode (kPair = false): the task is a whole matrix (rows >= cols); the
// block iterates to convergence and writes U, S, V sorted by descending S.
// Pair mode: the task is the pair [A_i A_j] of a blocked matrix (Observation 1:
// its SVD yields the rotation J_ij = V_ij); the block rotates the pair's columns
// in place and reports whether the pair was already orthogonal. A pair's tasks
// after the first of a sweep do only the cross pairs.
// Queued pair mode (args.pair_next; the engine's default): one launch takes a
// whole sweep's tasks in step order; a task waits only for the earlier tasks on
// its two block columns (args.pair_done), so a step's last blocks leave no SM
// idle. Tasks wait only on tasks taken before them: no deadlock.
//
// What rides under each column (V accumulates every rotation; inner products
// run over A's p rows only): whole mode, V itself (q rows); float32 pairs, the
// pair's q rows of V; float64 pairs, the pair's 2w x 2w rotation J (half the
// shared memory, so fewer steps), applied after the sweep as one small GEMM
// (§IV-B's update); float32 pairs of 512 rows (kDelta), E = J - I, whose small
// late-sweep entries keep their relative precision; float64 whole matrices
// whose V does not fit beside A (kLogV), nothing: V stays in global memory and
// takes each sweep's log of rotations. Each choice was measured
// (docs/kernel-notes.md).
//
// The variants' code: kernel_register_steps.cuh (kRegRows > 0: one column of
// a group's pairs in registers), kernel_delta_steps.cuh (kDelta),
// kernel_log_v.cuh (kLogV) and kernel_write_back.cuh (the end of a task),
// pasted into the kernel body.
// Included by svd_smem.cu (the launchers) only: the instantiations live there.
#pragma once

#include <cuda_pipeline.h>

#include <type_traits>

#include "levels/smem/halving_order.h"
#include "common/jacobi_device.cuh"
#include "levels/smem/svd_smem.h"

namespace jsvd {
namespace cuda {
namespace {


// Spins until *count >= need (device-scope acquire: what the tasks that
// counted wrote before their release is visible afterwards).
__device__ __forceinline__ void wait_count(const int32_t* count, int32_t need) {
  for (;;) {
    int32_t v;
    asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(count) : "memory");
    if (v >= need) return;
    __nanosleep(128);
  }
}

// A queued block-pair task's completion (svd_smem_kernel): on leaving the
// kernel, by whatever return, the block's writes are released and the task
// counted on its two block columns. Every return of the kernel is taken by
// the whole block, so the barrier is safe.
struct TaskDone {
  int32_t* counts;  // nullptr: not queued
  int32_t b0, b1;   // the task's block columns
  __device__ __forceinline__ ~TaskDone() {
    if (!counts) return;
    __syncthreads();  // every thread's global writes of the task are issued
    if (threadIdx.x == 0) {
      __threadfence();  // release: those writes before the counts
      atomicAdd(counts + b0, 1);
      if (b1 != b0) atomicAdd(counts + b1, 1);
    }
  }
};

// f(l, r) for every column l < ncols and row r < len: a warp per column, its
// lanes over the rows (coalesced, and no integer division per element, which
// took most of the copy's instructions). Only whole warps take part, as the
// block size need not be a multiple of 32 (it is at least 32). kStep = 4:
// every fourth row (len a multiple of 4), for 16-byte pieces. kLen > 0: len
// is known at compile time (kLen, a multiple of 32 kStep) and the row loop is
// unrolled, so that each piece's offset is an immediate (the pair copies of
// kDelta; ncu at 100x512²: their loops with run-time bounds issued about 20
// integer instructions a 16-byte piece).
template <int kStep = 1, int kLen = 0, typename F>
__device__ __forceinline__ void for_each_column(int ncols, int len, F f) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nwarps = blockDim.x >> 5;
  if constexpr (kLen > 0) {
    static_assert(kLen % (32 * kStep) == 0, "whole warps of pieces");
    for (int l = warp; l < ncols; l += nwarps) {
#pragma unroll
      for (int i = 0; i < kLen / (32 * kStep); ++i) f(l, kStep * lane + 32 * kStep * i);
    }
  } else {
    if (warp >= nwarps) return;
    for (int l = warp; l < ncols; l += nwarps) {
#pragma unroll(kStep == 1 ? 4 : 2)
      for (int r = kStep * lane; r < len; r += 32 * kStep) f(l, r);
    }
  }
}

// One element global -> shared without passing through registers (cp.async);
// complete after __pipeline_commit() and __pipeline_wait_prior(0).
template <typename T>
__device__ __forceinline__ void copy_async(T* dst_smem, const T* src) {
  __pipeline_memcpy_async(dst_smem, src, sizeof(T));
}

// The largest block whose lanes can each hold `words` 32-bit registers of a
// pair column (cross steps held in registers, below), at most 128 words.
constexpr int reg_block_limit(int64_t words) { return words > 32 ? 256 : words > 16 ? 512 : 1024; }
constexpr int64_t kMaxRegWords = 128;

// kDelta: two blocks of 512 threads an SM (64 registers) at 512 rows (1024
// rows: one block, shared memory allows no more). The others name a
// minimum of one block, which ptxas allocates differently from naming none
// (fewer spills, faster: docs/kernel-notes.md).
template <typename T, int TPP, bool kPair, bool kWithV, int kRegRows = 0, bool kDelta = false, bool kLogV = false>
__global__ void __launch_bounds__(kDelta ? (delta_two_columns(kRegRows * 32) ? 256 : 512)
                                         : reg_block_limit(kRegRows * sizeof(T) / 4),
                                  kDelta && delta_two_columns(kRegRows * 32) ? 3 : 1)
    svd_smem_kernel(EngineArgs<T> args, const int32_t* whole_tasks, const PairTask* pair_tasks) {
  static_assert(!kLogV || (!kPair && !kWithV), "V by the log: whole matrices, without V's rows in shared memory");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ int s_rot;  // a rotation above tol in this sweep
  __shared__ int s_any;  // any rotation in this sweep
  // Inner products and norms accumulate in double (for float32 they are then
  // exact at float32's scale), except the x^T y of kDelta's cross steps,
  // summed in float32 (cross_steps_delta).
  using Acc = double;
  __shared__ int s_rank;
  __shared__ T s_red[32];

  int k, c0, c1, w0, w1;
  bool intra = true;  // whole mode: every pair
  __shared__ int s_task;
  const bool queued = kPair && args.pair_next != nullptr;
  if (kPair) {
    if (queued) {
      // The next task of the sweep's queue, once the tasks before it on its
      // two block columns are done. A converged matrix's tasks touch nothing
      // (they return below), so they need not wait: a sweep queued past
      // convergence (the engine's pipelined check) is then a pass of blocks
      // that count themselves done, not a chain of waits.
      if (threadIdx.x == 0) {
        const int t = atomicAdd(args.pair_next, 1);
        const PairTask pt = pair_tasks[t];
        if (!args.state[pt.k].converged) {
          wait_count(args.pair_done + pt.b0, pt.need0);
          wait_count(args.pair_done + pt.b1, pt.need1);
        }
        s_task = t;
      }
      __syncthreads();  // (wait_count's acquire extends to the block's later reads)
    } else {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
      // One round-robin step, launched as a programmatic dependent of the
      // previous one (launch_svd_pair): wait for it to complete and its
      // writes to be visible, then let the next step's blocks be scheduled.
      asm volatile("griddepcontrol.wait;" ::: "memory");
      asm volatile("griddepcontrol.launch_dependents;");
#endif
    }
  }
  // Queued: counts the task done on its block columns at every return below.
  // (The task is read here and again below: reading it once into one PairTask
  // changed ptxas's allocation of most pair kernels, the 256² one's spills 14
  // -> 62 bytes, so it stays.)
  const TaskDone done{queued ? args.pair_done : nullptr, queued ? pair_tasks[s_task].b0 : 0,
                      queued ? pair_tasks[s_task].b1 : 0};
  if (kPair) {
    const PairTask pt = pair_tasks[queued ? s_task : blockIdx.x];
    k = pt.k;
    c0 = pt.c0;
    c1 = pt.c1;
    w0 = pt.w0w1 & 0xffff;
    w1 = (pt.w0w1 >> 16) & kPairWidthMask;
    intra = (pt.w0w1 & kPairIntra) != 0;
    if (args.state[k].converged) return;
  } else {
    k = list_at(whole_tasks, blockIdx.x);
  }
  const MatrixDesc md = matrix_desc(args, k);
  const int p = md.p;
  if (!kPair) {
    c0 = 0;
    w0 = md.q;
    c1 = md.q;
    w1 = 0;
  }
  const int c = w0 + w1;                      // columns held by this block
  // V (whole mode, and float32 pairs) or J (float64 pairs) or E = J - I
  // (kDelta) rows under each column
  constexpr bool kCarryJ = kPair && kWithV && (pair_carries_rotation(sizeof(T)) || kDelta);
  // The register steps: rows of A in a lane's first kRegA registers (the rest hold V's, J's or E's).
  constexpr int kRegA = kDelta ? kRegRows - 1 : kWithV ? kRegRows / 2 : kRegRows;
  // Whole matrices on the register steps (args.pad_rows, chosen by the launch's planner): A's rows
  // and V's padded with zero rows to kRegA lanes' worth each, so that they split exactly among a
  // group's lanes (rows_exact, kernel_register_steps.cuh). Zero rows change no inner product, norm
  // or rotation, and stay zero.
  const bool padded = !kPair && kRegRows > 0 && args.pad_rows && p <= kRegA * TPP;
  const int pa = padded ? kRegA * TPP : p;  // rows of A in shared memory (p of them the matrix's)
  const int vr = kWithV ? (kCarryJ ? c : padded ? (kRegRows - kRegA) * TPP : md.q) : 0;
  const int ld = column_stride(pa + vr, TPP);  // (svd_smem.h: bank conflicts)
  const bool pair_quads = kPair && sizeof(T) == sizeof(float) && (!kCarryJ || kDelta) &&
                          ((p | (kCarryJ ? 0 : vr) | ld) & 3) == 0 &&
                          ((md.a_off | (kWithV && !kCarryJ ? md.v_off : 0)) & 3) == 0;
  auto gcol = [&](int l) { return l < w0 ? c0 + l : c1 + (l - w0); };

  // Shared memory: d, pg (double) | As | ps, ptau (T) | rank (int)
  const int max_pairs = c;  // >= (c + 1) / 2 round-robin pairs and >= w0 cross pairs
  double* d = reinterpret_cast<double*>(smem_raw);
  double* pg = d + c;  // per pair of the current step: x^T y
  T* As = reinterpret_cast<T*>(pg + max_pairs);
  T* ps = As + static_cast<size_t>(c) * ld;  // per pair: sin (0: no rotation) and tau
  T* ptau = ps + max_pairs;
  int* rank_s = reinterpret_cast<int*>(ptau + max_pairs);

  const int tid = threadIdx.x, nt = blockDim.x;
  const int g = tid / TPP, lane = tid % TPP, G = nt / TPP;
  const T* Ag = args.A + md.a_off;

  int local_bad = 0;
  T local_max = 0;
  if constexpr (kPair) {
    // Asynchronous copies (cp.async): no register staging, and as many reads
    // in flight as the block issues. A pair of a large matrix has one block of
    // 8 warps per SM, where synchronous loads left the copy latency-bound.
    // Float32 columns whose rows, offsets and stride are multiples of 4 move
    // in 16-byte pieces (pair_quads): a quarter of the copy instructions.
    if (pair_quads) {
      auto piece = [&](int l, int r) {
        __pipeline_memcpy_async(As + l * ld + r, Ag + static_cast<int64_t>(gcol(l)) * p + r, 16);
      };
      for_each_column<4, kDelta ? (kRegRows - 1) * 32 : 0>(c, p, piece);  // (kDelta: p = 32 (kRegRows - 1), checked below)
      if constexpr (kWithV && !kCarryJ) {
        const T* Vg = args.Vw + md.v_off;
        for_each_column<4>(c, vr, [&](int l, int r) {
          __pipeline_memcpy_async(As + l * ld + p + r, Vg + static_cast<int64_t>(gcol(l)) * vr + r, 16);
        });
      }
    } else {
      for_each_column(c, p, [&](int l, int r) { copy_async(As + l * ld + r, Ag + static_cast<int64_t>(gcol(l)) * p + r); });
      if constexpr (kWithV && !kCarryJ) {
        const T* Vg = args.Vw + md.v_off;
        for_each_column(c, vr, [&](int l, int r) {
          copy_async(As + l * ld + p + r, Vg + static_cast<int64_t>(gcol(l)) * vr + r);
        });
      }
    }
    __pipeline_commit();
  } else {
    for_each_column(c, pa, [&](int l, int r) {
      const T v = r < p ? Ag[static_cast<int64_t>(gcol(l)) * p + r] : T(0);
      As[l * ld + r] = v;
      local_bad |= !isfinite(v);
      local_max = fmax(local_max, fabs(v));
    });
  }
  if constexpr (kWithV && (!kPair || kCarryJ)) {  // V (whole mode) or J (float64 pairs) starts at I, E at 0
    for_each_column(c, vr, [&](int l, int r) { As[l * ld + pa + r] = (r == l && !kDelta) ? T(1) : T(0); });
  }
  if constexpr (kPair) __pipeline_wait_prior(0);

  double scale = 1.0;
  if (!kPair) {
    // Non-finite input: NaN outputs, info = -2. Otherwise divide by max|a| so
    // that squared norms neither overflow nor underflow (pair mode: the
    // blocked prologue did this once for the whole matrix).
    if (__syncthreads_or(local_bad)) {
      write_non_finite(args, md, k, tid, nt);
      if constexpr (kLogV) {
        if (args.vlog_nrec && tid == 0) args.vlog_nrec[2 * blockIdx.x] = -1;  // (V written: no deferred pass)
      }
      return;
    }
    const T amax = block_max(local_max, s_red);
    if (amax > T(0)) {
      scale = static_cast<double>(amax);
      // (a division: 1 / max|a| overflows for subnormal max|a|)
      for_each_column(c, p, [&](int l, int r) { As[l * ld + r] /= amax; });
    }
  }
  __syncthreads();

  const StepTolerances tols = step_tolerances<T>(args.tol, p);  // (jacobi_device.cuh)
  const double tol2 = tols.tol2, apply2 = tols.apply2;
  const double tiny2 = negligible_norm2<T>(p);
  // xGESVJ's stop (converged_by_bound, core.h) for float64 block pairs (apply = tol): the largest
  // squared cosine and sine of the sweep's rotations, kept in shared memory (registers: the 64-register
  // kernels spilled), as the bits of non-negative floats, passed to end_sweep_kernel. The rotated pairs
  // suffice for the cosine: a sweep with no pair above tol ends anyway, and one with a pair above tol has
  // its largest cosine among them. Not whole matrices: this kernel's last sweep on them rotates no
  // rounding noise above tol, so the bound, tried there, never saved a sweep (docs/experiments.md, stop 53).
  constexpr bool kBound = kPair && sizeof(T) == sizeof(double);
  __shared__ unsigned s_cos2, s_sin2;
  auto track_bound = [&](double gabs, double dx, double dy, T sn) {
    if constexpr (kBound) {
      // No double division (its registers made the 64-register kernels spill): float reciprocals of the
      // squared norms (the data are scaled to max|a| = 1, so norms above negligible_norm2 are in float's
      // range, and so are |g| / dx and |g| / dy where the pair rotates), their few ulp of error far below
      // the bound's slack, then rounded up by 2^-20. A stale read of a maximum only costs an atomic.
      const float gx = static_cast<float>(gabs * __frcp_rn(static_cast<float>(dx)));
      const float gy = static_cast<float>(gabs * __frcp_rn(static_cast<float>(dy)));
      const float sf = static_cast<float>(sn);
      const unsigned cb = __float_as_uint(gx * gy * 1.000001f), sb = __float_as_uint(sf * sf * 1.000001f);
      if (cb > s_cos2) atomicMax(&s_cos2, cb);
      if (sb > s_sin2) atomicMax(&s_sin2, sb);
    }
  };
  // Pairs of a step. Whole matrices, and a block pair's first task of a sweep
  // (intra): the round-robin over all c columns. Other block pairs: only the
  // w0 x w1 cross pairs, in max(w0, w1) steps (column k of the first block
  // meets column (k + s) mod W of the second); the pairs inside each block
  // were handled by this sweep's intra task, so redoing them would only
  // double the rotations.
  const int e = c + (c & 1);
  const int W = w0 > w1 ? w0 : w1;
  const int nsteps = intra ? e - 1 : W;
  const int npairs = intra ? e / 2 : w0;
  auto step_pair = [&](int step, int pk, int& i, int& j) -> bool {
    if (intra) {
      round_robin_pair(e, step, pk, i, j);
      return j < c;  // else the dummy slot of an odd column count
    }
    i = pk;
    j = (pk + step) % W;
    if (j >= w1) return false;
    j += w0;
    return true;
  };
  // d <- the exact squared norms of the columns (of A's rows only).
  auto exact_norms = [&] {
    if constexpr (kDelta) {
      // 32 columns, a warp per column, rows split exactly (checked on entry:
      // p = 32 (kRegRows - 1)): two columns at a time, two sums each, so
      // that four chains of double adds interleave instead of one (ncu,
      // 100x512²: the plain loop, its sums one dependent chain per column,
      // took 8% of the kernel's stall samples).
      constexpr int H = kRegRows - 1;
      for (int l = g; l < c; l += 2 * G) {  // (c = 32, G = 8 or 16)
        const T* x0 = As + l * ld + lane;
        const T* x1 = x0 + G * ld;
        Acc a0[2] = {0, 0}, a1[2] = {0, 0};
#pragma unroll
        for (int h = 0; h < H; ++h) {
          const Acc u = Acc(x0[h * 32]), v = Acc(x1[h * 32]);
          a0[h & 1] += u * u;
          a1[h & 1] += v * v;
        }
        Acc s0 = a0[0] + a0[1], s1 = a1[0] + a1[1];
#pragma unroll
        for (int o = 16; o > 0; o /= 2) {
          s0 += __shfl_xor_sync(0xffffffffu, s0, o);
          s1 += __shfl_xor_sync(0xffffffffu, s1, o);
        }
        if (lane == 0) {
          d[l] = static_cast<double>(s0);
          d[l + G] = static_cast<double>(s1);
        }
      }
    } else {
      for (int l = g; l < c; l += G) {
        const T* x = As + l * ld;
        Acc acc = 0;
        for (int r = lane; r < p; r += TPP) acc += Acc(x[r]) * Acc(x[r]);
        acc = group_sum<TPP>(acc);
        if (lane == 0) d[l] = static_cast<double>(acc);
      }
    }
  };
#include "levels/smem/kernel_log_v.cuh"
#include "levels/smem/kernel_register_steps.cuh"
#include "levels/smem/kernel_delta_steps.cuh"
  int sweeps = 0;
  bool converged = false, first_rotated = false, applied = false;
  for (int sweep = 1; sweep <= args.max_sweeps; ++sweep) {
    if (tid == 0) {
      s_rot = 0;
      s_any = 0;
      if constexpr (kBound) s_cos2 = s_sin2 = 0;
    }
    exact_norms();  // once per sweep
    __syncthreads();
    if (regs) {
      // (regs excludes the intra tasks that cannot take levels_in_registers)
      if (kTwoChains && !intra) cross_steps_delta();
      else if (kPair && (!kIntraRegs || !intra)) cross_steps_in_registers();
      else if (rows_exact) levels_in_registers(std::true_type{});
      else if constexpr (!kPair) levels_in_registers(std::false_type{});
    } else if constexpr (!kDelta)  // (kDelta: the register steps, checked on entry)
      for (int step = 0; step < nsteps; ++step) {
      // A step in three barrier-separated phases; phase 2 computes each
      // rotation once per pair, not redundantly in every lane of its group.
      // 1. each group: the pair's inner product
      for (int pk = g; pk < npairs; pk += G) {
        int i, j;
        if (!step_pair(step, pk, i, j)) continue;
        if (d[i] <= tiny2 || d[j] <= tiny2) continue;  // a (negligible) zero column is orthogonal to all
        const T* x = As + i * ld;
        const T* y = As + j * ld;
        // Float32: each product rounded once, then summed in double. Its
        // rounding (<= 2^-24 |x_r y_r|, random in sign) stays far below the
        // eps test, and one conversion per row instead of two relieves the
        // XU pipe, the busiest in ncu at 100x512x512 (47% of issue).
        Acc axy = 0;
        for (int r = lane; r < p; r += TPP) axy += Acc(x[r] * y[r]);
        axy = group_sum<TPP>(axy);
        if (lane == 0) pg[pk] = axy;
      }
      __syncthreads();
      // 2. one thread per pair: the rotation, and the norms it leaves (eq. (6)).
      // The same decision is written out in register_step and in svd_warp.cu:
      // one shared helper cost float64 3-6% on the H100 (register allocation;
      // benchmarks/RESULTS.md), so keep the three in step by hand.
      for (int pk = tid; pk < npairs; pk += nt) {
        int i, j;
        ps[pk] = T(0);
        if (!step_pair(step, pk, i, j) || d[i] <= tiny2 || d[j] <= tiny2) continue;
        const double gg = pg[pk];
        const double di = d[i], dj = d[j];  // carried by eq. (6), exact at each sweep's start
        const double gabs = fabs(gg);
        // |g| > tol sqrt(di dj), squared: no square roots on the critical path
        if (!(gabs * gabs > apply2 * di * dj)) continue;
        // The angle in the data's precision (the difference dj - di in double,
        // where it may cancel), so float32 pays no double divisions.
        // The fast float32 rotation (jacobi_device.cuh), also for block pairs,
        // whose V takes many more rotations: against the exact formulas, V's
        // orthogonality at 512², 1024² and 1536² was unchanged on the H100 and
        // 256²-512² ran 5% faster (benchmarks/RESULTS.md).
        const T diff = static_cast<T>(dj - di), gt = static_cast<T>(gg);
        const StepRotation<T> rot = step_rotation(diff, gt);
        const T t = rot.t;
        if (t == T(0)) continue;  // an angle below T's range: no rotation, and none to wait for
        ps[pk] = rot.s;
        ptau[pk] = rot.tau;
        track_bound(gabs, di, dj, rot.s);
        d[i] = fmax(di - static_cast<double>(t) * gg, 0.0);  // eq. (6), cancellation-free form
        d[j] = dj + static_cast<double>(t) * gg;
        s_any = 1;
        if (gabs * gabs > tol2 * di * dj) s_rot = 1;
      }
      __syncthreads();
      // 3. each group: apply its pair's rotation to the A rows and the V rows
      for (int pk = g; pk < npairs; pk += G) {
        const T ss = ps[pk];
        if constexpr (kLogV) {
          if (lane == 0) {
            int i, j;
            step_pair(step, pk, i, j);
            log_put(step * npairs + pk, ss, ptau[pk], i, j);
          }
        }
        if (ss == T(0)) continue;
        int i, j;
        step_pair(step, pk, i, j);
        T* x = As + i * ld;
        T* y = As + j * ld;
        const T tau = ptau[pk];
        for (int r = lane; r < ld; r += TPP) rotate_pair(x[r], y[r], ss, tau);
      }
      __syncthreads();
    }
    if constexpr (kLogV) {
      if (s_any != 0) {
        if (args.vlog_nrec && regs) {
          if (lrec != lsweep) __trap();  // (the ring's sweeps as levels_in_registers logs them)
          // Deferred: this sweep's records join the pending ones; where the ring is then full, the oldest
          // sweep is applied here, so that the next one has room (log_v_deferred_sweeps: a few sweeps).
          lpending += lsweep;
          if (lpending == lring) {
            if (!vinit) {
              init_v();
              __syncthreads();  // (apply_log stages V's rows from global memory)
            }
            apply_log(lhead, lsweep, G);
            lhead = lhead + lsweep == lring ? 0 : lhead + lsweep;
            lpending -= lsweep;
          }
        } else {
          if (!vinit) {  // (deferred but on the shared-memory steps: each sweep here, as without it)
            init_v();
            __syncthreads();
          }
          apply_log(0, regs ? lrec : nsteps, regs ? G : npairs);
        }
      }
      lrec = 0;
    }
    sweeps = sweep;
    const bool rot = s_rot != 0;
    applied |= s_any != 0;
    if (sweep == 1) first_rotated = rot;
    // (kBound: the steps ended with a barrier.) For end_sweep_kernel, across the matrix's tasks: valid
    // where each column pair is tested once a sweep (one inner sweep, the default), as the scalar rule
    // assumes.
    if (kBound && tid == 0 && args.max_sweeps == 1) {
      MatrixState& st = args.state[k];
      atomicMax(&st.cos_bits, __float_as_int(sqrtf(__uint_as_float(s_cos2))));
      atomicMax(&st.sin_bits, __float_as_int(sqrtf(__uint_as_float(s_sin2))));
      st.tracked = 1;
    }
    __syncthreads();  // all have read s_rot before it is reset
    if (!rot) {
      converged = true;
      break;
    }
  }

#include "levels/smem/kernel_write_back.cuh"
}

}  // namespace
}  // namespace cuda
}  // namespace jsvd
