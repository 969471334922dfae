// Level selector of the W-cycle SVD (paper §III, Algorithm 2), sized by the
// real device: for each matrix, where its rotations are generated.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "levels/smem/svd_smem.h"
#include "planner/tuner.h"

namespace jsvd {
namespace cuda {

enum class Level {
  kWholeWarp,  // the whole matrix (at most 32 columns) in registers: a lane group per matrix
  kWholeSmem,  // the whole matrix (and V) in shared memory: one block, all sweeps
  kPairSvd,    // blocked: block-column pairs whose SVD fits in shared memory
  kGramEvd,    // blocked: pairs too tall; EVD of their Gram matrix in shared memory
  kGemm,       // blocked: Gram matrices and rotations by batched GEMMs over all pairs of a step (levels/gemm/)
};

struct DeviceLimits {
  size_t smem_per_block = 0;  // cudaDevAttrMaxSharedMemoryPerBlockOptin
  int sm_count = 0;
};

DeviceLimits device_limits(int device);

struct MatrixPlan {
  Level level = Level::kWholeSmem;
  int64_t width = 0;   // block width w of the blocked levels (0 for whole)
  SmemLaunch launch;   // shared-memory levels: the kernel's launch and variant (Gram EVD: threads and smem only)
  int warp_lanes = 0;  // kWholeWarp: lanes per matrix (the padded column count)
  int warp_rows = 0;   // kWholeWarp: rows of A per lane
  int gemm_inner = 0;  // kGemm: sweeps of each pair's Gram EVD
};

// rows >= cols >= 1. `batch` is the number of matrices launched together
// (more of them allows wider blocks at the same occupancy). The level, width
// and launch shape, from the limits alone (no GPU needed: cpp_tests run it in
// CI); plan_variant then picks the kernel variant (occupancy queries on the
// current device).
// `tuned`: the auto-tuner's choice for this shape (tuner.h); nullptr: the
// GEMM level from JSVD_GEMM_MIN_COLS columns. `width_cap` > 0: a member of
// an svd_varlen list, whose block pairs are at most that wide (list_width_cap). `log_v`: a uniform
// batch, whose float64 matrices may keep A alone in shared memory and take V by the log
// (kernel_log_v.cuh) where A and V together do not fit; plan_variant then sizes the log.
MatrixPlan plan_matrix(int64_t rows, int64_t cols, size_t elem, bool compute_uv, int64_t batch,
                       const DeviceLimits& lim, const TunedLevel* tuned = nullptr, int64_t width_cap = 0,
                       bool log_v = false);
// A list's block-pair width cap (0: none), one for all its members (p[k] x q[k], tall): planner.cpp.
int64_t list_width_cap(const std::vector<int64_t>& p, const std::vector<int64_t>& q, size_t elem, bool compute_uv);
void plan_variant(MatrixPlan& mp, size_t elem, bool compute_uv);

// QR preconditioning (qr_precondition.h, qr_choice): the Jacobi runs on R^T.
struct QrChoice {
  int64_t panel = 0;   // > 0: the blocked QR, panels of this width
  bool whole = false;  // one launch, a whole matrix in shared memory (qr_whole_smem.h)
  bool regs = false;   // with whole: the matrix in registers instead (qr_whole_regs.h)
  bool lapack = false; // cuSOLVER's geqrf and ormqr (at::geqrf), a matrix at a time
  bool on() const { return whole || panel > 0 || lapack; }
};

// What one call runs, decided once, before anything is launched.
struct CallPlan {
  QrChoice qr;            // QR preconditioning, if on()
  bool v_solve = false;   // with it: the Jacobi on R^T carries no V, solved for after (qr_precondition.h)
  MatrixPlan jacobi_v;    // v_solve: the plan with V, for the matrices the solve does not serve
  bool eigh = false;      // else the Gram eigenvectors as the Jacobi's start V (precondition/eigh_precondition.h)
  bool read_in_place = false;  // the caller's 3-D tensor is read as is (no packing copy)
  MatrixPlan jacobi;      // uniform batches: every matrix's plan, on the shape the Jacobi sees
  std::string tuner;      // the auto-tuner's reason, where it decided (plan())
};

// A batch of `batch` matrices, the first (every one, if `uniform`) rows x
// cols in the tall orientation (rows >= cols). `view_stride` is the caller's
// 3-D tensor's last stride (0: the input is packed already) and `numel` its
// elements. Non-uniform batches get their matrices' plans in the engine.
// `device`: where the auto-tuner measures, if `may_calibrate` and the shape is new to it.
// `may_sync`: the call may read on the host (svd, svdvals), which the Gram eigenvectors' start needs;
// `may_start`: false plans without that start (the engine's path for a matrix the start declines);
// `may_qr`: false, without the QR either (the start's Gram matrices: the Jacobi on them alone).
CallPlan plan_call(int64_t rows, int64_t cols, int64_t batch, bool uniform, size_t elem, bool compute_uv,
                   int64_t view_stride, int64_t numel, const DeviceLimits& lim, int device, bool may_calibrate,
                   bool may_sync, bool may_start = true, bool may_qr = true);

// The launch of matrices that share one (a whole-matrix group of a
// non-uniform batch, sized for its largest; the block pairs of every blocked
// matrix of a call): its variant chosen for the merged shape.
void plan_whole_group(SmemLaunch& merged, size_t elem, bool compute_uv);
SmemLaunch plan_pair_launch(int64_t rows, int64_t cols, int64_t c, size_t elem, bool compute_uv, bool delta);

// A list's block pairs share one launch sized for the largest rows, columns and pair width among them
// (the engine's prepare). `merged`: those maxima so far. A matrix whose pairs (p x q, width w) would
// take that launch past shared memory (a 3000 x 40 beside a 260 x 250 in float32) takes the Gram EVD
// level instead, which holds any pair (mp changes); else the maxima take it in. Matrices in list order.
// The launch carries E = J - I (delta) when every pair matrix's own plan does, at one row count and
// pairs of 32 columns; else V's rows, sized for the widest q.
struct PairMerge {
  int64_t p = 0, q = 0, c = 0;
  bool delta = true;     // every matrix so far plans delta
  int64_t p_min = -1;    // the fewest rows among them
  bool launch_delta(bool compute_uv) const { return compute_uv && delta && p_min == p && std::max<int64_t>(c, 2) == 32; }
};
void merge_pair_plan(PairMerge& merged, MatrixPlan& mp, int64_t p, int64_t q, size_t elem, bool compute_uv,
                     const DeviceLimits& lim);

const char* level_name(Level level);

// Inner sweeps allowed to a pair's SVD / Gram EVD on the blocked levels.
int inner_sweeps();

// The plan of each shape, as JSON, for torch_jsvd.plan(): of svd and svdvals (`may_sync`), or of
// svd_ex (no Gram eigenvectors' start, no triangular solve for V).
std::string plan_json(const std::vector<int64_t>& rows, const std::vector<int64_t>& cols, size_t elem,
                      bool compute_uv, int device, bool may_sync = true);

}  // namespace cuda
}  // namespace jsvd
