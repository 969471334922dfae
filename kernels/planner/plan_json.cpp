// torch_jsvd.plan()'s report (plan_json): each shape's plan as the planner and the start routes choose it,
// as JSON (planner.cpp plans; this file only describes).
#include "planner/planner.h"

#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <sstream>

#include "core.h"
#include "eigen/evd_small.h"
#include "levels/gemm/gemm_level.h"
#include "levels/gram/gram_evd_smem.h"
#include "precondition/eigh_precondition.h"
#include "precondition/start_cholqr.h"
#include "precondition/start_x_steps.h"
#include "precondition/list_start.h"
#include "qr/qr_precondition.h"
#include "levels/smem/svd_smem.h"
#include "levels/warp/svd_warp.h"
#include "tuning_knobs.h"

namespace jsvd {
namespace cuda {

const char* level_name(Level level) {
  switch (level) {
    case Level::kWholeWarp: return "whole_svd_warp";
    case Level::kWholeSmem: return "whole_svd_smem";
    case Level::kPairSvd: return "pair_svd_smem";
    case Level::kGemm: return "gemm_gram_evd";
    default: return "gram_evd_smem";
  }
}

std::string plan_json(const std::vector<int64_t>& rows, const std::vector<int64_t>& cols, size_t elem,
                      bool compute_uv, int device, bool may_sync) {
  const DeviceLimits lim = device_limits(device);
  const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));  // occupancy queries
  std::ostringstream os;
  os << "{\"smem_per_block\": " << lim.smem_per_block << ", \"sm_count\": " << lim.sm_count
     << ", \"inner_sweeps\": " << inner_sweeps() << ", \"matrices\": [";
  // A batch whose matrices (tall orientation) share one shape is uniform. A list's shape groups are
  // uniform batches of their own, the rest one list (list_shape_groups, core.h; csrc/svd_varlen.cpp).
  bool uniform = true;
  for (size_t k = 1; k < rows.size(); ++k)
    uniform = uniform && std::max(rows[k], cols[k]) == std::max(rows[0], cols[0]) &&
              std::min(rows[k], cols[k]) == std::min(rows[0], cols[0]);
  std::vector<int64_t> tall_rows, tall_cols;  // (the members with something to decompose)
  std::vector<int32_t> group(rows.size(), -1);
  for (size_t k = 0; k < rows.size(); ++k) {
    if (std::min(rows[k], cols[k]) == 0) continue;
    tall_rows.push_back(std::max(rows[k], cols[k]));
    tall_cols.push_back(std::min(rows[k], cols[k]));
  }
  int32_t ngroups = 0;
  const std::vector<int32_t> tall_group = list_shape_groups(tall_rows, tall_cols, &ngroups);  // (none if uniform)
  std::vector<int64_t> group_count(ngroups, 0);
  std::vector<int64_t> rest_p, rest_q;  // the rest, a list of its own (its count, its pair width cap)
  for (size_t k = 0, t = 0; k < rows.size(); ++k) {
    if (std::min(rows[k], cols[k]) == 0) continue;
    group[k] = tall_group[t++];
    if (group[k] >= 0) {
      ++group_count[group[k]];
    } else {
      // (a member that takes the QR is a q x q matrix to the rest's Jacobi: qr_list.cpp)
      const int64_t P = std::max(rows[k], cols[k]), Q = std::min(rows[k], cols[k]);
      rest_p.push_back(qr_list_member(P, Q, elem, static_cast<int64_t>(rows.size()), lim) ? Q : P);
      rest_q.push_back(Q);
    }
  }
  const int64_t rest = static_cast<int64_t>(rest_q.size()), width_cap = list_width_cap(rest_p, rest_q, elem, compute_uv);
  // (the rest's members that take the Gram start, by their place in it: list_start.h)
  std::vector<uint8_t> rest_start(rest, 0);
  if (may_sync)
    for (const int64_t i : list_start_members(rest_p, rest_q, elem)) rest_start[i] = 1;
  PairMerge pairs;  // (a list's block pairs, as the engine merges them)
  for (size_t k = 0, r = 0; k < rows.size(); ++k) {
    // The engine works on the tall orientation.
    int64_t p = std::max(rows[k], cols[k]);
    const int64_t q = std::min(rows[k], cols[k]);
    os << (k ? ", " : "") << "{\"rows\": " << rows[k] << ", \"cols\": " << cols[k]
       << ", \"transposed\": " << (rows[k] < cols[k] ? "true" : "false");
    if (q == 0) {
      os << ", \"levels\": []}";
      continue;
    }
    // (As the engine plans it: the call's plan for a uniform batch, else this matrix's.)
    const bool in_group = group[k] >= 0, as_uniform = uniform || in_group;
    if (in_group) os << ", \"shape_group\": " << group_count[group[k]];  // (solved as a uniform batch of these)
    const int64_t count = uniform ? static_cast<int64_t>(rows.size()) : in_group ? group_count[group[k]] : rest;
    const CallPlan cp = plan_call(p, q, count, as_uniform, elem, compute_uv, 0, 0, lim, device, true, may_sync);
    // QR preconditioning: the levels below are those of the Jacobi on R^T. (A list's member: the
    // one-launch QR of its own, qr_list.cpp.)
    const bool list_qr = !as_uniform && qr_list_member(p, q, elem, rest, lim);
    if (cp.qr.on() || list_qr) {
      os << ", \"precondition\": {\"kernel\": \"" << (cp.qr.regs                 ? "householder_qr_whole_regs"
                                      : cp.qr.whole || list_qr ? "householder_qr_whole_smem"
                                      : cp.qr.lapack           ? "geqrf (cuSOLVER)"
                                                               : "householder_qr")
         << "\", \"panel_width\": " << cp.qr.panel << ", \"jacobi_on\": [" << q << ", " << q
         << "]";
      // V of the Jacobi on R^T: its rotations accumulated, or a triangular solve after (svd only)
      if (compute_uv) os << ", \"v\": \"" << (cp.v_solve ? "triangular_solve" : "rotations") << "\"";
      os << "}";
      p = q;
    }
    if (!as_uniform && rest_start[r++]) {
      os << ", \"start_v\": {\"kernel\": \"gram_eigh\", \"solver\": \"cusolverDnXsyevBatched\", \"gram_dtype\": "
            "\"float64\", \"padded_to\": "
         << list_start_order(q) << ", \"calls\": \"svd_varlen (a list's members of its size class in one call)\"}";
    }
    if (cp.eigh) {
      const bool gram32 = !gram_eig_by_jacobi(q) && evd32_route_on(count, p, q, elem, /*x_tested=*/true);
      os << ", \"start_v\": {\"kernel\": \"gram_eigh\", \"solver\": \""
         << (gram_eig_by_jacobi(q)               ? "jsvd (batched Jacobi on the float64 Gram matrices)"
             : gram32 && evd_small_on(count, q) ? "jsvd (tridiagonal reduction, bisection, inverse iteration)"
             : syev_batched_on(count)           ? "cusolverDnXsyevBatched"
                                                : "torch.linalg.eigh")
         << "\", \"gram_dtype\": \""
         << (gram32 ? "float32" : "float64")
         << "\", \"calls\": \"svd, svdvals (svd_ex, which never synchronises, plans without it)\"";
      // (float32's large batches of 65 to 128 columns: where X is tested, eigh_precondition.h; with
      // full_matrices tall ones on the float64 solver, near-square ones without the start; squares, whose
      // full_matrices the engines never see, as without it)
      if (p > q && !gram_eig_by_jacobi(q) && evd32_route_on(count, p, q, elem, true) && !evd32_route_on(count, p, q, elem))
        os << ", \"gram_dtype_full_matrices\": "
           << (start_f64_gram_on(count, p, q, elem) ? "\"float64\"" : "null");
      if (elem == sizeof(double))  // (eigh_precondition.h: the data may decline it)
        os << ", \"min_column_ratio\": " << start_limits(true, q).min_ratio;
      // (where X fails its test: first-order steps on it, start_x_steps.h, then the Jacobi on X)
      if (!gram_eig_by_jacobi(q) && !evd32_route_on(count, p, q, elem, true) && q <= kXStepsMaxCols &&
          knobs().start_x_steps > 0)
        os << ", \"x_steps\": " << knobs().start_x_steps;
      if (start_x_by_qr(count, p, q)) os << ", \"jacobi_on_x\": \"qr_path\"";
      SvdOptions reduced;  // (CholeskyQR2 first, without full_matrices; where it declines, the route above)
      if (x_by_cholqr(p, q, reduced)) os << ", \"x_qr\": \"cholesky_qr2 (float64; svd without full_matrices, svdvals)\"";
      os << "}";
    }
    MatrixPlan mp = cp.jacobi;
    if (!as_uniform) {
      mp = plan_matrix(p, q, elem, compute_uv, rest, lim, nullptr, width_cap);
      merge_pair_plan(pairs, mp, p, q, elem, compute_uv, lim);
      plan_variant(mp, elem, compute_uv);
    }
    os << ", \"levels\": [";
    if (mp.level == Level::kWholeWarp) {
      os << "{\"level\": 1, \"kernel\": \"" << level_name(mp.level) << "\", \"width\": " << q
         << ", \"lanes_per_matrix\": " << mp.warp_lanes << ", \"rows_per_lane\": " << mp.warp_rows << "}";
    } else if (mp.level == Level::kWholeSmem) {
      const SmemLaunch& cfg = mp.launch;
      os << "{\"level\": 1, \"kernel\": \"" << level_name(mp.level) << "\", \"width\": " << q
         << ", \"lanes_per_rotation\": " << cfg.tpp << ", \"steps\": \"" << (cfg.reg_rows ? "registers" : "shared")
         << "\", \"threads\": " << (cfg.reg_rows ? cfg.reg_threads : cfg.threads) << ", \"smem\": " << cfg.smem;
      if (cfg.reg_rows && cfg.pad_rows) os << ", \"rows_padded_to\": " << cfg.reg_rows * cfg.tpp;  // (A's and V's)
      if (cfg.log_v)  // (V in global memory, kernel_log_v.cuh; its rows and the log's steps staged at once)
        os << ", \"v\": \"rotation_log\", \"log_staging\": [" << cfg.log_rows << ", " << cfg.log_steps << "]"
           << ", \"log_sweeps_held\": "  // (applied after the kernel, log_v_apply.cu; 0: each sweep's in it)
           << (cfg.reg_rows ? log_v_deferred_sweeps(count, cfg.log_entries, sizeof(LogEntry<double>)) : 0);
      os << "}";
    } else if (mp.level == Level::kGemm) {
      const GemmShape g = gemm_shape(p, q, mp.width, as_uniform ? count : 1, lim.sm_count);
      os << "{\"level\": 1, \"kernel\": \"block_pairs_gemm\", \"width\": " << g.w << ", \"blocks\": " << 2 * g.pairs
         << ", \"steps_per_sweep\": " << 2 * g.pairs - 1 << ", \"gemm\": \"cublasDgemmBatched\", \"gram_split\": "
         << g.split << "}, {\"level\": 2, \"kernel\": \"" << level_name(mp.level) << "\", \"width\": " << g.c()
         << ", \"inner_sweeps\": " << mp.gemm_inner << "}";
    } else {
      const int64_t nb = (q + mp.width - 1) / mp.width;
      os << "{\"level\": 1, \"kernel\": \"block_pairs\", \"width\": " << mp.width << ", \"blocks\": " << nb
         << ", \"steps_per_sweep\": " << (nb + (nb & 1) - 1) << "}, {\"level\": 2, \"kernel\": \""
         << level_name(mp.level) << "\", \"width\": " << 2 * mp.width << ", \"threads\": " << mp.launch.threads
         << ", \"smem\": " << mp.launch.smem;
      if (mp.level == Level::kPairSvd)
        os << ", \"lanes_per_rotation\": " << mp.launch.tpp << ", \"register_rows\": " << mp.launch.reg_rows;
      // Under each column: V's rows, the pair's rotation J, or E = J - I.
      if (mp.level == Level::kPairSvd && compute_uv)
        os << ", \"carries\": \"" << (mp.launch.delta ? "delta" : pair_carries_rotation(elem) ? "rotation" : "v_rows")
           << "\"";
      os << "}";
    }
    os << "]";
    if (!cp.tuner.empty()) os << ", \"tuner\": \"" << cp.tuner << "\"";  // (its text has no quotes: tuner.cpp)
    os << "}";
  }
  os << "]}";
  return os.str();
}

}  // namespace cuda
}  // namespace jsvd
