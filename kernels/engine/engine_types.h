// Plain structs shared by the CUDA engine's host code and kernels.
#pragma once

#include <cstdint>

#include "host_device.h"

namespace jsvd {
namespace cuda {

// Per-matrix descriptor of the packed batch (see csrc/core.h), on the device.
struct MatrixDesc {
  int64_t a_off, u_off, s_off, v_off;
  int32_t p, q, ucols, pad_;
};

// A block-column pair of one matrix: columns [c0, c0 + w0) and [c1, c1 + w1).
// w0w1 = w0 | (w1 << 16) | kPairIntra when the pairs inside each block are
// due too (once per sweep for every block). Pair SVD tasks are taken from a
// queue (svd_smem_kernel.cuh): b0, b1 index the two block columns' counts of
// tasks done, and the task starts once they reach need0, need1 (the tasks
// before it in the sweep on those columns; b0 == b1 for a block's lone task).
struct PairTask {
  int32_t k, c0, c1, w0w1;
  int32_t b0, b1, need0, need1;
};
constexpr int32_t kPairWidthMask = 0x3fff;
constexpr int32_t kPairIntra = 1 << 30;

// Per-matrix state of the blocked levels, on the device.
struct MatrixState {
  double scale;      // max|a|, by which the matrix was divided before the sweeps (0: a zero matrix, not divided)
  int32_t rotated;   // some pair rotated during the current sweep
  int32_t sweeps;    // sweeps done so far
  int32_t converged; // 1 once a sweep rotated nothing (or the input was non-finite)
  // xGESVJ's stop (converged_by_bound, core.h), float64: the current sweep's largest cosine and sine,
  // as the bits of non-negative floats (which order as integers, for atomicMax), and whether this
  // matrix's level tracks them (the pair SVD level with one inner sweep, the Gram EVD and GEMM levels).
  int32_t cos_bits, sin_bits, tracked;
};

// Everything a kernel needs, by value.
template <typename T>
struct EngineArgs {
  T* A;                     // packed input, overwritten; or the caller's tensor (a_cs > 0), read only
  int64_t a_rs = 1, a_cs = 0;  // a_cs > 0: element (i, j) of a matrix at i * a_rs + j * a_cs (uniform batch, warp level)
  T* U;                     // packed U (nullptr: no vectors)
  T* S;                     // packed S
  T* V;                     // packed V output
  T* Vw;                    // V workspace of the blocked levels (packed like V)
  int32_t* info;            // per matrix
  int32_t* rank;            // per matrix: number of columns of U with a direction
  MatrixState* state;       // per matrix (blocked levels)
  const MatrixDesc* desc;   // per matrix; nullptr for a uniform batch (see uni)
  MatrixDesc uni;           // uniform batch: the shape, with the per-matrix strides as offsets
  double tol;               // <= 0: sqrt(p) * eps per matrix
  int32_t max_sweeps;       // outer sweeps (whole level) / inner sweeps cap (pair level)
  // Pair SVD level: the sweep's task queue (PairTask), zeroed before each sweep.
  int32_t* pair_next = nullptr;  // the next task to take
  int32_t* pair_done = nullptr;  // per block column: tasks done on it this sweep
  // Whole matrices on the register steps: rows padded to the register bucket (SmemLaunch::pad_rows).
  int32_t pad_rows = 0;
  // Whole matrices with V by the log (SmemLaunch::log_v): a block's log at vlog + block * vlog_entries.
  void* vlog = nullptr;
  int64_t vlog_entries = 0;
  int32_t vlog_rows = 0, vlog_steps = 0;  // V's rows and the log's steps staged at once (SmemLaunch)
  // The log applied after the kernel (log_v_apply.cu; nullptr: in it): per block two ints, the records
  // left to apply (-1 where the kernel wrote V itself: a non-finite member) and 2 x the first one's index
  // in the ring + whether V is in global memory (else it is I), and its columns' ranks (descending S).
  int32_t* vlog_nrec = nullptr;
  int32_t* vlog_rank = nullptr;
};

// Matrix k's descriptor: from the table, or for a uniform batch computed from
// uni (no per-matrix table to build on the host and upload).
template <typename T>
JSVD_HOST_DEVICE inline MatrixDesc matrix_desc(const EngineArgs<T>& a, int64_t k) {
  if (a.desc) return a.desc[k];
  MatrixDesc d = a.uni;
  d.a_off *= k;
  d.u_off *= k;
  d.s_off *= k;
  d.v_off *= k;
  return d;
}

// Entry t of a list of matrix indices; a nullptr list means every matrix, in order.
JSVD_HOST_DEVICE inline int list_at(const int32_t* list, int t) { return list ? list[t] : t; }

}  // namespace cuda
}  // namespace jsvd
