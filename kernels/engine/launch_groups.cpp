// Grouping a batch's matrices into launches (launch_groups.h).
#include "engine/launch_groups.h"

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <tuple>

#include "engine/device_upload.h"
#include "levels/blocked/pair_tasks.h"
#include "tuning_knobs.h"

namespace jsvd {
namespace cuda {
namespace {

// Host data for the launches, gathered in one buffer and uploaded in one copy.
class Staging {
 public:
  template <typename X>
  size_t push(const std::vector<X>& v) {
    const size_t off = (bytes_.size() + 15) / 16 * 16;
    bytes_.resize(off + v.size() * sizeof(X));
    if (!v.empty()) std::memcpy(bytes_.data() + off, v.data(), v.size() * sizeof(X));
    return off;
  }
  // Undefined when nothing was pushed (a uniform batch at a whole-matrix level).
  at::Tensor upload(const at::Device& device) const {
    return bytes_.empty() ? at::Tensor() : upload_bytes(bytes_.data(), bytes_.size(), device);
  }

 private:
  std::vector<uint8_t> bytes_;
};

// mats in decreasing p x q, stably, by a radix sort on the bytes of p x q (a whole or warp matrix has
// fewer than 2^32 elements): a comparison sort of 2000 list members took ~0.12 ms of host time on the
// H100's host, its branches unpredictable (issue 21).
void largest_first(std::vector<int32_t>& mats, const PackedBatch& b) {
  std::vector<uint32_t> key(mats.size());  // (complemented: ascending keys, largest first)
  for (size_t i = 0; i < mats.size(); ++i)
    key[i] = ~static_cast<uint32_t>(std::min<int64_t>(b.p(mats[i]) * b.q(mats[i]), UINT32_MAX));
  std::vector<int32_t> m2(mats.size());
  std::vector<uint32_t> k2(mats.size());
  for (int shift = 0; shift < 32; shift += 8) {
    size_t count[257] = {};
    for (const uint32_t k : key) ++count[((k >> shift) & 255) + 1];
    if (*std::max_element(count + 1, count + 257) == mats.size()) continue;  // (one digit: nothing moves)
    for (int d = 0; d < 256; ++d) count[d + 1] += count[d];
    for (size_t i = 0; i < mats.size(); ++i) {
      const size_t at = count[(key[i] >> shift) & 255]++;
      m2[at] = mats[i];
      k2[at] = key[i];
    }
    mats.swap(m2);
    key.swap(k2);
  }
}

}  // namespace

std::shared_ptr<Prep> prepare(const PackedBatch& b, const SvdOptions& opt, size_t es, const DeviceLimits& lim,
                              const at::Device& device, const MatrixPlan* uplan) {
  // Group the matrices' plans into launches. A uniform batch has one plan,
  // and needs neither descriptors nor matrix lists on the device
  // (EngineArgs::uni, list_at).
  auto prep = std::make_shared<Prep>();
  Prep& P = *prep;
  const int64_t N = b.size();
  const bool uv = opt.compute_uv && opt.want_v;  // (the launches' sizes: V carried or not)
  const bool uni = b.uniform;
  std::vector<MatrixDesc> desc(uni ? 0 : N);
  auto& whole = P.whole;
  auto& warp = P.warp;
  MatList& blocked = P.blocked;
  std::vector<std::vector<PairTask>> pair_steps, gram_steps;
  int64_t &gram_c = P.gram_c, &blocked_q = P.blocked_q, &max_p = P.max_p, &max_cols = P.max_cols,
          &ncolumn_blocks = P.ncolumn_blocks;
  // the block pairs' merged shape
  PairMerge pairs;  // their maxima (rows, columns, pair width), merge_pair_plan
  TORCH_CHECK(!uni || uplan, "jsvd internal: a uniform batch comes with its plan");
  // Tuning knob for experiments (benchmarks/): JSVD_CROSS_ONLY=0 redoes the
  // pairs inside the blocks in every task.
  const bool cross_only = knobs().cross_only;
  // A list's whole matrices of one lane count share a launch of the widest block among them: fewer,
  // fuller launches (a block of a small matrix idles some lane groups, which cost it nothing: its
  // steps are as many either way).
  const bool whole_merge = knobs().whole_merge;
  int64_t width_cap = 0;  // a list's block-pair width cap (list_width_cap: one width for the list)
  if (!uni) width_cap = list_width_cap(b.rows, b.cols, es, uv);
  for (int64_t k = 0; k < N; ++k) {
    const int64_t p = b.p(k), q = b.q(k);
    if (!uni) desc[k] = matrix_desc_of(b, k);
    max_p = std::max(max_p, p);
    max_cols = std::max(max_cols, opt.full_matrices ? b.uc(k) : q);
    MatrixPlan mp = uni ? *uplan : plan_matrix(p, q, es, uv, N, lim, nullptr, width_cap);
    if (!uni) merge_pair_plan(pairs, mp, p, q, es, uv, lim);
    // At the whole-matrix levels a uniform batch is one group of every
    // matrix, known from its first: the loop stops there.
    if (mp.level == Level::kWholeWarp) {
      MatList& g = warp[{mp.warp_lanes, mp.warp_rows}];
      if (uni) break;
      g.mats.push_back(static_cast<int32_t>(k));
      g.cost = std::max(g.cost, p * q);
      continue;
    }
    if (mp.level == Level::kWholeSmem) {
      // Matrices of one block shape share a launch sized for the largest
      // (its variant planned below, plan_whole_group).
      const SmemLaunch& l = mp.launch;
      WholeGroup& g = whole[{l.tpp, uni || !whole_merge ? l.threads : 0}];
      if (uni) {
        g.cfg = l;
        break;
      }
      g.cfg.tpp = l.tpp;
      g.cfg.threads = std::max(g.cfg.threads, l.threads);
      g.cost = std::max(g.cost, p * q);
      g.cfg.smem = std::max(g.cfg.smem, l.smem);
      g.cfg.rows = std::max(g.cfg.rows, l.rows);
      g.cfg.cols = std::max(g.cfg.cols, l.cols);
      g.cfg.reg_groups = std::max(g.cfg.reg_groups, l.reg_groups);
      g.mats.push_back(static_cast<int32_t>(k));
      continue;
    }
    // Blocked: round-robin over nb block columns; step s of every matrix is
    // launched together (Gram EVD, GEMM), or queued in step order (pair SVD).
    blocked.mats.push_back(static_cast<int32_t>(k));
    blocked_q = std::max(blocked_q, q);
    const int64_t w = mp.width;
    if (mp.level == Level::kGemm) {
      GemmGroup& g = P.gemm[{p, q}];
      g.width = w;
      g.inner = mp.gemm_inner;
      g.mats.push_back(static_cast<int32_t>(k));
      continue;
    }
    const bool pair = mp.level == Level::kPairSvd;
    if (!pair) gram_c = std::max(gram_c, 2 * w);
    ncolumn_blocks += append_pair_tasks(pair ? pair_steps : gram_steps, static_cast<int32_t>(k), q, w,
                                        static_cast<int32_t>(ncolumn_blocks), !pair || !cross_only, pair);
  }

  if (!uni) {
    for (auto& kv : whole) plan_whole_group(kv.second.cfg, es, uv);
    // Largest matrices first in each group: blocks start about in their order, so the longest
    // ones do not start last (longest-processing-time order).
    for (auto& kv : whole) largest_first(kv.second.mats, b);
    for (auto& kv : warp) largest_first(kv.second.mats, b);
  }
  if (!pair_steps.empty()) {
    // One launch for every matrix's pairs: E is carried when every pair
    // matrix's plan does so at one row count (the kernel's register bucket).
    const int64_t pc = std::max<int64_t>(pairs.c, 2);
    P.pair_cfg = uni ? uplan->launch
                     : plan_pair_launch(std::max<int64_t>(pairs.p, 1), pairs.q, pc, es, uv, pairs.launch_delta(uv));
  }

  // The pair SVD tasks of a sweep, in step order, each waiting for the tasks
  // before it on its two block columns (svd_smem_kernel.cuh).
  const std::vector<PairTask> pair_queue = queue_in_step_order(pair_steps, ncolumn_blocks, P.pair_step_range);
  P.pair_queue_size = pair_queue.size();

  Staging st;
  P.desc_off = uni ? 0 : st.push(desc);
  for (auto& kv : whole) kv.second.off = uni ? 0 : st.push(kv.second.mats);
  for (auto& kv : warp) kv.second.off = uni ? 0 : st.push(kv.second.mats);
  blocked.off = uni ? 0 : st.push(blocked.mats);
  for (auto& kv : P.gemm) kv.second.off = uni ? 0 : st.push(kv.second.mats);
  auto push_steps = [&](const std::vector<std::vector<PairTask>>& steps) {
    std::vector<std::pair<size_t, int>> where;
    for (const auto& s : steps) where.emplace_back(st.push(s), static_cast<int>(s.size()));
    return where;
  };
  P.pair_queue_off = st.push(pair_queue);
  P.gram_where = push_steps(gram_steps);
  P.staged = st.upload(device);
  return prep;
}

// A uniform batch's Prep depends only on its shape and options, and building
// it (tens of thousands of pair tasks at 512², their upload) costs
// milliseconds of host time before the first kernel (docs/kernel-notes.md).
// So it is kept, per device and shape, and
// later calls wait on the stream for its upload's event instead (a no-op once
// it has run; the allocator learns of each stream that reads it). Not during
// a CUDA graph capture, which builds its own.
std::shared_ptr<const Prep> uniform_prep(const PackedBatch& b, const SvdOptions& opt, size_t es,
                                         const DeviceLimits& lim, const at::Device& device, const MatrixPlan& plan) {
  if (c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None)
    return prepare(b, opt, es, lim, device, &plan);
  using Key = std::tuple<int, int64_t, int64_t, int64_t, size_t, bool, bool, int, int64_t>;
  static std::mutex mu;
  static auto* cache = new std::map<Key, std::shared_ptr<const Prep>>();  // (never destroyed: CUDA may be gone at exit)
  // (with the plan's level and width: the auto-tuner times other plans of a shape)
  const Key key{device.index(), b.size(), b.rows[0], b.cols[0], es, opt.compute_uv && opt.want_v, opt.full_matrices,
                static_cast<int>(plan.level), plan.width};
  const at::cuda::CUDAStream stream = at::cuda::getCurrentCUDAStream();
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache->find(key);
    if (it != cache->end()) {
      const Prep& hit = *it->second;
      if (hit.uploaded) {
        hit.uploaded->block(stream);
        c10::cuda::CUDACachingAllocator::recordStream(hit.staged.storage().data_ptr(), stream);
      }
      return it->second;
    }
  }
  std::shared_ptr<Prep> prep = prepare(b, opt, es, lim, device, &plan);
  if (prep->staged.defined()) {
    prep->uploaded = std::make_shared<at::cuda::CUDAEvent>();
    prep->uploaded->record(stream);
  }
  std::lock_guard<std::mutex> lock(mu);
  if (cache->size() >= 32) cache->clear();  // (a bound: shapes in use are few)
  cache->emplace(key, prep);
  return prep;
}

}  // namespace cuda
}  // namespace jsvd
