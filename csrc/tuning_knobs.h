// Every environment switch of both engines, with its default: for experiments
// (scripts/ab_knob.sh), forced-level tests (scripts/gpu_check.sh robust-forced)
// and bisecting a regression. Not part of the API. Read once per process, on
// first use. The defaults are the measured choices (docs/kernel-notes.md,
// docs/experiments.md).
#pragma once

#include <cstdlib>
#include <string>

namespace jsvd {

struct Knobs {
  // --- CUDA planner (kernels/planner/planner.cpp) ---
  int level = 0;         // JSVD_LEVEL=whole|pair|gram|gemm: the lowest level a matrix may take (1|2|3|4; 0 = warp)
  int pair_width = 0;    // JSVD_PAIR_WIDTH: block-pair width where it fits (0: the planner's)
  int inner_sweeps = 1;  // JSVD_INNER_SWEEPS: sweeps a block-pair task does over its columns
  bool tuner = true;         // JSVD_TUNER=0: no auto-tuner (kernels/planner/tuner.h); the rule below decides
  int tuner_min_cols = 512;  // JSVD_TUNER_MIN_COLS: uniform batches the tuner decides, from this many columns
  int gemm_min_cols = 1024;  // JSVD_GEMM_MIN_COLS: the GEMM level from this many columns (without the tuner)
  int gemm_width = 0;        // JSVD_GEMM_WIDTH: its block width (0: the planner's)
  int gemm_inner = 0;        // JSVD_GEMM_INNER: sweeps of its pairs' Gram EVD (0: the planner's)
  bool qr = true;        // JSVD_QR=0: no QR preconditioning
  int qr_min_cols = 0;   // JSVD_QR_MIN_COLS: QR-precondition uniform batches from this many columns (0: the planner's)
  bool qr_sort = true;   // JSVD_QR_SORT=0: no sorting of the columns by norm before the QR
  int qr_row_sort = -1;  // JSVD_QR_ROW_SORT=0|1: sorting the rows by max|a_ij| before the QR (-1: float64 only)
  int qr_twice = -1;     // JSVD_QR_TWICE=0|1: a second QR, of R^T, before the Jacobi (-1: float64 only)
  bool qr_whole = true;  // JSVD_QR_WHOLE=0: never the one-launch QR of a matrix in shared memory
  int qr_regs = 1;        // JSVD_QR_REGS: the one-launch QR in registers (0 never, 1 the planner's rule, 2 where it fits)
  int qr_lapack = -1;    // JSVD_QR_LAPACK: cuSOLVER's geqrf/ormqr for the QR (0 never, -1 the planner's rule, qr_choice; 1 instead of every blocked QR)
  bool qr_in_place = true;  // JSVD_QR_IN_PLACE=0: the one-launch QRs read a packed copy, not the caller's tensor
  int v_solve = -1;      // JSVD_V_SOLVE=0|1: the QR path's V_x by a triangular solve (-1: float64 only; qr_precondition.h)
  int eigh = -1;         // JSVD_EIGH=0|1: never | always (uniform batches) the Gram eigenvectors as the start V
  int start_own_evd = -1;  // JSVD_START_OWN_EVD=0|1: the float32 solver's route solves its Gram matrices of at most 128 columns by syevBatched always | by the engine's own eigen-solver always (-1: the own from kEvdSmallMinBatch matrices; kernels/eigen/evd_small.h)
  int start_evd32 = -1;  // JSVD_START_EVD32=0|1: the syevBatched start never solves the Gram matrices in float32 | always, untested (-1: evd32_route_on's rule and the pivots' test; eigh_precondition.h)
  int start_evd32_tall = 2;  // JSVD_START_EVD32_TALL=N: float32's large tall batches on the float32 solver, V0 refined N times (0: the float64 solver; eigh_precondition.h)
  int start_evd32_tall_min = 0;  // JSVD_START_EVD32_TALL_MIN=N: those tall batches from N matrices (0: kEvd32TallMinBatch, 32; eigh_precondition.h)
  int start_evd32_square = 40;  // JSVD_START_EVD32_SQUARE=N: that route for near-square batches of N matrices and more too (0: tall ones only; squarer than kEvd32SquareLongRatio from 200 too; eigh_precondition.h)
  int start_evd32_square_ratio = 0;  // JSVD_START_EVD32_SQUARE_RATIO=R: N's batches are those of at least R/100 rows a column (0: kEvd32SquareLongRatio, or kEvd32SquareMidRatio from kEvd32SquareMidCols columns; eigh_precondition.h)
  int gram_eig_jacobi_cols = 64;  // JSVD_GRAM_EIG_JACOBI_COLS: the batched start's Gram matrices up to this many columns (at most kGramJacobiKnobMaxCols, 96) by this engine's Jacobi, beyond it by syevBatched (32 and 96 measured slower, experiments.md stops 64 and 73)
  bool start_evd32_one_read = true;  // JSVD_START_EVD32_ONE_READ=0: the float32 solver's tested route reads its pivots' test before the solver, not with X's test (eigh_precondition.cpp)
  bool start_late_check = true;  // JSVD_START_LATE_CHECK=0: the float32-solved V0's checks read before the Jacobi on X is queued (eigh_precondition.cpp)
  int start_x_steps = 2;  // JSVD_START_X_STEPS=N: at most N one-sided first-order steps on X before the Jacobi on X (0: none; start_x_steps.h)
  bool start_refine = true;  // JSVD_START_REFINE=0: the float32-solved V0 not refined by a first-order step (refine_eigenvectors, eigh_precondition.h)
  int eigh_cond = 1;     // JSVD_EIGH_COND: float64 batches on syevBatched's route declined by their Cholesky pivots and eigenvalues (1), eigenvalues only (2), never (0)
  int start_x_qr = -1;  // JSVD_START_X_QR: the start's Jacobi on X by the QR path; -1 by the rule (start_x_by_qr), 0 never, 1 always
  int x_cholqr = -1;  // JSVD_X_CHOLQR: the start's Jacobi on X by CholeskyQR2; -1 by the rule (x_by_cholqr), 0 never, 1 always
  bool gram_chunk = true;  // JSVD_GRAM_CHUNK=0: long Gram products without the split over rows (batched_gemm.h, gram_into)
  bool gram_products = true;  // JSVD_GRAM_PRODUCTS=0: float32's batched start takes G and X from cuBLAS on a float64 copy (gram_products.h)
  bool start_converged = true;  // JSVD_START_CONVERGED=0: float32's batched start always runs the Jacobi on X (start_converged.h)
  bool start_converged_f64 = true;  // JSVD_START_CONVERGED_F64=0: float64's start (both engines) runs the Jacobi on X without testing X first
  bool start_converged_x32 = true;  // JSVD_START_CONVERGED_X32=0: float32's eigen-solvers' routes test G's bound (kG32) instead of X^T X by float64's test at float32's tol (kX32)
  int polish = -1;  // JSVD_POLISH=0|1: float32 U and V never | always polished (-1: where the route leaves them a long Jacobi's, CoreResult::polish; kernels/engine/orth_polish.h)
  int polish_warp = 1;  // JSVD_POLISH_WARP: factors polished by a warp never (0), by the rule (1), wherever they fit one (2) (orth_polish_kernel.h)
  int syev_graph = 1;  // JSVD_SYEV_GRAPH=0: syevBatched called directly, not replayed as a CUDA graph (syev_batched.cpp)
  bool list_qr = false;  // JSVD_LIST_QR=1: a list's members take the one-launch QR (qr_list.cpp; off: it was slower)
  int list_start = -1;  // JSVD_LIST_START=0|1: a list's large near-square members never | always take the Gram start (-1: list_start_members' rule; list_start.h)
  int list_start_class = 128;  // JSVD_LIST_START_CLASS: the list start pads each member's Gram matrix to a multiple of this many columns (list_start.h)
  // --- CUDA launchers and sweep loop ---
  bool cross_only = true;      // JSVD_CROSS_ONLY=0: every block-pair task redoes its blocks' inner pairs
  bool sweep_pipeline = true;  // JSVD_SWEEP_PIPELINE=0: read the convergence count without running ahead
  bool pair_queue = true;      // JSVD_PAIR_QUEUE=0: one launch per round-robin step instead of a task queue
  bool reg_steps = true;       // JSVD_REG_STEPS=0: no register steps in the shared-memory kernel
  bool pdl = true;             // JSVD_PDL=0: no programmatic dependent launch between steps
  int whole_regs = 1;          // JSVD_WHOLE_REGS: whole matrices' register steps (0 off, 1 where free, 2 always)
  bool pad_rows = true;        // JSVD_PAD_ROWS=0: whole matrices' register steps on unpadded rows
  int whole_wide_lanes = -1;   // JSVD_WHOLE_WIDE_LANES: whole matrices without register steps at 32 lanes a rotation (planner.cpp, wider_lanes): -1 where that pads their rows, 1 always, 0 never
  bool pair_delta = true;      // JSVD_PAIR_DELTA=0: float32 512-row pairs carry V's rows, not E = J - I
  bool list_streams = true;    // JSVD_LIST_STREAMS=0: a list's launch groups one after another on the current stream
  int log_v = 1;               // JSVD_LOG_V: float64 whole matrices whose V does not fit beside A by V's log (kernel_log_v.cuh) on the register steps (1), on either steps (2), never (0: block pairs)
  int log_defer = 4;           // JSVD_LOG_DEFER: V's log held over up to N sweeps and applied after the kernel (log_v_apply.cu; 0: each sweep's in the kernel)
  bool whole_merge = true;     // JSVD_WHOLE_MERGE=0: a list's whole matrices grouped by block size, not only lanes per rotation
  bool info_read = true;       // JSVD_INFO_READ=0: svd reads info even where the engine already did (CoreResult)
  bool gpu_stop_bound = true;  // JSVD_GPU_STOP_BOUND=0: float64's blocked levels end with a sweep that rotates nothing (converged_by_bound)
  // --- CPU engine (csrc/cpu) ---
  int cpu_block_width = 0;  // JSVD_CPU_W: sweep-ordering block width (1: pointwise; 0: by cache size)
  bool cpu_avx2 = true;     // JSVD_CPU_NO_AVX2 (set): the plain loops
  bool cpu_stop_bound = true;  // JSVD_CPU_STOP_BOUND=0: every matrix ends with a sweep that rotates nothing (converged_by_bound)
  bool cpu_avx512 = true;   // JSVD_CPU_NO_AVX512 (set): AVX2 at most
};

namespace knobs_detail {
inline bool on(const char* name, bool fallback) {  // "0" turns a switch off
  const char* v = std::getenv(name);
  return v ? v[0] != '0' : fallback;
}
inline int integer(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}
inline Knobs read() {
  Knobs k;
  if (const char* v = std::getenv("JSVD_LEVEL")) {
    const std::string s(v);
    k.level = s == "whole" ? 1 : s == "pair" ? 2 : s == "gram" ? 3 : s == "gemm" ? 4 : 0;
  }
  k.tuner = on("JSVD_TUNER", k.tuner);
  k.tuner_min_cols = integer("JSVD_TUNER_MIN_COLS", k.tuner_min_cols);
  k.gemm_min_cols = integer("JSVD_GEMM_MIN_COLS", k.gemm_min_cols);
  k.gemm_width = integer("JSVD_GEMM_WIDTH", k.gemm_width);
  k.gemm_inner = integer("JSVD_GEMM_INNER", k.gemm_inner);
  k.pair_width = integer("JSVD_PAIR_WIDTH", k.pair_width);
  k.inner_sweeps = integer("JSVD_INNER_SWEEPS", k.inner_sweeps);
  if (k.inner_sweeps < 1) k.inner_sweeps = 1;
  k.qr = on("JSVD_QR", k.qr);
  k.qr_min_cols = integer("JSVD_QR_MIN_COLS", k.qr_min_cols);
  k.qr_sort = on("JSVD_QR_SORT", k.qr_sort);
  k.qr_row_sort = integer("JSVD_QR_ROW_SORT", k.qr_row_sort);
  k.qr_twice = integer("JSVD_QR_TWICE", k.qr_twice);
  k.qr_whole = on("JSVD_QR_WHOLE", k.qr_whole);
  k.qr_regs = integer("JSVD_QR_REGS", k.qr_regs);
  k.qr_lapack = integer("JSVD_QR_LAPACK", k.qr_lapack);
  k.qr_in_place = on("JSVD_QR_IN_PLACE", k.qr_in_place);
  k.v_solve = integer("JSVD_V_SOLVE", k.v_solve);
  k.eigh = integer("JSVD_EIGH", k.eigh);
  k.start_own_evd = integer("JSVD_START_OWN_EVD", k.start_own_evd);
  k.start_evd32 = integer("JSVD_START_EVD32", k.start_evd32);
  k.start_evd32_tall = integer("JSVD_START_EVD32_TALL", k.start_evd32_tall);
  k.start_evd32_tall_min = integer("JSVD_START_EVD32_TALL_MIN", k.start_evd32_tall_min);
  k.start_evd32_square = integer("JSVD_START_EVD32_SQUARE", k.start_evd32_square);
  k.start_evd32_square_ratio = integer("JSVD_START_EVD32_SQUARE_RATIO", k.start_evd32_square_ratio);
  k.gram_eig_jacobi_cols = integer("JSVD_GRAM_EIG_JACOBI_COLS", k.gram_eig_jacobi_cols);
  k.start_evd32_one_read = on("JSVD_START_EVD32_ONE_READ", k.start_evd32_one_read);
  k.start_late_check = on("JSVD_START_LATE_CHECK", k.start_late_check);
  k.start_x_steps = integer("JSVD_START_X_STEPS", k.start_x_steps);
  k.start_refine = on("JSVD_START_REFINE", k.start_refine);
  k.eigh_cond = integer("JSVD_EIGH_COND", k.eigh_cond);
  k.start_x_qr = integer("JSVD_START_X_QR", k.start_x_qr);
  k.x_cholqr = integer("JSVD_X_CHOLQR", k.x_cholqr);
  k.gram_chunk = on("JSVD_GRAM_CHUNK", k.gram_chunk);
  k.gram_products = on("JSVD_GRAM_PRODUCTS", k.gram_products);
  k.start_converged = on("JSVD_START_CONVERGED", k.start_converged);
  k.start_converged_f64 = on("JSVD_START_CONVERGED_F64", k.start_converged_f64);
  k.start_converged_x32 = on("JSVD_START_CONVERGED_X32", k.start_converged_x32);
  k.polish = integer("JSVD_POLISH", k.polish);
  k.polish_warp = integer("JSVD_POLISH_WARP", k.polish_warp);
  k.syev_graph = integer("JSVD_SYEV_GRAPH", k.syev_graph);
  k.list_qr = on("JSVD_LIST_QR", k.list_qr);
  k.list_start = integer("JSVD_LIST_START", k.list_start);
  k.list_start_class = integer("JSVD_LIST_START_CLASS", k.list_start_class);
  if (k.list_start_class < 1) k.list_start_class = 128;
  k.cross_only = on("JSVD_CROSS_ONLY", k.cross_only);
  k.sweep_pipeline = on("JSVD_SWEEP_PIPELINE", k.sweep_pipeline);
  k.pair_queue = on("JSVD_PAIR_QUEUE", k.pair_queue);
  k.reg_steps = on("JSVD_REG_STEPS", k.reg_steps);
  k.pdl = on("JSVD_PDL", k.pdl);
  k.whole_regs = integer("JSVD_WHOLE_REGS", k.whole_regs);
  k.pad_rows = on("JSVD_PAD_ROWS", k.pad_rows);
  k.whole_wide_lanes = integer("JSVD_WHOLE_WIDE_LANES", k.whole_wide_lanes);
  k.pair_delta = on("JSVD_PAIR_DELTA", k.pair_delta);
  k.list_streams = on("JSVD_LIST_STREAMS", k.list_streams);
  k.whole_merge = on("JSVD_WHOLE_MERGE", k.whole_merge);
  k.log_v = integer("JSVD_LOG_V", k.log_v);
  k.log_defer = integer("JSVD_LOG_DEFER", k.log_defer);
  k.gpu_stop_bound = on("JSVD_GPU_STOP_BOUND", k.gpu_stop_bound);
  k.info_read = on("JSVD_INFO_READ", k.info_read);
  k.cpu_block_width = integer("JSVD_CPU_W", k.cpu_block_width);
  if (k.cpu_block_width < 0) k.cpu_block_width = 0;
  k.cpu_stop_bound = on("JSVD_CPU_STOP_BOUND", k.cpu_stop_bound);
  k.cpu_avx2 = std::getenv("JSVD_CPU_NO_AVX2") == nullptr;
  k.cpu_avx512 = std::getenv("JSVD_CPU_NO_AVX512") == nullptr;
  return k;
}
}  // namespace knobs_detail

inline const Knobs& knobs() {
  static const Knobs k = knobs_detail::read();
  return k;
}

}  // namespace jsvd
