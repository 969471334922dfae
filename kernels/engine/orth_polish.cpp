// orth_polish (orth_polish.h): the task list, and batched GEMMs where a factor exceeds a block.
#include "engine/orth_polish.h"

#include <ATen/cuda/CUDAContext.h>

#include <algorithm>
#include <vector>

#include "engine/device_upload.h"
#include "tuning_knobs.h"

namespace jsvd {
namespace cuda {
namespace {

// One factor of every matrix of a uniform batch, as (N, cols, rows): its columns are the rows of
// this view into the result. Q <- Q - Q E / 2 where ||E||_F is small enough, else unchanged. (The
// correction is of order eps: TF32, where the caller allows it, computes it well enough.)
void polish_by_gemm(at::Tensor Qt) {
  const at::Tensor Qd = Qt.to(at::kDouble);
  at::Tensor E = at::bmm(Qd, Qd.transpose(1, 2));
  E.diagonal(0, 1, 2).sub_(1.0);
  const at::Tensor skip = at::linalg_vector_norm(E, 2, at::IntArrayRef{1, 2}).le(kPolishMaxDefect).logical_not_();
  // (a skipped matrix's correction zeroed, NaN included)
  Qt.sub_(at::bmm(E.to(at::kFloat), Qt).masked_fill_(skip.view({-1, 1, 1}), 0), 0.5);
}

bool warp_sized(int64_t rows, int64_t cols) {
  return knobs().polish_warp != 0 && rows <= kPolishWarpMaxRows && cols <= kPolishWarpMaxCols;
}

// A warp's factor takes up to four times the block kernel's serial work (its tiles on 32 threads, not 64
// or 128), and keeps four times as many factors in flight an SM. Measured (H200, de378ba, ms, warp /
// block): 10000x8x32 0.19 / 0.25, 10000x16² 0.35 / 0.42, 10000x32² 1.64 / 1.72 (at 675ee16 1.61 / 1.61),
// but 1000x64x32 0.33 / 0.31: to 16 columns the warp always wins (the block kernel's 64 threads mostly
// idle); from 17 only where the factors fill the warp kernel's resident slots (64 warps an SM) at least
// once (docs/experiments.md, stop 63). `many`: whether the call has that many warp-sized factors of 17-32
// columns (many_wide, once a call: a list's loop over its factors asks by_warp for each).
bool many_wide(int64_t warp_sized_wide) {
  return warp_sized_wide >= kPolishWarpMinTasksPerSM * at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
}

bool by_warp(int64_t rows, int64_t cols, bool many) {
  if (!warp_sized(rows, cols)) return false;
  return cols <= kPolishWarpAlwaysCols || knobs().polish_warp == 2 || many;
}

}  // namespace

void orth_polish(const at::Tensor& U, const at::Tensor& V, const PackedBatch& b, cudaStream_t stream) {
  const int64_t N = b.size();
  if (N == 0 || !U.defined() || !V.defined() || U.scalar_type() != at::kFloat || !U.is_contiguous() ||
      !V.is_contiguous())
    return;
  if (b.uniform) {
    const int64_t p = b.p(0), q = b.q(0), uc = b.uc(0);
    if (q < kPolishMinCols) return;
    const size_t su = polish_smem_bytes(p, q), sv = polish_smem_bytes(q, q);
    const bool u_fits = su <= kPolishMaxSmem, v_fits = sv <= kPolishMaxSmem;
    if (!u_fits) polish_by_gemm(U.view({N, uc, p}).narrow(1, 0, q));
    if (!v_fits) polish_by_gemm(V.view({N, q, q}));
    if (!v_fits) return;  // (then U, of q columns and p >= q rows, did not fit either)
    const int n = static_cast<int>(N), nu = u_fits ? n : 0, c = static_cast<int>(q);
    const PolishTask tu{p * uc, static_cast<int32_t>(p), c}, tv{q * q, c, c};
    const auto go = [&](int first, int count, size_t smem, bool warp) {
      launch_orth_polish(U.data_ptr<float>(), V.data_ptr<float>(), nullptr, nu, first, count, smem, c, tu, tv,
                         warp, count, 0, stream);
    };
    const bool many = many_wide((warp_sized(p, q) ? N : 0) + N);  // (asked for 17-32 columns only)
    if (u_fits && by_warp(p, q, many)) {
      go(0, nu + n, su, true);
    } else if (by_warp(q, q, many)) {
      go(0, nu, su, false);
      go(nu, n, sv, true);
    } else {
      go(0, nu + n, u_fits ? su : sv, false);
    }
    return;
  }
  // A list: a task for each member's factor that one block holds, in the order U by a block, U by a
  // warp, V by a warp, V by a block (the warp-sized ones one range, the others one launch around it).
  int64_t wide = 0;
  for (int64_t k = 0; k < N; ++k) {
    const int64_t q = b.q(k);
    if (q > kPolishWarpAlwaysCols) wide += warp_sized(q, q) + warp_sized(b.p(k), q);
  }
  const bool many = many_wide(wide);
  std::vector<PolishTask> tasks[4];
  size_t smem[2] = {0, 0};  // block, warp
  int max_cols[2] = {0, 0};
  for (int64_t k = 0; k < N; ++k) {
    const int64_t q = b.q(k);
    if (q < kPolishMinCols) continue;
    for (int is_v = 0; is_v < 2; ++is_v) {
      const int64_t rows = is_v ? q : b.p(k);
      const size_t bytes = polish_smem_bytes(rows, q);
      if (bytes > kPolishMaxSmem) continue;
      const int w = by_warp(rows, q, many);
      tasks[is_v ? 3 - w : w].push_back(PolishTask{is_v ? b.v_at(k) : b.u_at(k), static_cast<int32_t>(rows),
                                                   static_cast<int32_t>(q)});
      smem[w] = std::max(smem[w], bytes);
      max_cols[w] = std::max(max_cols[w], static_cast<int>(q));
    }
  }
  std::vector<PolishTask> all;
  all.reserve(tasks[0].size() + tasks[1].size() + tasks[2].size() + tasks[3].size());
  for (const auto& t : tasks) all.insert(all.end(), t.begin(), t.end());
  if (all.empty()) return;
  const int total = static_cast<int>(all.size()), nu = static_cast<int>(tasks[0].size() + tasks[1].size());
  const int a = static_cast<int>(tasks[0].size()), nw = static_cast<int>(tasks[1].size() + tasks[2].size());
  const at::Tensor dev = upload_bytes(all.data(), all.size() * sizeof(PolishTask), U.device());
  const auto* d = reinterpret_cast<const PolishTask*>(dev.data_ptr());
  launch_orth_polish(U.data_ptr<float>(), V.data_ptr<float>(), d, nu, a, nw, smem[1], max_cols[1], PolishTask{},
                     PolishTask{}, true, nw, 0, stream);
  launch_orth_polish(U.data_ptr<float>(), V.data_ptr<float>(), d, nu, 0, total - nw, smem[0], max_cols[0],
                     PolishTask{}, PolishTask{}, false, a, nw, stream);
}

}  // namespace cuda
}  // namespace jsvd
