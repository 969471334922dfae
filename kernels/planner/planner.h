// Level selector of the W-cycle SVD (paper §III, Algorithm 2), sized by the
// real device: for each matrix, where its rotations are generated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "levels/smem/svd_smem.h"

namespace jsvd {
namespace cuda {

enum class Level {
  kWholeWarp,  // the whole matrix (at most 32 columns) in registers: a lane group per matrix
  kWholeSmem,  // the whole matrix (and V) in shared memory: one block, all sweeps
  kPairSvd,    // blocked: block-column pairs whose SVD fits in shared memory
  kGramEvd,    // blocked: pairs too tall; EVD of their Gram matrix in shared memory
};

struct DeviceLimits {
  size_t smem_per_block = 0;  // cudaDevAttrMaxSharedMemoryPerBlockOptin
  int sm_count = 0;
};

DeviceLimits device_limits(int device);

struct MatrixPlan {
  Level level = Level::kWholeSmem;
  int64_t width = 0;   // block width w of the blocked levels (0 for whole)
  SmemLaunch launch;   // shared-memory levels: the kernel's launch (Gram EVD: threads and smem only)
  int warp_lanes = 0;  // kWholeWarp: lanes per matrix (the padded column count)
  int warp_rows = 0;   // kWholeWarp: rows of A per lane
};

// rows >= cols >= 1. `batch` is the number of matrices launched together
// (more of them allows wider blocks at the same occupancy).
MatrixPlan plan_matrix(int64_t rows, int64_t cols, size_t elem, bool compute_uv, int64_t batch,
                       const DeviceLimits& lim);

const char* level_name(Level level);

// Inner sweeps allowed to a pair's SVD / Gram EVD on the blocked levels.
int inner_sweeps();

// The plan of each shape, as JSON, for torch_jsvd.plan().
std::string plan_json(const std::vector<int64_t>& rows, const std::vector<int64_t>& cols, size_t elem,
                      bool compute_uv, int device);

}  // namespace cuda
}  // namespace jsvd
