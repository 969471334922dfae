// Launchers of the shared-memory one-sided Jacobi kernel (svd_smem.cu; the kernel is in svd_smem_kernel.cuh).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "engine/engine_types.h"
#include "host_device.h"

namespace jsvd {
namespace cuda {

// Pair mode carries the pair's 2w x 2w rotation under its columns for float64,
// V's rows for float32 (svd_smem_kernel.cuh says why).
JSVD_HOST_DEVICE constexpr bool pair_carries_rotation(size_t elem) { return elem == sizeof(double); }

// Rows carried under each column of a pair of c columns of a matrix with q columns.
inline int64_t pair_vrows(int64_t q, int64_t c, size_t elem) { return pair_carries_rotation(elem) ? c : q; }

// Lanes per rotation (α·32, W-cycle §IV-B) for c columns of p rows: about
// `lane_rows` rows of A per lane (4; the planner takes 8 for float32 batches
// that fill the device twice over, planner.cpp). Narrower groups for short
// columns mean smaller blocks, so more matrices share an SM and hide each
// other's step latency.
inline int lanes_per_rotation(int64_t p, int64_t c, int lane_rows = 4) {
  const int64_t pairs = (c + 1) / 2;
  int tpp = 32;
  while (tpp > 4 && tpp * lane_rows > p) tpp /= 2;
  while (tpp > 4 && pairs * tpp > 1024) tpp /= 2;  // every pair of a step in flight if possible
  return tpp;
}

// Stride between the columns in shared memory (rows held per column, padded).
// A warp's 32 / tpp lane groups each read rows [0, tpp) of a different column
// at once; a stride of tpp mod 32 puts consecutive columns on disjoint banks
// (the register steps give neighbouring groups neighbouring partners), where
// an odd stride made almost every such access a two-way bank conflict. A
// warp per column reads one column per instruction, conflict-free at any
// stride: a multiple of 4, so that float32 pairs move in 16-byte pieces
// (svd_smem_kernel.cuh, pair_quads).
JSVD_HOST_DEVICE inline int column_stride(int rows, int tpp) {
  return tpp >= 32 ? (rows + 3) & ~3 : rows + (tpp - rows % 32 + 32) % 32;
}

struct SmemLaunch {
  int tpp = 32;       // lanes per rotation (α·32)
  int threads = 32;   // block size
  size_t smem = 0;    // dynamic shared memory, bytes
  int64_t rows = 0;   // rows held per column (A's and V's or J's)
  int reg_groups = 0; // whole matrices: lane groups the register steps use (halving_order.h)
  bool delta = false; // block pairs: carry E = J - I under the columns (pair_delta_fits)
  // The kernel variant, chosen by the planner (choose_*_steps), launched as is:
  int reg_rows = 0;    // rows of a column a lane keeps in registers (0: the shared-memory steps)
  int reg_threads = 0; // whole matrices with register steps: their block size
  int64_t cols = 0;    // columns held (a list's launch: its widest member's)
  // Whole matrices with register steps: A's and V's rows padded with zeros to reg_rows lanes' worth
  // (svd_smem_kernel.cuh, pa), where it costs no block per SM; smem then covers the padded rows.
  bool pad_rows = false;
  // Whole matrices whose V does not fit beside A (kernel_log_v.cuh): V in global memory, rotated after
  // each sweep from the sweep's log of rotations. log_entries: the log's capacity a block (a sweep's
  // records times their slots); smem includes the V rows' and the log's staging.
  bool log_v = false;
  int64_t log_entries = 0;
  int log_rows = 0, log_steps = 0;  // V's rows and the log's steps staged at once
};

// One logged rotation of a whole matrix's sweep (kernel_log_v.cuh): rotate_pair(V[:, i], V[:, j], s, tau)
// with ij = i | j << 16; s = 0: none (a slot of the step with no rotation).
template <typename T>
struct LogEntry {
  T s, tau;
  int32_t ij;
};
// Whole matrices without V beside A in shared memory, V by the log instead (JSVD_LOG_V): float64 only.
bool log_v_enabled(size_t elem);
// The log's shared memory beyond A's for q columns, `slots` entries a step, V's rows and the log's
// steps staged `rows` and `steps` at a time (kernel_log_v.cuh).
size_t log_v_smem_bytes(int64_t q, int64_t slots, size_t elem, int rows, int steps);
// The least of it (8 rows, 4 steps), which the planner's choice of the level asks to fit.
inline size_t log_v_min_smem_bytes(int64_t q, int64_t slots, size_t elem) {
  return log_v_smem_bytes(q, slots, elem, 8, 4);
}

// The log applied after the kernel (log_v_apply.cu, JSVD_LOG_DEFER=N): how many sweeps' records the log
// holds for `blocks` blocks of `entries` entries a sweep, at most N and within kLogDeferBytes (0: none, each
// sweep's log applied in the kernel; 1: the same, but for the permutation by rank after it).
constexpr int64_t kLogDeferBytes = int64_t(256) << 20;
int64_t log_v_deferred_sweeps(int64_t blocks, int64_t entries, size_t entry_bytes);
// The deferred pass over V (args.vlog_nrec, args.vlog_rank, written by the kernel): on `stream` after
// launch_svd_whole's kernel, the same tasks; float64 only, the register steps (cfg.reg_rows > 0).
template <typename T>
void launch_log_v_apply(const EngineArgs<T>& args, const int32_t* tasks, int ntasks, const SmemLaunch& cfg,
                        cudaStream_t stream);

// Whether float32 block pairs of width w of a p x q matrix with V carry the
// pair's E = J - I (2w rows) under their columns instead of V's q rows
// (svd_smem_kernel.cuh, kDelta): where a warp per rotation splits the rows
// exactly (p + 2w = 32 x a register bucket, 2w = 32) and every task has 2w
// columns (q a multiple of 32: no narrow last block, no lone block).
// JSVD_PAIR_DELTA=0 turns it off (experiments).
bool pair_delta_fits(int64_t p, int64_t q, int64_t w, size_t elem);

// The block of a pair that carries E, for rows (A's and E's) a column: at
// 512 + 32, 8 warps, each owning two of the first block's 16 columns
// (svd_smem_kernel.cuh, cross_steps_delta); at 1024 + 32, one block an SM
// either way, 16 warps of one column each (the faster of the two at each
// size: docs/kernel-notes.md).
// The kernel's own choice (kTwoChains) asks delta_two_columns too.
JSVD_HOST_DEVICE constexpr bool delta_two_columns(int64_t rows) { return rows <= 17 * 32; }
inline int delta_threads(int64_t rows) { return delta_two_columns(rows) ? 256 : 512; }

// Shared memory needed to hold c columns of p rows of A and vrows rows of V
// or J under each (0 when V is not wanted) in bytes.
size_t svd_smem_bytes(int64_t p, int64_t vrows, int64_t c, size_t elem, int lane_rows = 4);
// The kernel's own __shared__ variables (flags and a reduction of 32 T: 272 bytes in float64), which
// the device's opt-in limit counts with the dynamic bytes: a plan's dynamic bytes stay this far below
// it (a list's 158 x 105 float64 member planned 232276 of 232448 bytes, and its launch failed with
// "invalid argument").
constexpr size_t kSmemKernelStatic = 512;

// Block shape for c columns of p rows (plus vrows rows of V).
SmemLaunch svd_smem_config(int64_t p, int64_t vrows, int64_t c, size_t elem, int lane_rows = 4);
// The same with tpp lanes a rotation (16 or 32; more pairs than 1024 / tpp groups: in passes).
SmemLaunch svd_smem_config_lanes(int64_t p, int64_t vrows, int64_t c, size_t elem, int tpp);

// Block pairs of c columns of p x q matrices: svd_smem_config with the rows
// carried under each column (with V: V's rows or J's, or E's where `delta`,
// pair_delta_fits) and, where delta, its block (delta_threads). One place for
// the planner's plan and the engine's launch.
SmemLaunch pair_smem_config(int64_t p, int64_t q, int64_t c, size_t elem, bool with_v, bool delta);

// The kernel variant of a launch (reg_rows, reg_threads), for the planner:
// the register steps where a lane's rows fit and they cost no block per SM
// (an occupancy query of the current device), else the shared-memory steps.
// JSVD_WHOLE_REGS and JSVD_REG_STEPS (tuning_knobs.h) override.
void choose_whole_steps(SmemLaunch& cfg, size_t elem, bool with_v);
// Whole matrices with V by the log (cfg from svd_smem_config without V's rows): their steps
// (choose_whole_steps), then the log's capacity and shared memory; false where that exceeds `budget`,
// or where they take the shared-memory steps (but for JSVD_LOG_V=2).
bool plan_log_v(SmemLaunch& cfg, size_t elem, size_t budget);
void choose_pair_steps(SmemLaunch& cfg, size_t elem, bool with_v);

// Whole matrices: tasks[t] is the matrix index of block t. Writes U (first q
// columns; zero columns where S has no direction), S, V, info, rank. The
// launchers run the variant in cfg; they decide nothing.
template <typename T>
void launch_svd_whole(const EngineArgs<T>& args, const int32_t* tasks, int ntasks, const SmemLaunch& cfg,
                      bool with_v, cudaStream_t stream);

// Block-column pairs of blocked matrices: rotates A and the V workspace in
// place (cfg sized with pair_vrows); sets state[k].rotated when the pair was
// not yet orthogonal. Either the tasks of a whole sweep, in round-robin step
// order, with their queue in args (pair_next and pair_done zeroed), one block
// per task; or (args.pair_next null) the tasks of one round-robin step.
template <typename T>
void launch_svd_pair(const EngineArgs<T>& args, const PairTask* tasks, int ntasks, const SmemLaunch& cfg,
                     bool with_v, cudaStream_t stream);

}  // namespace cuda
}  // namespace jsvd
