// One-sided Jacobi SVD of a matrix, or of a block-column pair, held entirely in
// shared memory (W-cycle paper §IV-B).
//
// One thread block per task. Its columns are orthogonalised by round-robin
// steps; each rotation is handled by a group of TPP lanes (TPP = α·32,
// α ∈ {1, ½, ¼, ⅛}), which splits the rows among its lanes. Squared column
// norms are carried from rotation to rotation by eq. (6) and recomputed exactly
// at the start of every sweep, so they cannot drift; only x^T y is a fresh
// inner product per rotation.
//
// Whole mode: the task is a whole matrix (rows >= cols); the block iterates to
// convergence and writes U, S, V sorted by descending S.
// Pair mode: the task is the pair [A_i A_j] of a blocked matrix (W-cycle
// Observation 1: its SVD yields the rotation J_ij = V_ij); the block rotates the
// pair's columns in place and reports whether the pair was already orthogonal.
// A pair's tasks after the first of a sweep do only the cross pairs; where the
// registers allow (kRegRows), a warp keeps one column of A_i in registers for
// all of them (cross_steps_in_registers). Whole matrices where the registers
// allow: each lane group keeps one column of its pairs in registers, pairing
// the columns in the recursive-halving order (levels_in_registers,
// halving_order.h).
// Pair mode, queued (args.pair_next set; the engine's default): one launch
// takes the tasks of a whole sweep, every round-robin step in step order. A
// block takes the next task from the queue, not by its block index, and waits
// only for the earlier tasks on the task's two block columns (args.pair_done
// counts the tasks done on each), not for the whole previous step, so a
// step's last blocks no longer leave SMs idle. A task waits only on tasks that
// running blocks took before it, so the queue cannot deadlock, whatever order
// the blocks are scheduled in. Otherwise: one launch per round-robin step.
//
// V is accumulated by applying every rotation to a second set of rows under
// each column: each column in shared memory is [a_l; v_l], and inner products
// run over A's p rows only. Whole mode: those rows are V itself (q of them).
// Pair mode, float32: the pair's q rows of V. Pair mode, float64: the pair's
// 2w x 2w rotation J_ij, started at I, and after the sweep
// [V_i V_j] <- [V_i V_j] J_ij in one small GEMM (§IV-B's update). J halves a
// square float64 pair's shared memory, and so its round-robin steps, each a
// pass over A and V in global memory: 100x512x512 float64 went from 183 to 126
// ms on the H100. Float32 keeps V's rows: with J, V's orthogonality at 512²
// was 2.5x worse (1.3e-4 against 5.3e-5) and small batches were slower
// (benchmarks/RESULTS.md). Float32 pairs with 512 rows a column (kDelta,
// pair_delta_fits in svd_smem.h) carry E = J - I instead, started at 0: the
// identity enters each rotation as a shift (rotate_pair_shifted), E's small
// late-sweep entries keep their relative precision, and V + V E rounds V's
// entries once a task instead of once a rotation. Shared memory halves (544
// rows a column instead of 1024), so two blocks share an SM, and V's update
// is a GEMM instead of 16 rotated rows a lane a step. Same-build A/B on the
// H100: 100x512x512 float32 124.5 -> 93.9 ms, ||V^T V - I|| 5.4e-5 -> 2.6e-5.
// At 512 rows a block then has 8 warps of two columns each
// (cross_steps_delta), three blocks an SM: 89.5 -> 81.8 ms. Then V + V E and
// the copies with compile-time offsets, the exact norms in interleaved chains
// and a warp's two rotation decisions in one instruction stream (ncu found the
// kernel issue-bound; benchmarks/RESULTS.md): 81.8 -> 70.0 ms.
//
// Included by svd_smem.cu (the launchers) only: the kernel's instantiations
// live there.
#pragma once

#include <cuda_pipeline.h>

#include <type_traits>

#include "halving_order.h"
#include "jacobi_device.cuh"
#include "svd_smem.h"

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
// minimum of one block, which ptxas allocates differently from naming none:
// same-call A/B on the H100, 200x256x256 float32 (bucket 16, spills 54 -> 14
// bytes) 28.5 ms without it, 27.1 with it.
template <typename T, int TPP, bool kPair, bool kWithV, int kRegRows = 0, bool kDelta = false>
__global__ void __launch_bounds__(kDelta ? (delta_two_columns(kRegRows * 32) ? 256 : 512)
                                         : reg_block_limit(kRegRows * sizeof(T) / 4),
                                  kDelta && delta_two_columns(kRegRows * 32) ? 3 : 1)
    svd_smem_kernel(EngineArgs<T> args, const int32_t* whole_tasks, const PairTask* pair_tasks) {
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
  const int vr = kWithV ? (kCarryJ ? c : md.q) : 0;
  const int ld = column_stride(p + vr, TPP);  // (svd_smem.h: bank conflicts)
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
    for_each_column(c, p, [&](int l, int r) {
      const T v = Ag[static_cast<int64_t>(gcol(l)) * p + r];
      As[l * ld + r] = v;
      local_bad |= !isfinite(v);
      local_max = fmax(local_max, fabs(v));
    });
  }
  if constexpr (kWithV && (!kPair || kCarryJ)) {  // V (whole mode) or J (float64 pairs) starts at I, E at 0
    for_each_column(c, vr, [&](int l, int r) { As[l * ld + p + r] = (r == l && !kDelta) ? T(1) : T(0); });
  }
  if constexpr (kPair) __pipeline_wait_prior(0);

  double scale = 1.0;
  if (!kPair) {
    // Non-finite input: NaN outputs, info = -2. Otherwise divide by max|a| so
    // that squared norms neither overflow nor underflow (pair mode: the
    // blocked prologue did this once for the whole matrix).
    if (__syncthreads_or(local_bad)) {
      write_non_finite(args, md, k, tid, nt);
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
  // Register steps (kRegRows > 0): the recursive-halving ordering
  // (halving_order.h). At each level a group owns one column x of every pair
  // it does and keeps x in registers for all of the level's steps, so a step
  // reads and writes only the partner y in shared memory (2 instead of 5
  // accesses per row, plus A's rows once for x^T y in the phased steps), and
  // the rotation is computed by every lane of the group at once: one barrier
  // per step instead of three, and no step waits on a single thread. A block
  // pair's cross task (not intra) is level 0 alone: [A_i A_j]'s cross pairs.
  const int nrows = p + vr;
  const HalvingOrder order{c, w1 > 0 ? w0 : (c + 1) / 2};
  // (kDelta's cross tasks skip levels(), a loop of integer divisions, 1.3k
  // instructions a task in ncu at 100x512². Not moved for the others: that
  // changed ptxas's allocation of most kernels, the 256² pair kernel's spills
  // 14 -> 50 bytes.)
  const int nlevels = kDelta && !intra ? 1 : order.levels();
  // Rows split exactly (rows_exact): A's rows are the lanes' first kRegA
  // registers and the rest fill all kRegRows, so the steps' loops need no
  // per-row bounds (each cost two integer instructions and predicated the
  // row's work: ~455 instructions a step in the SASS of the 256² pair kernel,
  // which ncu found issue-bound, 77% of issue slots), and x^T y sums in two
  // chains instead of one.
  // Square pairs and whole matrices (V's rows under A's: p = q) and svdvals
  // (A's rows alone) of a size that fills the bucket take it.
  constexpr int kRegA = kDelta ? kRegRows - 1 : kWithV ? kRegRows / 2 : kRegRows;
  const bool rows_exact = kRegRows > 0 && p == kRegA * TPP && nrows == kRegRows * TPP;
  // Block pairs: their cross tasks in cross_steps_in_registers (below); their
  // first (intra) task of a sweep in registers, by the halving order, where
  // the rows split exactly (same-call A/B on the H100: 200x256² float32 31.1
  // -> 29.3 ms, 100x512² 135.7 -> 130.1, 1x1536² 64.8 -> 63.6). With bounded
  // rows it was slower (10x1024² float32 275 -> 297 ms, register pressure).
  // Float32 with V only: float64 pairs carry J, whose rows rarely split
  // exactly, and compiling the path into their kernels, or into the svdvals
  // ones, cost registers and time (200x256² svdvals 36.5 -> 37.7 ms).
  constexpr bool kIntraRegs = !kPair || (sizeof(T) == sizeof(float) && kWithV);
  // kDelta at 512 rows: a group owns two columns of the first block
  // (cross_steps_delta; delta_threads in svd_smem.h).
  constexpr bool kTwoChains = kDelta && delta_two_columns(kRegRows * 32);
  const int owners = kTwoChains ? 2 * G : G;
  const bool regs = kRegRows > 0 && nrows <= kRegRows * TPP &&
                    !(kPair && (owners < w0 || (intra && !(kIntraRegs && rows_exact))));
  // kDelta has only the register steps on exactly split rows, E's shifts
  // written for them (the launcher takes it only for such tasks:
  // pair_delta_fits, svd_smem.h).
  if (kDelta && !(regs && rows_exact && (kTwoChains ? 2 * G == w0 : G >= w0))) __trap();
  // The rotation decision of a register step (phase 2 of the shared-memory
  // steps, below): x^T y = axy, the squared norms dx (the caller's column,
  // updated here) and dy (*dy_slot, which the writer lane updates by eq. (6)
  // after before_write()), sin and tau for rotate_pair (left 0 if none), and
  // the sweep's flags. register_step and cross_steps_delta share it.
  auto decide_rotation = [&](Acc axy, double dy, double& dx, double* dy_slot, bool writer, auto before_write,
                             T& ss, T& tau, bool& any_rot, bool& above_tol) {
    const double gabs = fabs(axy);
    if (gabs * gabs > apply2 * dx * dy) {
      const StepRotation<T> rot = step_rotation(static_cast<T>(dy - dx), static_cast<T>(axy));
      if (rot.t != T(0)) {
        ss = rot.s;
        tau = rot.tau;
        const double t = static_cast<double>(rot.t);
        before_write();
        if (writer) *dy_slot = dy + t * axy;  // eq. (6)
        any_rot = true;
        above_tol |= gabs * gabs > tol2 * dx * dy;
        dx = fmax(dx - t * axy, 0.0);
      }
    }
  };
  // One register step (levels_in_registers, cross_steps_in_registers): the
  // group's column x (its rows xr in registers, squared norm dx) against
  // column y in shared memory, whose squared norm is *dy_slot: x^T y, the
  // rotation decision of phase 2 of the shared-memory steps (below), eq. (6),
  // and the rotation of x and y; the caller's barrier then passes y on. xi,
  // yi: the two columns' indices in the block (kDelta: E's identity part).
  auto register_step = [&](auto& xr, T* y, double* dy_slot, double& dx, bool& any_rot, bool& above_tol,
                           int xi, int yi, auto exact) {
    constexpr int R = kRegRows > 0 ? kRegRows : 1;
    const double dy = *dy_slot;
    T ss = T(0), tau = T(0);
    if (dx > tiny2 && dy > tiny2) {
      Acc axy = 0;
      if constexpr (decltype(exact)::value) {
        constexpr int H = kRegA > 0 ? kRegA : 1;
        Acc part[2] = {0, 0};
        if constexpr (sizeof(T) == sizeof(float) && H % 2 == 0) {
          // Float32: two rows' products summed in one FFMA before the
          // conversion, which halves the conversions (the XU pipe) and double
          // additions; two roundings per two rows, as one per product before.
#pragma unroll
          for (int h = 0; h < H; h += 2)
            part[(h / 2) & 1] += Acc(fmaf(xr[h + 1], y[lane + (h + 1) * TPP], xr[h] * y[lane + h * TPP]));
        } else {
#pragma unroll
          for (int h = 0; h < H; ++h) part[h & 1] += Acc(xr[h] * y[lane + h * TPP]);
        }
        axy = part[0] + part[1];
      } else {
#pragma unroll
        for (int h = 0; h < R; ++h) {
          const int r = lane + h * TPP;
          if (r < p) axy += Acc(xr[h] * y[r]);
        }
      }
      axy = group_sum<TPP>(axy);
      decide_rotation(axy, dy, dx, dy_slot, lane == 0,
                      [&] { __syncwarp(group_mask<TPP>()); },  // every lane of the group has read dy
                      ss, tau, any_rot, above_tol);
    }
    if (ss != T(0)) {
#pragma unroll
      for (int h = 0; h < R; ++h) {
        const int r = lane + h * TPP;
        if (decltype(exact)::value || r < nrows) {
          T yv = y[r];
          if (kDelta && h == kRegA) {
            // E's row `lane` (rows split exactly: one per lane): J = I + E is
            // rotated, and I's ones at (xi, xi) and (yi, yi) enter the update
            // as shifts, never added to E's small entries.
            rotate_pair_shifted(xr[h], yv, ss, tau, lane == xi ? T(1) : T(0), lane == yi ? T(1) : T(0));
          } else {
            rotate_pair(xr[h], yv, ss, tau);
          }
          y[r] = yv;
        }
      }
    }
  };
  // The register steps' end: the groups' rotation flags (a rotation; one
  // above tol), or-ed over the block into the sweep's s_any and s_rot.
  auto publish_flags = [&](bool any_rot, bool above_tol) {
    const int any_block = __syncthreads_or(any_rot), above_block = __syncthreads_or(above_tol);
    if (tid == 0) {
      if (any_block) s_any = 1;
      if (above_block) s_rot = 1;
    }
    __syncthreads();
  };
  auto levels_in_registers = [&](auto exact) {
    constexpr int R = kRegRows > 0 ? kRegRows : 1;
    bool any_rot = false, above_tol = false;  // this group's rotations (flags set once, below)
    for (int L = 0; L < nlevels; ++L) {
      const int A = order.owners(L), nslots = order.slots(L), W = order.steps(L);
      for (int base = 0; base < nslots; base += G) {  // more owners than groups: in passes
        // This group's column x, and its partners: columns y0 + (o + s) mod Ws below y0 + b.
        int x = 0, y0 = 0, b = 0, Ws = 1, o = 0;
        const int slot = base + g;
        if (slot < nslots) {
          const int t = slot / A;
          o = slot - t * A;
          int lo, mid, hi;
          order.segment(L, t, lo, mid, hi);
          if (o < mid - lo && hi > mid) {
            x = lo + o;
            y0 = mid;
            b = hi - mid;
            Ws = max(mid - lo, b);
          }
        }
        T* xs = As + x * ld;
        T xr[R];
#pragma unroll
        for (int h = 0; h < R; ++h) {
          const int r = lane + h * TPP;
          xr[h] = (b > 0 && r < nrows) ? xs[r] : T(0);
        }
        double dx = b > 0 ? d[x] : 0.0;
        int jj = o;  // (o + step) mod Ws
        for (int step = 0; step < W; ++step, jj = (jj + 1 == Ws) ? 0 : jj + 1) {
          if (step < Ws && jj < b)
            register_step(xr, As + (y0 + jj) * ld, d + y0 + jj, dx, any_rot, above_tol, x, y0 + jj, exact);
          __syncthreads();  // y and its norm pass to the next owner
        }
        if (b > 0) {
#pragma unroll
          for (int h = 0; h < R; ++h) {
            const int r = lane + h * TPP;
            if (r < nrows) xs[r] = xr[h];
          }
          if (lane == 0) d[x] = dx;  // the next level may pair x as a partner
        }
        __syncthreads();
      }
    }
    publish_flags(any_rot, above_tol);
  };
  // Cross tasks with kRegRows > 0: group g (one per column of the first
  // block) keeps its column x in registers for all W steps, so a step reads
  // and writes only the partner column y in shared memory (2.5 instead of 5
  // accesses per row), and the rotation is computed by every lane of the
  // group at once: one barrier per step instead of three. The partner of x in
  // step s is column (g + s) mod W of the second block: one group per column.
  // Its step is register_step, as in levels_in_registers; its own loop, not
  // levels_in_registers' with one level, because that changed the pair
  // kernels' register allocation (ptxas: spills in the 64-row bucket).
  auto cross_steps_in_registers = [&] {
    constexpr int R = kRegRows > 0 ? kRegRows : 1;
    const bool owner = g < w0;
    T* xs = As + (owner ? g : 0) * ld;
    T xr[R];
#pragma unroll
    for (int h = 0; h < R; ++h) {
      const int r = lane + h * TPP;
      xr[h] = (owner && r < nrows) ? xs[r] : T(0);
    }
    double dx = owner ? d[g] : 0.0;
    bool any_rot = false, above_tol = false;  // this group's rotations (flags set once, below)
    auto steps = [&](auto exact) {
      int jj = g;  // (g + step) mod W, counted (no integer division per step)
      for (int step = 0; step < W; ++step) {
        if (owner && jj < w1)
          register_step(xr, As + (w0 + jj) * ld, d + w0 + jj, dx, any_rot, above_tol, g, w0 + jj, exact);
        __syncthreads();  // y and its norm pass to the next group
        jj = jj + 1 == W ? 0 : jj + 1;
      }
    };
    if constexpr (kDelta)
      steps(std::true_type{});  // (kDelta: rows split exactly, checked on entry)
    else if (rows_exact)
      steps(std::true_type{});
    else
      steps(std::false_type{});
    if (owner) {
#pragma unroll
      for (int h = 0; h < R; ++h) {
        const int r = lane + h * TPP;
        if (r < nrows) xs[r] = xr[h];
      }
    }
    publish_flags(any_rot, above_tol);
  };
  // kDelta's cross tasks: group g owns two columns of the first block, g and
  // g + G, and each step does both rotations at once (two independent chains
  // a warp: x^T y, the shuffles, the rotation and the rows interleave), with
  // half the warps a block, so three blocks share an SM. Column o meets
  // column (o + s) mod W of the second block in step s, as
  // cross_steps_in_registers; the arithmetic is register_step's, exact rows.
  auto cross_steps_delta = [&] {
    if constexpr (kTwoChains) {
      constexpr int R = kRegRows, H = kRegA;
      const int xa = g, xb = g + G;  // (2G == w0 == W == w1: rows split exactly)
      // A lane's rows of A are quads, 4 lane + 128 k (register h = 4 k + i),
      // so that each shared load and store moves 16 bytes: the step's LDS and
      // STS were 102 of its 423 instructions (cuobjdump) with a row a lane.
      // E's rows stay a row a lane (row p + lane: register H, eq. (6)'s shifts).
      static_assert(TPP == 32 && H % 4 == 0, "rows split exactly in quads");
      auto quad = [&](T* col, int k) -> float4& { return *reinterpret_cast<float4*>(col + 4 * lane + 4 * TPP * k); };
      T ra[R], rb[R];
#pragma unroll
      for (int k = 0; k < H / 4; ++k) {
        const float4 va = quad(As + xa * ld, k), vb = quad(As + xb * ld, k);
        ra[4 * k] = va.x, ra[4 * k + 1] = va.y, ra[4 * k + 2] = va.z, ra[4 * k + 3] = va.w;
        rb[4 * k] = vb.x, rb[4 * k + 1] = vb.y, rb[4 * k + 2] = vb.z, rb[4 * k + 3] = vb.w;
      }
      ra[H] = As[xa * ld + lane + H * TPP];
      rb[H] = As[xb * ld + lane + H * TPP];
      // Lanes 0-15 carry column xa's squared norm and decide its rotation,
      // lanes 16-31 xb's: the two decisions are one instruction stream.
      const bool hi = lane >= 16;
      double dx = d[hi ? xb : xa];
      bool any_rot = false, above_tol = false;
      auto rotate = [&](T (&xr)[R], T* y, T ss, T tau, int xi, int yi) {
#pragma unroll
        for (int k = 0; k < H / 4; ++k) {
          float4 v = quad(y, k);
          rotate_pair(xr[4 * k], v.x, ss, tau);
          rotate_pair(xr[4 * k + 1], v.y, ss, tau);
          rotate_pair(xr[4 * k + 2], v.z, ss, tau);
          rotate_pair(xr[4 * k + 3], v.w, ss, tau);
          quad(y, k) = v;
        }
        T yv = y[lane + H * TPP];  // E's row `lane` (register_step)
        rotate_pair_shifted(xr[H], yv, ss, tau, lane == xi ? T(1) : T(0), lane == yi ? T(1) : T(0));
        y[lane + H * TPP] = yv;
      };
      int ja = xa, jb = xb;  // partners (o + step) mod W, counted
      for (int step = 0; step < W; ++step) {
        T* ya = As + (w0 + ja) * ld;
        T* yb = As + (w0 + jb) * ld;
        double* const slot = d + w0 + (hi ? jb : ja);
        const double dy = *slot;
        // x^T y in float32, four chains of four rows a lane, then the tree:
        // its rounding, a few ulp of sum |x_r y_r| <= |x| |y|, stays below
        // the test's sqrt(p) eps |x| |y|, and it issues half the instructions
        // of products summed in double (F2F and DADD, 64 of the step's 361).
        float pa[4], pb[4];
#pragma unroll
        for (int k = 0; k < H / 4; ++k) {
          const float4 u = quad(ya, k), v = quad(yb, k);
          const float us[4] = {u.x, u.y, u.z, u.w}, vs[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            pa[i] = k == 0 ? ra[i] * us[i] : fmaf(ra[4 * k + i], us[i], pa[i]);
            pb[i] = k == 0 ? rb[i] * vs[i] : fmaf(rb[4 * k + i], vs[i], pb[i]);
          }
        }
        const float ga = (pa[0] + pa[1]) + (pa[2] + pa[3]), gb = (pb[0] + pb[1]) + (pb[2] + pb[3]);
        // Both sums in one reduction: each half keeps its own and sends the
        // other (offset 16), then four levels within the half: x^T y of xa
        // in lanes 0-15, of xb in 16-31.
        float sxy = (hi ? gb : ga) + __shfl_xor_sync(0xffffffffu, hi ? ga : gb, 16);
#pragma unroll
        for (int off = 8; off > 0; off /= 2) sxy += __shfl_xor_sync(0xffffffffu, sxy, off);
        const Acc axy = sxy;
        __syncwarp();  // every lane has read dy before lanes 0 and 16 update it
        // This half's rotation (the same decision as register_step's).
        T ss = T(0), tau = T(0);
        if (dx > tiny2 && dy > tiny2)
          decide_rotation(axy, dy, dx, slot, (lane & 15) == 0, [] {}, ss, tau, any_rot, above_tol);
        const T ssa = __shfl_sync(0xffffffffu, ss, 0), taua = __shfl_sync(0xffffffffu, tau, 0);
        const T ssb = __shfl_sync(0xffffffffu, ss, 16), taub = __shfl_sync(0xffffffffu, tau, 16);
        if (ssa != T(0)) rotate(ra, ya, ssa, taua, xa, w0 + ja);
        if (ssb != T(0)) rotate(rb, yb, ssb, taub, xb, w0 + jb);
        __syncthreads();  // y and its norm pass to the next group
        ja = ja + 1 == W ? 0 : ja + 1;
        jb = jb + 1 == W ? 0 : jb + 1;
      }
#pragma unroll
      for (int k = 0; k < H / 4; ++k) {
        quad(As + xa * ld, k) = make_float4(ra[4 * k], ra[4 * k + 1], ra[4 * k + 2], ra[4 * k + 3]);
        quad(As + xb * ld, k) = make_float4(rb[4 * k], rb[4 * k + 1], rb[4 * k + 2], rb[4 * k + 3]);
      }
      As[xa * ld + lane + H * TPP] = ra[H];
      As[xb * ld + lane + H * TPP] = rb[H];
      if ((lane & 15) == 0) d[hi ? xb : xa] = dx;
      publish_flags(any_rot, above_tol);
    }
  };
  // kDelta, after A's rows are written out: [V_i V_j] <- [V_i V_j] (I + E)
  // (§IV-B's update, as a GEMM). V's rows are staged in A's rows (p >= q, the
  // engine's tall orientation). A warp item is 128 rows (four consecutive a
  // lane: 16-byte reads, conflict-free) by 8 output columns; E's entries are
  // read four rows at a time, broadcast to the warp (a column of E is
  // contiguous): 12 shared loads a 128 FFMA, with every offset known at
  // compile time (kLd). The loop it replaces (two rows a lane, its bounds
  // tested on each load, offsets computed at run time) issued 35k
  // instructions a task for 16k FFMA (ncu, 100x512²), a third of the kernel's.
  // c == 32 here, and q a multiple of 32 (pair_delta_fits).
  auto update_v_by_delta = [&] {
    if constexpr (kDelta) {
      static_assert(sizeof(T) == sizeof(float), "kDelta is float32's");
      constexpr int kC = 32, kJ = 8, kItemRows = 128;
      constexpr int kLd = kRegRows * 32;  // == ld: rows split exactly, checked on entry
      __syncthreads();  // A's rows are all read before V's overwrite them
      float* Vg = args.Vw + md.v_off;
      const int q = md.q;
      const bool vquads = ((q | md.v_off) & 3) == 0;
      const int wid = tid >> 5, ln = tid & 31, nwarps = nt >> 5;
      for (int r0 = 0; r0 < q; r0 += p) {
        const int rows = min(p, q - r0);  // (a multiple of 32)
        if (vquads) {
          auto piece = [&](int l, int r) {
            __pipeline_memcpy_async(As + l * kLd + r, Vg + static_cast<int64_t>(gcol(l)) * q + r0 + r, 16);
          };
          if (rows == (kRegRows - 1) * 32)  // (square pairs)
            for_each_column<4, (kRegRows - 1) * 32>(kC, rows, piece);
          else
            for_each_column<4>(kC, rows, piece);
        } else {
          for_each_column(kC, rows,
                          [&](int l, int r) { copy_async(As + l * kLd + r, Vg + static_cast<int64_t>(gcol(l)) * q + r0 + r); });
        }
        __pipeline_commit();
        __pipeline_wait_prior(0);
        __syncthreads();
        const int tiles = (rows + kItemRows - 1) / kItemRows;
        for (int item = wid; item < tiles * (kC / kJ); item += nwarps) {
          const int jg = item % (kC / kJ), r = (item / (kC / kJ)) * kItemRows + 4 * ln;
          if (r >= rows) continue;
          float acc[kJ][4];
#pragma unroll
          for (int u = 0; u < kJ; ++u) acc[u][0] = acc[u][1] = acc[u][2] = acc[u][3] = 0.0f;
          const float* xs = As + r;                    // V's rows r .. r + 3 of column l: xs[l * kLd]
          const float* es = As + jg * kJ * kLd + p;    // E[l][jg kJ + u]: es[u * kLd + l]
#pragma unroll
          for (int l4 = 0; l4 < kC; l4 += 4) {
            float4 x[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) x[i] = *reinterpret_cast<const float4*>(xs + (l4 + i) * kLd);
#pragma unroll
            for (int u = 0; u < kJ; ++u) {
              const float4 e = *reinterpret_cast<const float4*>(es + u * kLd + l4);  // E[l4 .. l4 + 3][j]
              const float ev[4] = {e.x, e.y, e.z, e.w};
#pragma unroll
              for (int i = 0; i < 4; ++i) {
                acc[u][0] = fmaf(x[i].x, ev[i], acc[u][0]);
                acc[u][1] = fmaf(x[i].y, ev[i], acc[u][1]);
                acc[u][2] = fmaf(x[i].z, ev[i], acc[u][2]);
                acc[u][3] = fmaf(x[i].w, ev[i], acc[u][3]);
              }
            }
          }
          // V (I + E) = V + V E: V's entries round once, at the end. The
          // item's 8 columns lie in one block (w0 = 16): consecutive in V.
          float* out = Vg + static_cast<int64_t>(gcol(jg * kJ)) * q + r0 + r;
#pragma unroll
          for (int u = 0; u < kJ; ++u) {
            const float4 v = *reinterpret_cast<const float4*>(As + (jg * kJ + u) * kLd + r);
            const float4 o = make_float4(v.x + acc[u][0], v.y + acc[u][1], v.z + acc[u][2], v.w + acc[u][3]);
            float* dst = out + static_cast<int64_t>(u) * q;
            if (vquads) {
              *reinterpret_cast<float4*>(dst) = o;
            } else {
              dst[0] = o.x, dst[1] = o.y, dst[2] = o.z, dst[3] = o.w;
            }
          }
        }
        __syncthreads();
      }
    }
  };
  int sweeps = 0;
  bool converged = false, first_rotated = false, applied = false;
  for (int sweep = 1; sweep <= args.max_sweeps; ++sweep) {
    if (tid == 0) {
      s_rot = 0;
      s_any = 0;
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
        d[i] = fmax(di - static_cast<double>(t) * gg, 0.0);  // eq. (6), cancellation-free form
        d[j] = dj + static_cast<double>(t) * gg;
        s_any = 1;
        if (gabs * gabs > tol2 * di * dj) s_rot = 1;
      }
      __syncthreads();
      // 3. each group: apply its pair's rotation to the A rows and the V rows
      for (int pk = g; pk < npairs; pk += G) {
        const T ss = ps[pk];
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
    sweeps = sweep;
    const bool rot = s_rot != 0;
    applied |= s_any != 0;
    if (sweep == 1) first_rotated = rot;
    __syncthreads();  // all have read s_rot before it is reset
    if (!rot) {
      converged = true;
      break;
    }
  }

  if constexpr (kPair) {
    // Write the rotated pair (and its V columns) back.
    if (!applied) return;  // nothing moved
    if (tid == 0 && first_rotated) args.state[k].rotated = 1;
    T* Ab = args.A + md.a_off;
    if constexpr (sizeof(T) == sizeof(float)) {
      if (pair_quads) {
        auto put = [&](T* dst, const T* src) { *reinterpret_cast<float4*>(dst) = *reinterpret_cast<const float4*>(src); };
        auto piece = [&](int l, int r) { put(Ab + static_cast<int64_t>(gcol(l)) * p + r, As + l * ld + r); };
        for_each_column<4, kDelta ? (kRegRows - 1) * 32 : 0>(c, p, piece);
        if constexpr (kWithV && !kCarryJ) {
          T* Vg = args.Vw + md.v_off;
          for_each_column<4>(c, vr,
                               [&](int l, int r) { put(Vg + static_cast<int64_t>(gcol(l)) * vr + r, As + l * ld + p + r); });
        }
        if constexpr (kDelta) update_v_by_delta();
        return;
      }
    }
    for_each_column(c, p, [&](int l, int r) { Ab[static_cast<int64_t>(gcol(l)) * p + r] = As[l * ld + r]; });
    if constexpr (kWithV && !kCarryJ) {
      T* Vg = args.Vw + md.v_off;
      for_each_column(c, vr,
                      [&](int l, int r) { Vg[static_cast<int64_t>(gcol(l)) * vr + r] = As[l * ld + p + r]; });
    }
    if constexpr (kDelta) {
      update_v_by_delta();
    } else if constexpr (kCarryJ) {
      // [V_i V_j] <- [V_i V_j] J. A's rows in shared memory are free now:
      // they stage V's rows (p >= q: one pass for the engine's tall matrices).
      __syncthreads();
      T* Vg = args.Vw + md.v_off;
      const int q = md.q;
      constexpr int kJ = 4;  // output columns per thread: each staged V entry is read once per kJ FMAs
      const int jgroups = (c + kJ - 1) / kJ;
      for (int r0 = 0; r0 < q; r0 += p) {
        const int rows = min(p, q - r0);
        for_each_column(c, rows,
                        [&](int l, int r) { copy_async(As + l * ld + r, Vg + static_cast<int64_t>(gcol(l)) * q + r0 + r); });
        __pipeline_commit();
        __pipeline_wait_prior(0);
        __syncthreads();
        for (int idx = tid; idx < jgroups * rows; idx += nt) {
          const int jg = idx / rows, r = idx - jg * rows;  // lanes of a warp share jg: J reads broadcast
          T acc[kJ];
#pragma unroll
          for (int u = 0; u < kJ; ++u) acc[u] = T(0);
          for (int l = 0; l < c; ++l) {
            const T x = As[l * ld + r];
#pragma unroll
            for (int u = 0; u < kJ; ++u) {
              const int j = jg * kJ + u;
              if (j < c) acc[u] += x * As[j * ld + p + l];  // J[l][j]
            }
          }
#pragma unroll
          for (int u = 0; u < kJ; ++u) {
            const int j = jg * kJ + u;
            if (j < c) Vg[static_cast<int64_t>(gcol(j)) * q + r0 + r] = acc[u];
          }
        }
        __syncthreads();
      }
    }
    return;
  }

  if constexpr (!kPair) {  // (the pair instantiations returned above)
    // Whole mode: finalise. Exact norms, descending order by rank counting.
    exact_norms();
    if (tid == 0) s_rank = 0;
    __syncthreads();
    write_descending_s(d, c, p, scale, args.S + md.s_off, rank_s, &s_rank, args.info + k, args.rank + k,
                       converged ? sweeps : -1);
    const double tiny = tiny_norm<T>(p);
    if (!args.U) return;
    T* Ug = args.U + md.u_off;
    for (int l = tid; l < c; l += nt) {  // 1 / ||a_l||, once per column (in the free pair slots)
      const double nrm = sqrt(d[l]);
      ps[l] = nrm > tiny ? static_cast<T>(1.0 / nrm) : T(0);  // zero columns are completed later
    }
    __syncthreads();
    for_each_column(c, p, [&](int l, int r) { Ug[static_cast<int64_t>(rank_s[l]) * p + r] = As[l * ld + r] * ps[l]; });
    if constexpr (kWithV) {
      T* Vg = args.V + md.v_off;
      for_each_column(c, c, [&](int l, int r) { Vg[rank_s[l] * c + r] = As[l * ld + p + r]; });
    }
  }
}

}  // namespace
}  // namespace cuda
}  // namespace jsvd
