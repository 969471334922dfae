#include "planner/planner.h"

#include <cuda_runtime.h>

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>

#include <algorithm>
#include <mutex>
#include <optional>

#include "levels/gemm/gemm_level.h"
#include "levels/gram/gram_evd_smem.h"
#include "precondition/eigh_precondition.h"
#include "qr/qr_precondition.h"
#include "levels/smem/svd_smem.h"
#include "levels/warp/svd_warp.h"
#include "tuning_knobs.h"

namespace jsvd {
namespace cuda {

DeviceLimits device_limits(int device) {
  static std::mutex mu;
  static std::vector<DeviceLimits> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (device >= static_cast<int>(cache.size())) cache.resize(device + 1);
  DeviceLimits& l = cache[device];
  if (l.sm_count == 0) {
    int smem = 0, sms = 0;
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    l.smem_per_block = static_cast<size_t>(smem);
    l.sm_count = sms;
  }
  return l;
}

int inner_sweeps() { return knobs().inner_sweeps; }

namespace {
// float64 block pairs of matrices to this many columns prefer 16 columns to 32 (plan_matrix).
constexpr int64_t kF64NarrowPairCols = 128;

// The dynamic shared memory a launch may take (kSmemKernelStatic: the kernel's own variables).
size_t smem_budget(const DeviceLimits& lim) { return lim.smem_per_block - kSmemKernelStatic; }

// Block pairs of a matrix of `cols` columns whose rotations come from their Gram matrix's EVD.
MatrixPlan gram_plan(int64_t cols) {
  MatrixPlan mp;
  mp.level = Level::kGramEvd;
  mp.width = std::min<int64_t>(kGramMaxCols / 2, (cols + 1) / 2);
  mp.launch.threads = 256;
  mp.launch.smem = gram_evd_smem_bytes(2 * mp.width);
  return mp;
}
}  // namespace

MatrixPlan plan_matrix(int64_t rows, int64_t cols, size_t elem, bool compute_uv, int64_t batch,
                       const DeviceLimits& lim, const TunedLevel* tuned, int64_t width_cap, bool log_v) {
  MatrixPlan mp;
  // Test hook: JSVD_LEVEL=whole|pair|gram|gemm sends every matrix that would go to
  // a lower level to that one instead (the levels' tests on any shape).
  const int min_level = knobs().level;
  // Level 0: at most 32 columns, the whole matrix in registers (no barriers;
  // measured in benchmarks/RESULTS.md).
  const WarpLaunch wl = min_level <= 0 ? svd_warp_config(rows, cols, elem) : WarpLaunch{};
  if (wl.lanes > 0) {
    mp.level = Level::kWholeWarp;
    mp.warp_lanes = wl.lanes;
    mp.warp_rows = wl.rows;
    return mp;
  }
  // Level 1: the whole matrix in shared memory (Observation 1: its SVD
  // directly, no Gram matrix, no global traffic between sweeps).
  const int64_t vrows = compute_uv ? cols : 0;  // V rides along under A's columns
  const size_t budget = smem_budget(lim);
  if (min_level <= 1 && svd_smem_bytes(rows, vrows, cols, elem) <= budget) {
    mp.level = Level::kWholeSmem;
    mp.launch = svd_smem_config(rows, vrows, cols, elem);
    return mp;
  }
  // Level 1 with V by the log (kernel_log_v.cuh) where A fits alone with the log's least staging, and
  // its rows the register steps (float64: 16 lanes a rotation, 8 rows a lane; plan_log_v declines the
  // shared-memory steps, where the whole level lost to block pairs: docs/design.md). JSVD_LOG_V=2: either.
  if (log_v && compute_uv && min_level <= 1 && log_v_enabled(elem)) {
    SmemLaunch l = svd_smem_config(rows, 0, cols, elem);
    const int64_t slots = std::min<int64_t>(1024 / l.tpp, std::max<int64_t>(l.reg_groups, (cols + 1) / 2));
    if ((knobs().log_v == 2 || (l.tpp >= 16 && rows <= 8 * l.tpp)) &&
        l.smem + log_v_min_smem_bytes(cols, std::max<int64_t>(slots, 32 / l.tpp), elem) <= budget) {
      l.log_v = true;
      mp.level = Level::kWholeSmem;
      mp.launch = l;
      return mp;
    }
  }
  // Blocked: the widest block-column pair whose SVD fits in shared memory,
  // narrowed while one round-robin step of the batch would leave SMs idle.
  // A float64 pair carries its 2w x 2w rotation under its columns, a float32
  // pair V's rows (svd_smem_kernel.cuh). Pairs narrower than 8 columns (unless the
  // matrix itself is that narrow) waste the block on a tall sliver: the Gram
  // EVD serves those better.
  const int64_t half = (cols + 1) / 2;
  // The GEMM level (levels/gemm/): large matrices, whose block pairs are too
  // few to fill the GPU and too tall for shared memory; where it wins is the
  // auto-tuner's to say (tuner.h), else a rule.
  const bool gemm = tuned ? tuned->gemm : cols >= knobs().gemm_min_cols;
  if (min_level >= 4 || (min_level == 0 && gemm)) {
    mp.level = Level::kGemm;
    const int64_t w = knobs().gemm_width > 0 ? knobs().gemm_width : tuned && tuned->gemm ? tuned->width : 32;
    mp.width = std::min<int64_t>(w, half);
    mp.width = std::min<int64_t>(mp.width, kGemmMaxPair / 2);
    mp.gemm_inner = knobs().gemm_inner > 0 ? knobs().gemm_inner : 1;
    return mp;
  }
  // The launch of block pairs of width w, sized as the engine launches it
  // (pair_smem_config). Float32 pairs of the register buckets' sizes carry
  // E = J - I (2w rows under a column) instead of V's q rows
  // (svd_smem_kernel.cuh, pair_delta_fits): half the shared memory at 512².
  auto pair_bytes = [&](int64_t w) {
    return pair_smem_config(rows, cols, 2 * w, elem, compute_uv, compute_uv && pair_delta_fits(rows, cols, w, elem)).smem;
  };
  int64_t chosen = 0;
  // Prefer pairs small enough for two blocks per SM (one block of a
  // latency-bound kernel leaves the SM idle between steps), but in float32
  // not below 16 columns a block for it once a step fills every SM: 8-column
  // blocks double the steps of a sweep, which the register cross steps of
  // 16-column blocks more than pay for in float32, not in float64 (none at
  // that width; docs/kernel-notes.md). A few large matrices still narrow to 8
  // for the tasks. float64 pairs of matrices of at most kF64NarrowPairCols columns go on to 16 where a
  // step still fills every SM twice (H200, stop 64, JSVD_PAIR_WIDTH=16 / the rule's 32, two rounds, ms:
  // 500x128² 11.00, 10.95 / 11.35, 11.66; 200x128² 5.50, 5.58 / 5.50, 5.82, singular values over 8
  // decades 9.18, 8.09 / 9.22, 8.59: five smaller blocks an SM instead of two).
  const bool f64_narrow = elem == sizeof(double) && cols <= kF64NarrowPairCols;
  for (int64_t w : {64, 32, 16, 8}) {
    w = std::min(w, half);
    const size_t bytes = pair_bytes(w);
    if (bytes > budget) continue;
    chosen = w;
    const int64_t tasks_per_step = batch * (cols / (2 * w));
    if (tasks_per_step >= 2 * static_cast<int64_t>(lim.sm_count) && bytes <= lim.smem_per_block / 2 &&
        !(f64_narrow && w > 16))
      break;
    if (elem == sizeof(float) && w <= 16 && tasks_per_step >= lim.sm_count) break;
  }
  if (width_cap > 0 && chosen > 0) chosen = std::min(chosen, width_cap);  // (a list: list_width_cap)
  const int64_t forced_width = knobs().pair_width;
  if (forced_width > 0) {
    const int64_t w = std::min<int64_t>(forced_width, half);
    if (pair_bytes(w) <= budget) chosen = w;
  }
  if (chosen > 0 && min_level <= 2) {
    mp.level = Level::kPairSvd;
    mp.width = chosen;
    mp.launch = pair_smem_config(rows, cols, 2 * chosen, elem, compute_uv,
                                 compute_uv && pair_delta_fits(rows, cols, chosen, elem));
    return mp;
  }
  // Too tall for any pair: rotations from the Gram matrix's EVD.
  return gram_plan(cols);
}

// A list's sweep lasts as long as its largest member's chain of round-robin steps, each a task on one
// SM whose time grows with the pair's width squared: narrower float32 pairs in lists, one width for all
// members (8 and 16 mixed in one launch: 40 x [100, 600] 29.5 -> 44.8 ms), 16 columns, and 8 where the
// largest member has more than 256 (H200, docs/experiments.md, stop 38: 458 x [257, 512] 413 -> 361 ms,
// 20 x [700, 1000] 577 -> 351, 243 x [129, 256] 21.8 -> 18.5, 300 x [16, 256] 11.8 -> 9.8); but 16 where
// a member's pairs of 16 would carry E (pair_delta_fits: half the shared memory of V's rows at 512 rows).
int64_t list_width_cap(const std::vector<int64_t>& p, const std::vector<int64_t>& q, size_t elem, bool compute_uv) {
  if (elem != sizeof(float) || q.empty()) return 0;
  int64_t most = 0;
  bool delta = false;
  for (size_t k = 0; k < q.size(); ++k) {
    most = std::max(most, q[k]);
    delta = delta || (compute_uv && pair_delta_fits(p[k], q[k], 16, elem));
  }
  return most > 256 && !delta ? 8 : 16;
}

namespace {
// mp with whole matrices launched as `launch`, their steps chosen (plan_variant); none where the block's
// shared memory would not hold them. The two lane-count variants below each try one.
std::optional<MatrixPlan> with_launch(const MatrixPlan& mp, const SmemLaunch& launch, size_t elem, bool compute_uv,
                                      const DeviceLimits& lim) {
  if (launch.smem > smem_budget(lim)) return std::nullopt;
  MatrixPlan alt = mp;
  alt.launch = launch;
  plan_variant(alt, elem, compute_uv);
  return alt;
}

// Whole matrices of a float32 batch that fills the device twice over (a throughput-bound launch): about
// 8 rows of A a lane instead of 4 (fewer lanes per rotation, so fewer shuffles and barriers per row
// rotated), unless that loses the register steps. H100, stop 45 (docs/experiments.md), ms, 4 / 8 rows a
// lane: 2000x48² 2.97-3.01 / 2.23-2.25, 1000x33² 0.95-0.97 / 0.68, 4000x40² 3.54-3.56 / 3.17-3.19,
// 2000x60x40 2.06-2.07 / 1.73-1.75, 500x128x64 2.46-2.48 / 1.95; but 2000x64² 3.82-3.84 / 5.46-5.48, where
// 8 lanes a rotation had no register steps and 16 had (since cc066fb 8 have them: 2.96-3.06 ms, stop 46).
// Batches that fill the device less are latency-bound: wider groups (2 rows a lane) cut a 85-matrix list
// of 33..64 sides by a fifth, not taken.
void more_lane_rows(MatrixPlan& mp, int64_t rows, int64_t cols, size_t elem, bool compute_uv, int64_t batch,
                    const DeviceLimits& lim) {
  if (mp.level != Level::kWholeSmem || elem != sizeof(float) || batch < 2 * static_cast<int64_t>(lim.sm_count))
    return;
  const SmemLaunch launch = svd_smem_config(rows, compute_uv ? cols : 0, cols, elem, 8);
  if (launch.tpp == mp.launch.tpp) return;
  const std::optional<MatrixPlan> alt = with_launch(mp, launch, elem, compute_uv, lim);
  if (alt && (alt->launch.reg_rows > 0 || mp.launch.reg_rows == 0)) mp = *alt;
}

// float32 whole matrices whose lanes a rotation (16, every pair of a step in flight) hold no register bucket:
// more than 256 rows with V's (A's rows and V's: 180 x 100 has 280), so the shared-memory steps. At 32 lanes
// bucket 16 holds 512, in passes of 32 pairs (levels_in_registers). Taken where the rows are then padded to
// the bucket (512 rows of at most ~110 float32 columns fit a block's shared memory); not where they are not
// (H200, ms, 32 / 16 lanes: padded, stop 70: 10x180x100 1.97 / 2.78, 30x180x100 2.19 / 2.82, 30x200x96 1.13
// / 1.62; stop 69: 100x180x100 2.1 / 2.6; unpadded, stop 69: 200x160x112 6.8 / 5.5, 200x200x120 7.5 / 7.0,
// 10x160x112 3.5 / 2.7). JSVD_WHOLE_WIDE_LANES: 1 wherever it gets the register steps, 0 never.
void wider_lanes(MatrixPlan& mp, int64_t rows, int64_t cols, size_t elem, bool compute_uv, const DeviceLimits& lim) {
  const int mode = knobs().whole_wide_lanes;
  const int64_t lane_rows = rows + (compute_uv ? cols : 0);  // (A's and V's, 16 lanes' bucket 16 holds 256)
  if (mode == 0 || elem != sizeof(float) || mp.level != Level::kWholeSmem || mp.launch.reg_rows > 0 ||
      mp.launch.tpp != 16 || lane_rows <= 256)
    return;
  const std::optional<MatrixPlan> alt =
      with_launch(mp, svd_smem_config_lanes(rows, compute_uv ? cols : 0, cols, elem, 32), elem, compute_uv, lim);
  if (alt && alt->launch.reg_rows > 0 && (mode == 1 || alt->launch.pad_rows)) mp = *alt;
}
}  // namespace

void plan_variant(MatrixPlan& mp, size_t elem, bool compute_uv) {
  if (mp.level == Level::kWholeSmem && mp.launch.log_v) {  // (false where declined: plan_matrix_log)
    plan_log_v(mp.launch, elem, smem_budget(device_limits(c10::cuda::current_device())));
    return;
  }
  if (mp.level == Level::kWholeSmem) choose_whole_steps(mp.launch, elem, compute_uv);
  if (mp.level == Level::kPairSvd) choose_pair_steps(mp.launch, elem, compute_uv);
}

void plan_whole_group(SmemLaunch& merged, size_t elem, bool compute_uv) {
  choose_whole_steps(merged, elem, compute_uv);
}

SmemLaunch plan_pair_launch(int64_t rows, int64_t cols, int64_t c, size_t elem, bool compute_uv, bool delta) {
  SmemLaunch cfg = pair_smem_config(rows, cols, c, elem, compute_uv, delta);
  choose_pair_steps(cfg, elem, compute_uv);
  return cfg;
}

namespace {
// plan_matrix with V by the log where it takes it, its variant planned; where plan_log_v declines (the
// shared-memory steps), the plan without it.
MatrixPlan plan_matrix_log(int64_t rows, int64_t cols, size_t elem, bool compute_uv, int64_t batch,
                           const DeviceLimits& lim, const TunedLevel* tuned) {
  MatrixPlan mp = plan_matrix(rows, cols, elem, compute_uv, batch, lim, tuned, 0, /*log_v=*/true);
  const bool log = mp.level == Level::kWholeSmem && mp.launch.log_v;
  plan_variant(mp, elem, compute_uv);
  if (log && !mp.launch.log_v) {
    mp = plan_matrix(rows, cols, elem, compute_uv, batch, lim, tuned);
    plan_variant(mp, elem, compute_uv);
  }
  return mp;
}
}  // namespace

CallPlan plan_call(int64_t rows, int64_t cols, int64_t batch, bool uniform, size_t elem, bool compute_uv,
                   int64_t view_stride, int64_t numel, const DeviceLimits& lim, int device, bool may_calibrate,
                   bool may_sync, bool may_start, bool may_qr) {
  CallPlan cp;
  // The auto-tuner timing a candidate: exactly that, on the Jacobi's shape.
  const TunedLevel* forced = tuner_override();
  // One matrix of 256 columns or more, or a few large ones: the Jacobi on M V0 (eigh_precondition.h),
  // no QR (H100, 1x4096² float32: 368 ms with the QR first, 270 without; 1x3072x768 25.9 against
  // 13.9). Else uniform batches of enough columns: the Jacobi on R^T (qr_precondition.h).
  if (!forced) cp.eigh = may_sync && may_start && eigh_precondition_on(batch, rows, cols, elem, uniform);
  if (!forced && !cp.eigh && may_qr) cp.qr = qr_choice(rows, cols, elem, uniform, batch, lim);
  const int64_t p = cp.qr.on() ? cols : rows;
  // After the QR, svd (which may read on the host, for the matrices the solve does not serve) runs the
  // Jacobi on R^T without V in float64 and solves for V (qr_precondition.h) where that pays (H100,
  // docs/experiments.md, stop 37): where V moves the Jacobi off one block's shared memory (200 x 128²
  // float64: whole matrices without V, block pairs with; 13.9 -> 6.3 ms) and from 512 columns (100 x
  // 512² 254 -> 197 ms, 1 x 1024² 77 -> 42). Not where V fits beside A (100 x 512x64: 1.65 ms with
  // V, 2.06 without), nor where both Jacobis take block pairs of fewer columns (64 x 200²: 13.9 -> 11.4
  // on Gaussian matrices, but 8.2 -> 11.6 on graded ones, which the solve does not serve).
  const int vs = knobs().v_solve;  // (the QR is only for uniform batches: qr_choice)
  cp.v_solve = !forced && cp.qr.on() && compute_uv && may_sync && (vs > 0 || (vs < 0 && elem == sizeof(double)));
  if (uniform) {
    TunedLevel tuned;
    const bool carry_v = compute_uv && !cp.v_solve;
    if (!forced && tuner_decides(cols)) {
      // svd_ex reads nothing on the host, so its sweep loop queues all max_sweeps sweeps: block pairs
      // past convergence return at once, the GEMM level's GEMMs run in full every sweep. Where a round-robin
      // step of shared-memory block pairs fills the GPU twice over, their sweeps cost at most a few
      // times the GEMM level's, so svd_ex takes them (H200, 100 x 512² float64: 625 ms at the GEMM level,
      // its 64 sweeps queued, 314 by block pairs; docs/experiments.md, stop 41). Elsewhere (a few large
      // matrices: 1 x 4096² float32 3.0 s at the GEMM level, 8.7 by the Gram EVD level, its pairs too
      // tall for shared memory) the tuner decides, as for svd.
      const TunedLevel no_gemm{true, false, 0, "block pairs: svd_ex, whose GEMM-level sweeps cannot stop early"};
      const MatrixPlan pairs = may_sync ? MatrixPlan{} : plan_matrix(p, cols, elem, carry_v, batch, lim, &no_gemm);
      const bool fill = !may_sync && pairs.level == Level::kPairSvd &&
                        batch * (cols / (2 * pairs.width)) >= 2 * static_cast<int64_t>(lim.sm_count);
      tuned = fill ? no_gemm : tuned_level(batch, p, cols, elem, carry_v, device, may_calibrate);
      cp.tuner = tuned.why;
    }
    cp.jacobi =
        plan_matrix_log(p, cols, elem, carry_v, batch, lim, forced ? forced : tuned.measured ? &tuned : nullptr);
    if (!forced) {
      more_lane_rows(cp.jacobi, p, cols, elem, carry_v, batch, lim);
      wider_lanes(cp.jacobi, p, cols, elem, carry_v, lim);
    }
    if (cp.v_solve) {
      cp.jacobi_v = plan_matrix_log(p, cols, elem, true, batch, lim, tuned.measured ? &tuned : nullptr);
      // (JSVD_V_SOLVE=1: wherever it can run, for measurements; V by the log, kernel_log_v.cuh, is V
      // that does not fit beside A)
      const bool v_fits = cp.jacobi_v.level == Level::kWholeSmem && !cp.jacobi_v.launch.log_v;
      const bool pays = vs > 0 || (!v_fits && (cp.jacobi.level == Level::kWholeSmem || cols >= 512));
      // (and the warp level computes U only with V)
      if (cp.jacobi_v.level == Level::kWholeWarp || !pays) {
        cp.v_solve = false;
        cp.jacobi = cp.jacobi_v;
      }
    }
  }
  // Only the warp level never writes its input, so only a uniform batch that
  // it takes whole is read in place: for small matrices the packing copy is a
  // good part of a call's host time. A row-major square or tall input is read
  // transposed there (a lane reads a row: a cache line per lane and load),
  // which 32-lane matrices in large batches pay for (docs/kernel-notes.md).
  // The one-launch QRs read their input with any strides (qr_whole_smem.h) and write Q's reflectors
  // to a buffer of their own: the register one, a row a thread, always (1000 x 1024x16 float64 1.63
  // -> 1.43 ms, H100); the shared-memory one, its threads along the columns, where they are
  // contiguous (row-major 37 x 300x77 float32: 1.56 packed, 1.64 in place).
  // The Gram eigenvectors' start reads it in place too (its GEMMs take either orientation; stop 40).
  const bool warp = !cp.qr.on() && cp.jacobi.level == Level::kWholeWarp &&
                    (view_stride == 1 || cp.jacobi.warp_lanes < 32 || numel <= (int64_t{1} << 20));
  const bool qr = cp.qr.whole && knobs().qr_in_place && (cp.qr.regs || view_stride == 1);
  cp.read_in_place = view_stride > 0 && uniform && (cp.eigh || warp || qr);
  return cp;
}

void merge_pair_plan(PairMerge& merged, MatrixPlan& mp, int64_t p, int64_t q, size_t elem, bool compute_uv,
                     const DeviceLimits& lim) {
  if (mp.level != Level::kPairSvd) return;
  const PairMerge next{std::max(merged.p, p), std::max(merged.q, q), std::max(merged.c, 2 * mp.width),
                       merged.delta && mp.launch.delta, merged.p_min < 0 ? p : std::min(merged.p_min, p)};
  if (pair_smem_config(next.p, next.q, std::max<int64_t>(next.c, 2), elem, compute_uv, next.launch_delta(compute_uv))
          .smem > smem_budget(lim)) {
    mp = gram_plan(q);
    return;
  }
  merged = next;
}

}  // namespace cuda
}  // namespace jsvd
