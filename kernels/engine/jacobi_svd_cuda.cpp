// CUDA engine: the W-cycle SVD over a packed batch (csrc/core.h).
//
// Every matrix gets a level from the planner. Whole-matrix levels run in one
// launch per block shape and finish in it. Blocked matrices share the sweep
// loop: a sweep's pair SVD tasks are one launch, a block per task, taken from
// a queue in round-robin step order (svd_smem_kernel.cuh); Gram EVD
// tasks (pairs too tall) one launch per round-robin step; and a tiny kernel
// does the convergence bookkeeping on the device. No host loop
// over matrices, no launch per matrix, everything on the current stream.
// W-cycle paper Algorithm 2 (levels: step 1, the matrices that fit whole;
// step 2, block pairs by SVD or Gram EVD) and §IV (the batched kernels).
#include "core.h"

#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/EmptyTensor.h>
#include <ATen/cuda/CachingHostAllocator.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <array>
#include <functional>
#include <memory>
#include <utility>

#include "levels/blocked/blocked_steps.h"
#include "engine/complete_u.h"
#include "engine/engine_types.h"
#include "engine/launch_groups.h"
#include "engine/orth_polish.h"
#include "engine/finite_check.h"
#include "engine/stream_fork.h"
#include "levels/gemm/gemm_level.h"
#include "levels/gram/gram_evd_smem.h"
#include "planner/planner.h"
#include "precondition/eigh_precondition.h"
#include "precondition/list_start.h"
#include "qr/qr_precondition.h"
#include "tuning_knobs.h"
#include "levels/smem/svd_smem.h"
#include "levels/warp/svd_warp.h"

namespace jsvd {
namespace {

using namespace cuda;

// `plan`: the call's plan of a uniform batch (unused otherwise).
template <typename T>
CoreResult run(const at::Tensor& A, const PackedBatch& b, const SvdOptions& opt, const MatrixPlan& plan) {
  const int64_t N = b.size();
  const bool uv = opt.compute_uv;
  const bool wv = uv && opt.want_v;  // V too (else U and S: SvdOptions::want_v)
  const size_t es = sizeof(T);
  const DeviceLimits lim = device_limits(A.get_device());

  const bool uni = b.uniform;
  const std::shared_ptr<const Prep> prep =
      uni ? uniform_prep(b, opt, es, lim, A.device(), plan) : prepare(b, opt, es, lim, A.device(), nullptr);
  const auto& whole = prep->whole;
  const auto& warp = prep->warp;
  const MatList& blocked = prep->blocked;
  const int64_t gram_c = prep->gram_c, blocked_q = prep->blocked_q, max_p = prep->max_p, max_cols = prep->max_cols,
                ncolumn_blocks = prep->ncolumn_blocks;
  const SmemLaunch& pair_cfg = prep->pair_cfg;
  const auto& pair_step_range = prep->pair_step_range;
  const auto& gram_where = prep->gram_where;
  const at::Tensor& staged = prep->staged;
  const uint8_t* base = staged.defined() ? staged.data_ptr<uint8_t>() : nullptr;
  // A list's device pointer and length; nullptr (every matrix) for a uniform batch.
  auto list_ptr = [&](const MatList& l) { return uni ? nullptr : reinterpret_cast<const int32_t*>(base + l.off); };
  auto list_len = [&](const MatList& l) { return static_cast<int>(uni ? N : static_cast<int64_t>(l.mats.size())); };

  CoreResult r;
  const auto opts = A.options();
  // The call's buffers straight from the caching allocator, not through the dispatcher: small calls
  // feel every allocation (about 2.5 us of host time an at::empty on the H100's host).
  const auto fresh = [&](int64_t n, at::ScalarType dt) -> at::Tensor {
    return at::detail::empty_cuda({n}, dt, A.device(), std::nullopt);
  };
  const at::ScalarType dt = A.scalar_type();
  r.S = fresh(b.s_numel, dt);
  r.info = fresh(N, at::kInt);
  at::Tensor Vw;
  if (uv) {
    // Every column is written: the first q by the level kernels (zero where S
    // has no direction), those from the rank on by the completion kernel.
    r.U = fresh(b.u_numel, dt);
    if (wv) r.V = fresh(b.v_numel, dt);
    if (wv && !blocked.mats.empty()) Vw = fresh(b.v_numel, dt);  // (before the fork: see StreamFork)
  }
  // (the warp levels write U only with V)
  TORCH_CHECK(wv == uv || warp.empty(), "jsvd internal: the warp levels compute U only with V");
  at::Tensor rank = fresh(N, at::kInt);
  at::Tensor state;  // (the blocked levels')
  if (!blocked.mats.empty()) state = fresh(static_cast<int64_t>(N * sizeof(MatrixState)), at::kByte);

  EngineArgs<T> args;
  args.A = A.data_ptr<T>();
  if (A.dim() == 3) {  // the caller's tensor, read in place (jacobi_svd_cuda)
    args.a_rs = A.stride(2);
    args.a_cs = A.stride(1);
  }
  args.U = uv ? r.U.data_ptr<T>() : nullptr;
  args.S = r.S.data_ptr<T>();
  args.V = wv ? r.V.data_ptr<T>() : nullptr;
  args.Vw = Vw.defined() ? Vw.data_ptr<T>() : nullptr;
  args.info = r.info.data_ptr<int32_t>();
  args.rank = rank.data_ptr<int32_t>();
  args.state = state.defined() ? reinterpret_cast<MatrixState*>(state.data_ptr<uint8_t>()) : nullptr;
  args.desc = uni ? nullptr : reinterpret_cast<const MatrixDesc*>(base + prep->desc_off);
  args.uni = MatrixDesc{A.dim() == 3 ? A.stride(0) : b.a_numel / N, b.u_numel / N, b.s_numel / N, b.v_numel / N, static_cast<int32_t>(b.rows[0]),
                        static_cast<int32_t>(b.cols[0]), static_cast<int32_t>(b.ucols[0]), 0};
  args.tol = opt.tol;
  at::Tensor vlog, vlog_nrec, vlog_rank;  // (whole matrices with V by the log: a uniform batch's one group, SmemLaunch::log_v)
  for (const auto& kv : whole) {
    if (!kv.second.cfg.log_v) continue;
    TORCH_CHECK(uni && wv && whole.size() == 1, "jsvd internal: V by the log is for a uniform batch's V");
    args.vlog_entries = kv.second.cfg.log_entries;
    args.vlog_rows = kv.second.cfg.log_rows;
    args.vlog_steps = kv.second.cfg.log_steps;
    // Deferred (the register steps): a few sweeps' log, applied after the kernel (log_v_apply.cu).
    const int64_t sweeps = kv.second.cfg.reg_rows > 0
                               ? log_v_deferred_sweeps(N, args.vlog_entries, sizeof(LogEntry<T>)) : 0;
    if (sweeps > 0) {
      args.vlog_entries *= sweeps;
      vlog_nrec = fresh(2 * N, at::kInt);  // (every block writes its two, kernel_write_back.cuh)
      vlog_rank = fresh(N * b.cols[0], at::kInt);
      args.vlog_nrec = vlog_nrec.data_ptr<int32_t>();
      args.vlog_rank = vlog_rank.data_ptr<int32_t>();
    }
    vlog = fresh(N * args.vlog_entries * static_cast<int64_t>(sizeof(LogEntry<T>)), at::kByte);
    args.vlog = vlog.data_ptr();
  }
  const int64_t max_sweeps = resolve_max_sweeps(opt);
  args.max_sweeps = static_cast<int32_t>(max_sweeps);

  // A list's launch groups are independent: each whole or warp group on a stream of its own, the
  // largest first, and the blocked matrices' sweep loop (the longest work) on a high-priority one,
  // all joined back into the current stream before U's completion (stream_fork.h). A uniform batch
  // is one group. JSVD_LIST_STREAMS=0: one after another on the current stream (experiments).
  const size_t ngroups = warp.size() + whole.size() + (blocked.mats.empty() ? 0 : 1);
  StreamFork fork(!uni && ngroups > 1 && knobs().list_streams);
  {
    std::vector<std::pair<int64_t, std::function<void(cudaStream_t)>>> groups;
    for (const auto& kv : warp) {
      const WarpLaunch cfg{kv.first.first, kv.first.second};
      const MatList* g = &kv.second;
      groups.emplace_back(g->cost, [&, g, cfg](cudaStream_t s) {
        launch_svd_warp(args, list_ptr(*g), list_len(*g), cfg, uv, s);
      });
    }
    for (const auto& kv : whole) {
      const WholeGroup* g = &kv.second;
      groups.emplace_back(g->cost, [&, g](cudaStream_t s) {
        launch_svd_whole(args, list_ptr(*g), list_len(*g), g->cfg, wv, s);
      });
    }
    std::stable_sort(groups.begin(), groups.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
    for (const auto& g : groups) g.second(fork.next());
  }

  if (!blocked.mats.empty()) {
    // (its allocations below on its own stream, the caching allocator's rule)
    const c10::cuda::CUDAStreamGuard on_blocked(fork.next(/*high_priority=*/true));
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const int32_t* bl = list_ptr(blocked);
    const int nbl = list_len(blocked);
    state.zero_();  // the prologue accumulates max|a| in it
    launch_prologue(args, bl, nbl, blocked_q, stream);
    EngineArgs<T> inner = args;
    inner.max_sweeps = inner_sweeps();
    // The GEMM level's groups: their matrices move to float64 work buffers
    // here, and back before the finalisation (gemm_level.h).
    std::vector<std::unique_ptr<GemmLevel<T>>> gemm;
    for (const auto& kv : prep->gemm) {
      const GemmGroup& g = kv.second;
      const int n = list_len(g);
      gemm.push_back(std::make_unique<GemmLevel<T>>(
          args, list_ptr(g), n, gemm_shape(kv.first.first, kv.first.second, g.width, n, lim.sm_count), g.inner,
          A.device(), stream));
    }
    // svd's stop test: each sweep's count of matrices still rotating, copied
    // to pinned host slots behind events. While every matrix still rotates,
    // the host queues sweep s + 1 before it reads sweep s's count (pipelined),
    // so the device does not wait for the host's round trip; once some have converged the end is
    // near, and it reads each sweep's count before queuing the next, since a
    // sweep queued past convergence, though every task returns at once, still
    // costs its blocks (docs/kernel-notes.md). JSVD_SWEEP_PIPELINE=0 never
    // reads ahead (experiments).
    // A GEMM-level sweep costs its GEMMs even past convergence: never ahead.
    const bool pipelined = knobs().sweep_pipeline && gemm.empty();
    const bool stop_bound = knobs().gpu_stop_bound;  // (the levels track it for float64 only: MatrixState)
    at::Tensor active, active_host;
    std::array<at::cuda::CUDAEvent, 2> counted;
    if (opt.may_sync) {
      active = at::empty({2}, opts.dtype(at::kInt));
      active_host = at::empty({2}, at::TensorOptions().dtype(at::kInt).pinned_memory(true));
    }
    int32_t still_active = nbl;  // the last count read
    const auto read_count = [&](int64_t sw) {
      counted[sw & 1].synchronize();
      still_active = active_host.const_data_ptr<int32_t>()[sw & 1];
    };
    // Block pairs: one queued launch a sweep (svd_smem_kernel.cuh), faster than
    // a launch per round-robin step at every blocked shape measured
    // (docs/kernel-notes.md). JSVD_PAIR_QUEUE=0 launches step by step (experiments).
    const bool queue_on = knobs().pair_queue;
    const bool queued = prep->pair_queue_size > 0 && queue_on;
    // The queue's state: the next task, then the block columns' counts.
    at::Tensor queue;
    const int64_t queue_ints = 1 + ncolumn_blocks;
    if (queued) {
      queue = at::empty({queue_ints}, opts.dtype(at::kInt));
      inner.pair_next = queue.data_ptr<int32_t>();
      inner.pair_done = inner.pair_next + 1;
    }
    const PairTask* queue_tasks = reinterpret_cast<const PairTask*>(base + prep->pair_queue_off);
    for (int64_t sweep = 1; sweep <= max_sweeps; ++sweep) {
      if (queued) {
        C10_CUDA_CHECK(cudaMemsetAsync(inner.pair_next, 0, queue_ints * sizeof(int32_t), stream));
        launch_svd_pair(inner, queue_tasks, static_cast<int>(prep->pair_queue_size), pair_cfg, wv, stream);
      } else {
        for (const auto& r : pair_step_range) launch_svd_pair(inner, queue_tasks + r.first, r.second, pair_cfg, wv, stream);
      }
      for (const auto& g : gram_where)
        launch_gram_evd(inner, reinterpret_cast<const PairTask*>(base + g.first), g.second, gram_c, stream);
      for (auto& g : gemm) g->sweep(args, stream);
      if (opt.may_sync) {
        const int slot = static_cast<int>(sweep & 1);
        int32_t* dev = active.data_ptr<int32_t>() + slot;
        C10_CUDA_CHECK(cudaMemsetAsync(dev, 0, sizeof(int32_t), stream));
        launch_end_sweep(args, bl, nbl, dev, stop_bound, stream);
        C10_CUDA_CHECK(cudaMemcpyAsync(active_host.mutable_data_ptr<int32_t>() + slot, dev, sizeof(int32_t),
                                       cudaMemcpyDeviceToHost, stream));
        counted[slot].record(at::cuda::getCurrentCUDAStream());
        // The one small read per sweep (its slot is not written again before).
        if (pipelined && still_active == nbl) {
          if (sweep > 1) read_count(sweep - 1);
          if (still_active == 0) break;  // (this sweep finds nothing to do)
        }
        if (!pipelined || still_active < nbl) {
          read_count(sweep);
          if (still_active == 0) break;
        }
      } else {
        launch_end_sweep(args, bl, nbl, nullptr, stop_bound, stream);
      }
    }
    // The last count's copy may still be pending: the caching host allocator
    // must not hand active_host out again before it lands.
    if (opt.may_sync)
      at::getHostAllocator(at::kCUDA)->record_event(active_host.mutable_data_ptr(),
                                                    active_host.storage().data_ptr().get_context(),
                                                    at::cuda::getCurrentCUDAStream().unwrap());
    for (auto& g : gemm) g->finish(args, stream);
    const at::Tensor norms = at::empty({b.s_numel}, opts.dtype(at::kDouble));
    const at::Tensor order = at::empty({b.s_numel}, opts.dtype(at::kInt));
    launch_finalize(args, bl, nbl, blocked_q, norms.data_ptr<double>(), order.data_ptr<int32_t>(), stream);
  }

  fork.join();
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  // (the thread level completes its own U: a batch of it alone needs no launch)
  bool all_thread = whole.empty() && blocked.mats.empty();
  for (const auto& kv : warp) all_thread = all_thread && kv.first.first == 1;
  if (uv && !all_thread) complete_u(args, r.U, rank, b, opt, lim, max_p, max_cols, stream);
  // (the warp level checks its own results as it writes them)
  if (!whole.empty() || !blocked.mats.empty())
    launch_flag_non_finite(args.S, args.U, args.V, args.info, args.desc, args.uni, static_cast<int>(N), stream);
  return r;
}

// The call, planned once (planner.h); `may_start`: false where the Gram eigenvectors' start declined
// the matrix (eigh_precondition.h), which is then solved as if the start did not exist; `may_qr`: false
// for the start's Gram matrices, whose Jacobi runs on them alone.
CoreResult solve(const at::Tensor& input, const PackedBatch& batch, const SvdOptions& opt, bool may_start,
                 bool may_qr = true) {
  const c10::cuda::CUDAGuard guard(input.device());
  const CallPlan cp = plan_call(batch.size() == 0 ? 0 : batch.p(0), batch.size() == 0 ? 0 : batch.q(0),
                                batch.size(), batch.uniform, input.element_size(), opt.compute_uv,
                                input.dim() == 3 ? input.stride(2) : 0, input.numel(),
                                device_limits(input.get_device()), input.get_device(), /*may_calibrate=*/true,
                                opt.may_sync, may_start, may_qr);
  at::Tensor A = input;
  if (A.dim() == 3 && !cp.read_in_place) A = packed_input(A);
  TORCH_CHECK(A.is_cuda() && (A.dim() == 3 || (A.dim() == 1 && A.is_contiguous())) && A.numel() == batch.a_numel,
              "jsvd internal: jacobi_svd_cuda expects the packed 1-D CUDA buffer or a 3-D view");
  // A host read inside a CUDA graph capture would invalidate it with an opaque
  // CUDA error; say what to use instead (svd_ex never reads on the host).
  TORCH_CHECK(!opt.may_sync || c10::cuda::currentStreamCaptureStatusMayInitCtx() == c10::cuda::CaptureStatus::None,
              "torch_jsvd: svd, svdvals and svd_varlen read results on the host (to stop sweeping early and to "
              "raise on info < 0), which a CUDA graph capture cannot contain; inside a capture use "
              "torch_jsvd.svd_ex, which never synchronises, and check its info afterwards");
  CoreResult r;
  if (batch.size() == 0) {
    r.S = at::empty({0}, A.options());
    r.info = at::empty({0}, A.options().dtype(at::kInt));
    if (opt.compute_uv) {
      r.U = at::empty({0}, A.options());
      r.V = at::empty({0}, A.options());
    }
    return r;
  }
  AT_DISPATCH_FLOATING_TYPES(A.scalar_type(), "jacobi_svd_cuda", [&] {
    // The Jacobi on the Gram eigenvectors' start, or on R^T after the QR, or on A, as planned.
    // (after the QR, the Jacobi carries no V where v_solve, but for the matrices it runs again with V)
    const Engine jacobi = [&cp](const at::Tensor& X, const PackedBatch& xb, const SvdOptions& xo) {
      return run<scalar_t>(X, xb, xo, cp.v_solve && xo.want_v ? cp.jacobi_v : cp.jacobi);
    };
    const Engine without_start = [](const at::Tensor& X, const PackedBatch& xb, const SvdOptions& xo) {
      return solve(X, xb, xo, /*may_start=*/false);
    };
    const Engine alone = [](const at::Tensor& X, const PackedBatch& xb, const SvdOptions& xo) {
      return solve(X, xb, xo, /*may_start=*/false, /*may_qr=*/false);
    };
    // (a list's members that take the QR: qr_list.cpp)
    const std::vector<int64_t> qr_members =
        may_qr && !batch.uniform ? qr_list_members(batch, sizeof(scalar_t), device_limits(A.get_device()))
                                 : std::vector<int64_t>();
    // (a list's large members that take the Gram start: list_start.cpp)
    const std::vector<int64_t> start_members = may_start && opt.may_sync && !batch.uniform
                                                   ? list_start_members(batch.rows, batch.cols, sizeof(scalar_t))
                                                   : std::vector<int64_t>();
    if (cp.eigh)
      r = svd_eigh_preconditioned(A, batch, opt, {jacobi, without_start, alone});
    else if (cp.qr.on())
      r = svd_qr_preconditioned(A, batch, opt, cp.qr, cp.v_solve, jacobi);
    else if (!start_members.empty() || !qr_members.empty()) {
      // (the two take disjoint members, the start 256 columns and more, the QR those that fit one block,
      // and each writes its members' X over their W: the start's Jacobi is the QR's list, where it has any)
      const Engine list_jacobi = qr_members.empty() ? jacobi : Engine([&](const at::Tensor& X, const PackedBatch& xb,
                                                                          const SvdOptions& xo) {
        return svd_qr_list(X, xb, xo, qr_members, jacobi);
      });
      r = start_members.empty() ? list_jacobi(A, batch, opt)
                                : svd_list_start(A, batch, opt, start_members, list_jacobi);
    } else {
      r = jacobi(A, batch, opt);
    }
  });
  return r;
}

}  // namespace

CoreResult jacobi_svd_cuda(const at::Tensor& input, const PackedBatch& batch, const SvdOptions& opt) {
  CoreResult r = solve(input, batch, opt, /*may_start=*/true);
  // float32's U and V to float32's rounding where the route leaves them about n eps from it
  // (orth_polish.h; CoreResult::polish). JSVD_POLISH=0 never, =1 on every route.
  const int polish = knobs().polish;
  if (opt.compute_uv && (polish == 1 || (polish == -1 && r.polish))) {
    const c10::cuda::CUDAGuard guard(input.device());
    orth_polish(r.U, r.V, batch, at::cuda::getCurrentCUDAStream());
  }
  return r;
}

}  // namespace jsvd
