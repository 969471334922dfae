// The CUDA engine's launch groups (W-cycle Algorithm 2's level assignment, as launches): a batch's
// matrices, each with its plan, grouped into the launches that run them (warp and whole-matrix groups
// by block shape, the blocked matrices' sweep tasks), with the task lists and descriptors uploaded in
// one copy. A uniform batch's groups are kept per shape (uniform_prep). Used by jacobi_svd_cuda.cpp.
#pragma once

#include "core.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include <ATen/cuda/CUDAEvent.h>

#include "engine/engine_types.h"
#include "planner/planner.h"
#include "levels/smem/svd_smem.h"

namespace jsvd {
namespace cuda {

// The matrices of one launch, listed for the device; a uniform batch lists
// none (its launches take every matrix, list_at).
struct MatList {
  std::vector<int32_t> mats;
  size_t off = 0;     // in the staged upload
  int64_t cost = 0;   // a list's group: rows x columns of its largest matrix (the order of launches)
};

struct WholeGroup : MatList {
  SmemLaunch cfg;
};

// Matrices of one shape at the GEMM level.
struct GemmGroup : MatList {
  int64_t width = 0;
  int inner = 0;
};

// What a call launches, from the shapes alone: every matrix's plan, grouped
// into launches, and the task lists and descriptors uploaded in one copy.
struct Prep {
  std::map<std::pair<int, int>, WholeGroup> whole;  // by lanes per rotation (and threads, JSVD_WHOLE_MERGE=0)
  std::map<std::pair<int, int>, MatList> warp;      // by (lanes per matrix, rows per lane)
  MatList blocked;  // every matrix of a blocked level (pairs, Gram EVD, GEMM): prologue, sweeps, finalisation
  std::map<std::pair<int64_t, int64_t>, GemmGroup> gemm;  // by shape
  int64_t gram_c = 0, blocked_q = 0, max_p = 0, max_cols = 0;
  int64_t ncolumn_blocks = 0;  // block columns of the blocked matrices (the pair queue's counts)
  SmemLaunch pair_cfg;  // the launch of every block pair (planner: plan_pair_launch)
  size_t pair_queue_size = 0, pair_queue_off = 0, desc_off = 0;
  std::vector<std::pair<size_t, int>> pair_step_range;  // each step's first task in the queue, and count
  std::vector<std::pair<size_t, int>> gram_where;       // each Gram step's tasks in the upload, and count
  at::Tensor staged;                                    // the upload (undefined: nothing to upload)
  std::shared_ptr<at::cuda::CUDAEvent> uploaded;        // cached preps: the upload's completion
};

// Matrix k's descriptor in b (the device table of a list).
inline MatrixDesc matrix_desc_of(const PackedBatch& b, int64_t k) {
  return MatrixDesc{b.a_at(k), b.u_at(k), b.s_at(k), b.v_at(k), static_cast<int32_t>(b.p(k)),
                    static_cast<int32_t>(b.q(k)), static_cast<int32_t>(b.uc(k)), 0};
}

// `uplan`: a uniform batch's plan (CallPlan::jacobi); other batches are
// planned here, matrix by matrix.
std::shared_ptr<Prep> prepare(const PackedBatch& b, const SvdOptions& opt, size_t es, const DeviceLimits& lim,
                              const at::Device& device, const MatrixPlan* uplan);

// A uniform batch's Prep, kept per device, shape and plan (built by prepare on first use).
std::shared_ptr<const Prep> uniform_prep(const PackedBatch& b, const SvdOptions& opt, size_t es,
                                         const DeviceLimits& lim, const at::Device& device, const MatrixPlan& plan);

}  // namespace cuda
}  // namespace jsvd
