// The block-column pair tasks of the blocked levels (host side): which pairs
// each round-robin step rotates, and the queue in which a sweep's pair SVD
// tasks are taken, with the counts each task waits for (svd_smem_kernel.cuh).
// Checked without a GPU in cpp_tests/planner_test.cpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "engine/engine_types.h"
#include "common/round_robin.h"

namespace jsvd {
namespace cuda {

// Appends matrix k's tasks of one sweep to steps[s], s = each round-robin
// step over its nb = ceil(q / w) block columns (an odd nb gets a dummy slot).
// Its block columns are numbered from column_base in the queue's counts.
// The pairs inside the blocks: with every_task_intra (the Gram EVD level, and
// the JSVD_CROSS_ONLY=0 experiment) every task does them again; otherwise the
// tasks of step 0 do (it meets every block once), and with lone_intra the
// block that meets the dummy slot there gets a task of its own for them.
// Returns nb, the block columns numbered (the next matrix's column_base is
// column_base + nb).
inline int32_t append_pair_tasks(std::vector<std::vector<PairTask>>& steps, int32_t k, int64_t q, int64_t w,
                              int32_t column_base, bool every_task_intra, bool lone_intra) {
  const int64_t nb = (q + w - 1) / w, e = nb + (nb & 1);
  if (static_cast<int64_t>(steps.size()) < e - 1) steps.resize(e - 1);
  auto width = [&](int64_t i) { return static_cast<int32_t>(std::min(w, q - i * w)); };
  for (int64_t s = 0; s < e - 1; ++s) {
    for (int64_t pk = 0; pk < e / 2; ++pk) {
      int i, j;
      round_robin_pair(static_cast<int>(e), static_cast<int>(s), static_cast<int>(pk), i, j);
      const int32_t bi = column_base + i, bj = column_base + j;
      const int32_t ci = static_cast<int32_t>(i * w), cj = static_cast<int32_t>(j * w);
      if (j >= nb) {  // block i meets the dummy slot
        if (s == 0 && lone_intra) steps[s].push_back(PairTask{k, ci, ci, width(i) | kPairIntra, bi, bi, 0, 0});
        continue;
      }
      const int32_t intra = (s == 0 || every_task_intra) ? kPairIntra : 0;
      steps[s].push_back(PairTask{k, ci, cj, (width(i) | (width(j) << 16)) | intra, bi, bj, 0, 0});
    }
  }
  return static_cast<int32_t>(nb);
}

// A sweep's pair SVD tasks in the order the queue hands them out (step by
// step), each with need0 / need1 = the number of tasks before it on its block
// columns b0 / b1: it starts once that many are counted done. ncolumns: the
// number of block columns counted. step_range: each step's first task in the
// queue, and its task count (for launches step by step).
inline std::vector<PairTask> queue_in_step_order(const std::vector<std::vector<PairTask>>& steps, int64_t ncolumns,
                                                 std::vector<std::pair<size_t, int>>& step_range) {
  std::vector<PairTask> queue;
  size_t total = 0;
  for (const auto& step : steps) total += step.size();
  queue.reserve(total);  // (tens of thousands of tasks: growth copies cost host time a call)
  std::vector<int32_t> done(static_cast<size_t>(ncolumns), 0);
  step_range.clear();
  for (const auto& step : steps) {
    step_range.emplace_back(queue.size(), static_cast<int>(step.size()));
    for (PairTask t : step) {
      t.need0 = done[t.b0];
      t.need1 = done[t.b1];
      done[t.b0] += 1;
      if (t.b1 != t.b0) done[t.b1] += 1;
      queue.push_back(t);
    }
  }
  return queue;
}

}  // namespace cuda
}  // namespace jsvd
