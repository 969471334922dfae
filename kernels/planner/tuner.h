// The tailoring auto-tuner (W-cycle paper §IV-D): for a uniform batch of
// large matrices, whether the GEMM level (and at which block width) or the
// shared-memory block pairs solve it faster on this device. Calibrated by
// timing the candidates the first time a shape is needed (one and three
// sweeps of each: seconds, not minutes), cached in memory and on disk per device and tuner version
// ($JSVD_CACHE_DIR, else $XDG_CACHE_HOME/torch_jsvd, else ~/.cache/torch_jsvd).
// JSVD_TUNER=0 turns it off (the planner's rule: the GEMM level from
// JSVD_GEMM_MIN_COLS columns). A missing, stale or corrupt cache file is
// ignored (and rewritten); it never fails a call. The choice changes which
// kernels run, not what they compute: both levels converge to the same
// tolerance, so results differ by rounding only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace jsvd {
namespace cuda {

struct TunedLevel {
  bool measured = false;  // calibrated or cached; false: no choice, the planner's rule decides
  bool gemm = false;      // the GEMM level, else the planner's shared-memory levels
  int64_t width = 0;      // the GEMM level's block width
  std::string why;        // for plan(): where the choice came from and the predicted times
};

// Whether the tuner decides matrices of q columns (the Jacobi's shape: after
// QR preconditioning, q x q).
bool tuner_decides(int64_t q);

// The choice for `batch` p x q matrices; calibrates (host-synchronising,
// once per shape and device) unless `may_calibrate` is false or a CUDA graph
// is being captured, in which case an uncached shape gets no choice (measured
// false: the planner's rule).
TunedLevel tuned_level(int64_t batch, int64_t p, int64_t q, size_t elem, bool compute_uv, int device,
                       bool may_calibrate);

// Set while the tuner times a candidate: the engine then runs exactly this
// (no QR preconditioning, no nested tuning). nullptr otherwise.
const TunedLevel* tuner_override();

}  // namespace cuda
}  // namespace jsvd
