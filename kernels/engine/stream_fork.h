// Independent launch groups of one call on streams of their own (issue 21: a
// variable-size list's whole-matrix, warp and blocked groups share no data).
// Each group's stream comes from PyTorch's pool and waits for one event of the
// current stream (the fork); join() makes the current stream wait for all of
// them, so that the caller sees one call on its stream, as before. Tensors the
// groups use are allocated before the fork or on their group's stream (the
// caching allocator's rule), and live until after the join.
#pragma once

#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>

#include <vector>

namespace jsvd {
namespace cuda {

class StreamFork {
 public:
  // `on`: fork at all (else every group gets the current stream). Never
  // inside a CUDA graph capture, whose streams must join its origin's.
  explicit StreamFork(bool on)
      : main_(at::cuda::getCurrentCUDAStream()),
        on_(on && c10::cuda::currentStreamCaptureStatusMayInitCtx() == c10::cuda::CaptureStatus::None) {
    if (on_) forked_.record(main_);
  }
  StreamFork(const StreamFork&) = delete;
  StreamFork& operator=(const StreamFork&) = delete;
  ~StreamFork() { join(); }

  // The stream of the next group: the current one, or a pool stream after the
  // fork (high priority: its blocks are scheduled first where SMs free up).
  at::cuda::CUDAStream next(bool high_priority = false) {
    if (!on_) return main_;
    at::cuda::CUDAStream s = at::cuda::getStreamFromPool(high_priority, main_.device_index());
    forked_.block(s);
    used_.push_back(s);
    return s;
  }

  // The current stream waits for every group's work so far.
  void join() {
    for (const at::cuda::CUDAStream& s : used_) {
      at::cuda::CUDAEvent done;
      done.record(s);
      done.block(main_);
    }
    used_.clear();
  }

 private:
  at::cuda::CUDAStream main_;
  bool on_;
  at::cuda::CUDAEvent forked_;
  std::vector<at::cuda::CUDAStream> used_;
};

}  // namespace cuda
}  // namespace jsvd
