// Launchers of the shared-memory one-sided Jacobi kernel (svd_smem_kernel.cuh):
// block shape and shared memory, the choice between its shared-memory and
// register steps.
#include "levels/smem/svd_smem.h"

#include "levels/smem/svd_smem_kernel.cuh"
#include "tuning_knobs.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

namespace jsvd {
namespace cuda {
namespace {

// Tuning knob for experiments (benchmarks/): JSVD_REG_STEPS=0 keeps the steps
// of block pairs in shared memory.
bool register_steps_enabled() {
  return knobs().reg_steps;
}

// Block-pair steps launched one by one are programmatic dependents of the
// launch before them (Hopper and later; the kernel waits for it first
// thing), so that a round-robin step's blocks are scheduled while the previous
// step drains instead of after it. JSVD_PDL=0 launches them plainly.
bool dependent_launch(int device) {
  return knobs().pdl && at::cuda::getDeviceProperties(device)->major >= 9;  // (PyTorch caches the properties)
}

// Whole matrices: one block per listed matrix.
template <typename T, int TPP, bool kWithV, int kRegRows = 0, bool kLogV = false>
void launch_whole(const EngineArgs<T>& args, const int32_t* tasks, int ntasks, int threads, size_t smem,
                  cudaStream_t stream) {
  auto kernel = svd_smem_kernel<T, TPP, false, kWithV, kRegRows, false, kLogV>;
  allow_dynamic_smem(kernel, smem);
  kernel<<<ntasks, threads, smem, stream>>>(args, tasks, nullptr);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// Whether kernel `a` (threads_a, smem_a) keeps at least as many blocks per SM
// as kernel `b` (threads_b, smem_b): a register-step kernel against the
// shared-memory one (a block per SM lost costs more than the registers save),
// or padded rows against unpadded. Cached by kernels, device and shapes: the
// occupancy query is host time.
bool keeps_occupancy(const void* a, int threads_a, size_t smem_a, const void* b, int threads_b, size_t smem_b) {
  static std::mutex mu;
  static std::map<std::tuple<const void*, const void*, int, int, int, size_t, size_t>, bool> cache;
  int device = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_tuple(a, b, device, threads_a, threads_b, smem_a, smem_b);
  auto it = cache.find(key);
  if (it == cache.end()) {
    int n_a = 0, n_b = 0;
    C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n_a, a, threads_a, smem_a));
    C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n_b, b, threads_b, smem_b));
    it = cache.emplace(key, n_a >= n_b && n_a > 0).first;
  }
  return it->second;
}
bool registers_keep_occupancy(const void* with_regs, int threads_regs, const void* without, int threads,
                              size_t smem) {
  return keeps_occupancy(with_regs, threads_regs, smem, without, threads, smem);
}

// Shared memory of c columns held at a column stride of ld (svd_smem_kernel.cuh's layout).
size_t smem_bytes_at(int64_t c, int64_t ld, size_t elem) {
  const int64_t npairs = c;  // as max_pairs in the kernel
  return static_cast<size_t>(c + npairs) * sizeof(double) + static_cast<size_t>(c * ld + 2 * npairs) * elem +
         static_cast<size_t>(c) * sizeof(int) + 16;
}

// The same for c columns of p + vrows rows at tpp lanes a rotation (the kernel's column stride).
size_t smem_bytes_lanes(int64_t p, int64_t vrows, int64_t c, size_t elem, int tpp) {
  return smem_bytes_at(c, column_stride(static_cast<int>(p + vrows), tpp), elem);
}

// The kernel of a block-pair launch. Its signature, for every instantiation.
template <typename T>
using PairKernel = void (*)(EngineArgs<T>, const int32_t*, const PairTask*);

// Block pairs, register bucket B: the register steps where that costs no
// block per SM. Measured on the H100 (docs/kernel-notes.md): faster where
// shared memory already allows one block per SM, slower where the registers
// took a third of the blocks away.
template <typename T, bool kWithV, int B>
bool pair_bucket_pays(const SmemLaunch& cfg) {
  auto with_regs = svd_smem_kernel<T, 32, true, kWithV, B>;
  auto without = svd_smem_kernel<T, 32, true, kWithV, 0>;
  allow_dynamic_smem(with_regs, cfg.smem);
  allow_dynamic_smem(without, cfg.smem);
  return registers_keep_occupancy(reinterpret_cast<const void*>(with_regs), cfg.threads,
                                  reinterpret_cast<const void*>(without), cfg.threads, cfg.smem);
}

// Whole matrices with the register steps. JSVD_WHOLE_REGS (experiments): 0
// never, 2 wherever a lane's rows fit the registers, otherwise (the default)
// only where that costs no block per SM.
int whole_registers_mode() {
  return knobs().whole_regs;
}

// Whether whole matrices of this launch take the register steps in bucket B
// (rows per lane): they must fit, and cost no block per SM. The block is
// widened to the ordering's most owners at a level (halving_order.h), up to
// 1024 threads: its size, or 0 for no. If yes, their rows are padded to the
// bucket (cfg.pad_rows, svd_smem_kernel.cuh) where the padded shared memory
// fits and costs no block per SM: the steps' loops then need no per-row bounds
// (rows_exact, kernel_register_steps.cuh).
template <typename T, int TPP, bool kWithV, int B, bool kLogV>
int whole_bucket_threads(SmemLaunch& cfg) {
  const int64_t words = B * static_cast<int64_t>(sizeof(T)) / 4;
  const int threads = std::max(32, std::min(cfg.reg_groups, 1024 / TPP) * TPP);
  if (cfg.rows > static_cast<int64_t>(B) * TPP || threads > reg_block_limit(words)) return 0;
  auto with_regs = svd_smem_kernel<T, TPP, false, kWithV, B, false, kLogV>;
  auto without = svd_smem_kernel<T, TPP, false, kWithV, 0, false, kLogV>;
  allow_dynamic_smem(with_regs, cfg.smem);
  allow_dynamic_smem(without, cfg.smem);
  // 8 lanes a rotation whose rows fill at least 3/4 of the bucket: the register steps even where they
  // cost blocks per SM (H100, stop 46, ms, occupancy rule / registers: 64x48² 0.83 / 0.43, 200x48² 0.84 /
  // 0.52, 2000x48² 2.32 / 1.96, 300x56x40 0.75 / 0.39; but 1000x33², padded from 66 rows to 128, 0.69 / 0.76).
  const bool fills = TPP == 8 && 4 * cfg.rows >= 3 * static_cast<int64_t>(B) * TPP;
  if (whole_registers_mode() != 2 && !fills &&
      !registers_keep_occupancy(reinterpret_cast<const void*>(with_regs), threads,
                                reinterpret_cast<const void*>(without), cfg.threads, cfg.smem))
    return 0;
  cfg.pad_rows = false;
  const size_t padded = smem_bytes_at(cfg.cols, column_stride(B * TPP, TPP), sizeof(T));
  int device = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  const size_t limit = at::cuda::getDeviceProperties(device)->sharedMemPerBlockOptin - kSmemKernelStatic;
  if (knobs().pad_rows && padded <= limit) {
    allow_dynamic_smem(with_regs, padded);
    const void* k = reinterpret_cast<const void*>(with_regs);
    if (keeps_occupancy(k, threads, std::max(padded, cfg.smem), k, threads, cfg.smem)) {
      cfg.pad_rows = true;
      cfg.smem = std::max(padded, cfg.smem);
    }
  }
  return threads;
}

// The register steps' bucket for this launch (0: none) and its block size.
template <typename T, int TPP, bool kWithV, bool kLogV>
int whole_register_bucket(SmemLaunch& cfg, int& threads) {
  if (whole_registers_mode() == 0) return 0;
  if ((threads = whole_bucket_threads<T, TPP, kWithV, 8, kLogV>(cfg))) return 8;
  if ((threads = whole_bucket_threads<T, TPP, kWithV, 16, kLogV>(cfg))) return 16;
  return 0;
}

// Block pairs with a warp per rotation: the smallest register bucket that
// holds a lane's rows of a column at this block size, if it pays; 0 (the
// shared-memory steps) otherwise.
template <typename T, bool kWithV>
int pair_register_rows(const SmemLaunch& cfg) {
  const int64_t need = (cfg.rows + 31) / 32;
  auto fits = [&](int rows) {
    const int64_t words = rows * static_cast<int64_t>(sizeof(T)) / 4;
    return need <= rows && words <= kMaxRegWords && cfg.threads <= reg_block_limit(words);
  };
  if (fits(16)) return pair_bucket_pays<T, kWithV, 16>(cfg) ? 16 : 0;
  if (fits(32)) return pair_bucket_pays<T, kWithV, 32>(cfg) ? 32 : 0;
  if (fits(64)) return pair_bucket_pays<T, kWithV, 64>(cfg) ? 64 : 0;
  if constexpr (sizeof(T) == 4) {  // 96 float64 rows would not fit a lane's registers
    if (fits(96)) return pair_bucket_pays<T, kWithV, 96>(cfg) ? 96 : 0;
  }
  return 0;
}

// Block pairs carrying E (cfg.delta): the register bucket of p + 32 rows.
// At 512 rows and more it is faster and V more orthogonal; at 256 rows (8 of
// A a lane) E's GEMM costs what V's rotated rows did and its V staging waits,
// so it was slower (docs/kernel-notes.md). So 512 rows and up only.
template <typename T>
PairKernel<T> pair_delta_kernel(int64_t rows) {
  if constexpr (sizeof(T) == sizeof(float)) {
    if (rows == 17 * 32) return svd_smem_kernel<T, 32, true, true, 17, true>;
    if (rows == 33 * 32) return svd_smem_kernel<T, 32, true, true, 33, true>;
  }
  return nullptr;
}

// The kernel that block pairs of this launch run (its variant is the plan's).
template <typename T, bool kWithV>
PairKernel<T> pair_kernel(const SmemLaunch& cfg) {
  PairKernel<T> k = nullptr;
  if (cfg.delta) {
    k = pair_delta_kernel<T>(cfg.rows);
  } else {
    switch (cfg.tpp) {
      case 4: k = svd_smem_kernel<T, 4, true, kWithV>; break;
      case 8: k = svd_smem_kernel<T, 8, true, kWithV>; break;
      case 16: k = svd_smem_kernel<T, 16, true, kWithV>; break;
      default:
        switch (cfg.reg_rows) {
          case 0: k = svd_smem_kernel<T, 32, true, kWithV>; break;
          case 16: k = svd_smem_kernel<T, 32, true, kWithV, 16>; break;
          case 32: k = svd_smem_kernel<T, 32, true, kWithV, 32>; break;
          case 64: k = svd_smem_kernel<T, 32, true, kWithV, 64>; break;
          case 96:
            if constexpr (sizeof(T) == 4) k = svd_smem_kernel<T, 32, true, kWithV, 96>;
            break;
        }
    }
  }
  TORCH_CHECK(k, "jsvd internal: no block-pair kernel for this plan");
  allow_dynamic_smem(k, cfg.smem);
  return k;
}

template <typename T>
PairKernel<T> pair_kernel(const SmemLaunch& cfg, bool with_v) {
  TORCH_CHECK(with_v || !cfg.delta, "jsvd internal: E is carried only with V");
  return with_v ? pair_kernel<T, true>(cfg) : pair_kernel<T, false>(cfg);
}

// Whole matrices: the plan's variant (register steps of reg_rows rows a lane
// on reg_threads threads, or the shared-memory steps).
template <typename T, bool kWithV, bool kLogV = false>
void launch_tpp(const EngineArgs<T>& engine_args, const int32_t* tasks, int ntasks, const SmemLaunch& cfg,
                cudaStream_t stream) {
  EngineArgs<T> args = engine_args;
  args.pad_rows = cfg.reg_rows > 0 && cfg.pad_rows;
  const int rt = cfg.reg_threads;
  switch (cfg.tpp) {
    case 4: return launch_whole<T, 4, kWithV, 0, kLogV>(args, tasks, ntasks, cfg.threads, cfg.smem, stream);
    case 8:  // (register steps: float32 only, choose_whole_steps_t)
      if constexpr (sizeof(T) == sizeof(float)) {
        if (cfg.reg_rows == 8) return launch_whole<T, 8, kWithV, 8, kLogV>(args, tasks, ntasks, rt, cfg.smem, stream);
        if (cfg.reg_rows == 16) return launch_whole<T, 8, kWithV, 16, kLogV>(args, tasks, ntasks, rt, cfg.smem, stream);
      }
      return launch_whole<T, 8, kWithV, 0, kLogV>(args, tasks, ntasks, cfg.threads, cfg.smem, stream);
    case 16:
      if (cfg.reg_rows == 8) return launch_whole<T, 16, kWithV, 8, kLogV>(args, tasks, ntasks, rt, cfg.smem, stream);
      if (cfg.reg_rows == 16) return launch_whole<T, 16, kWithV, 16, kLogV>(args, tasks, ntasks, rt, cfg.smem, stream);
      return launch_whole<T, 16, kWithV, 0, kLogV>(args, tasks, ntasks, cfg.threads, cfg.smem, stream);
    default:
      if (cfg.reg_rows == 8) return launch_whole<T, 32, kWithV, 8, kLogV>(args, tasks, ntasks, rt, cfg.smem, stream);
      if (cfg.reg_rows == 16) return launch_whole<T, 32, kWithV, 16, kLogV>(args, tasks, ntasks, rt, cfg.smem, stream);
      return launch_whole<T, 32, kWithV, 0, kLogV>(args, tasks, ntasks, cfg.threads, cfg.smem, stream);
  }
}

template <typename T, bool kWithV, bool kLogV = false>
void choose_whole_steps_t(SmemLaunch& cfg) {
  int threads = 0;
  cfg.reg_rows = 0;
  cfg.pad_rows = false;
  // (8 lanes a rotation: float32 only. Float64's kernels spilled, and a float64 Hilbert 33 x 16 took
  // a sweep more than its test allows; not measured for speed.)
  if constexpr (sizeof(T) == sizeof(float)) {
    if (cfg.tpp == 8) cfg.reg_rows = whole_register_bucket<T, 8, kWithV, kLogV>(cfg, threads);
  }
  if (cfg.tpp == 16) cfg.reg_rows = whole_register_bucket<T, 16, kWithV, kLogV>(cfg, threads);
  if (cfg.tpp == 32) cfg.reg_rows = whole_register_bucket<T, 32, kWithV, kLogV>(cfg, threads);
  cfg.reg_threads = cfg.reg_rows ? threads : 0;
}

}  // namespace

bool pair_delta_fits(int64_t p, int64_t q, int64_t w, size_t elem) {
  return knobs().pair_delta && elem == sizeof(float) && w == 16 && q % 32 == 0 && q <= p &&
         pair_delta_kernel<float>(p + 2 * w) != nullptr;
}

size_t svd_smem_bytes(int64_t p, int64_t vrows, int64_t c, size_t elem, int lane_rows) {
  return smem_bytes_lanes(p, vrows, c, elem, lanes_per_rotation(p, c, lane_rows));
}

SmemLaunch svd_smem_config(int64_t p, int64_t vrows, int64_t c, size_t elem, int lane_rows) {
  return svd_smem_config_lanes(p, vrows, c, elem, lanes_per_rotation(p, c, lane_rows));
}

SmemLaunch svd_smem_config_lanes(int64_t p, int64_t vrows, int64_t c, size_t elem, int tpp) {
  SmemLaunch cfg;
  const int64_t pairs = (c + 1) / 2;
  cfg.tpp = tpp;
  const int64_t groups = std::min<int64_t>(pairs, 1024 / tpp);
  cfg.threads = static_cast<int>(std::max<int64_t>(groups * tpp, 32));
  cfg.smem = smem_bytes_lanes(p, vrows, c, elem, tpp);
  cfg.rows = p + vrows;
  cfg.cols = c;
  const HalvingOrder order{static_cast<int>(c), static_cast<int>((c + 1) / 2)};
  cfg.reg_groups = order.max_slots(order.levels());
  return cfg;
}

SmemLaunch pair_smem_config(int64_t p, int64_t q, int64_t c, size_t elem, bool with_v, bool delta) {
  const int64_t vrows = with_v ? (delta ? c : pair_vrows(q, c, elem)) : 0;
  SmemLaunch cfg = svd_smem_config(p, vrows, c, elem);
  cfg.delta = delta;
  if (delta) cfg.threads = delta_threads(cfg.rows);
  return cfg;
}

void choose_whole_steps(SmemLaunch& cfg, size_t elem, bool with_v) {
  if (elem == sizeof(float)) with_v ? choose_whole_steps_t<float, true>(cfg) : choose_whole_steps_t<float, false>(cfg);
  else with_v ? choose_whole_steps_t<double, true>(cfg) : choose_whole_steps_t<double, false>(cfg);
}

bool log_v_enabled(size_t elem) { return elem == sizeof(double) && knobs().log_v > 0; }

size_t log_v_smem_bytes(int64_t q, int64_t slots, size_t elem, int rows, int steps) {
  const size_t entry = elem == sizeof(double) ? sizeof(LogEntry<double>) : sizeof(LogEntry<float>);
  return 32 + static_cast<size_t>(rows * (q + 1)) * elem + static_cast<size_t>(steps * slots) * entry;
}

bool plan_log_v(SmemLaunch& cfg, size_t elem, size_t budget) {
  if (!log_v_enabled(elem)) return false;
  const size_t unpadded = cfg.smem;
  choose_whole_steps_t<double, false, true>(cfg);
  if (cfg.reg_rows == 0 && knobs().log_v < 2) return false;  // (the shared-memory steps: plan_matrix says why)
  // The log's records a sweep (kernel_log_v.cuh): the register steps' barrier steps (levels_in_registers:
  // each level's slots in passes of G groups), G slots each; the shared-memory steps' round-robin steps,
  // a slot per pair.
  const int c = static_cast<int>(cfg.cols), e = c + (c & 1);
  const int G = (cfg.reg_rows ? cfg.reg_threads : cfg.threads) / cfg.tpp;
  const HalvingOrder order{c, (c + 1) / 2};
  int64_t records = 0;
  for (int L = 0; L < order.levels(); ++L) records += HalvingOrder::ceil_div(order.slots(L), G) * order.steps(L);
  cfg.log_entries = std::max<int64_t>(records * G, static_cast<int64_t>(e - 1) * (e / 2));
  const int slots = std::max(G, e / 2);
  // The most rows and steps staged at once that fit (fewer: more passes over the log); the padding
  // gives way where it took the least's room.
  if (cfg.pad_rows && cfg.smem + log_v_min_smem_bytes(c, slots, elem) > budget) {
    cfg.pad_rows = false;
    cfg.smem = unpadded;
  }
  for (const auto& rs : {std::pair<int, int>{64, 16}, {64, 8}, {32, 16}, {32, 8}, {16, 8}, {16, 4}, {8, 4}}) {
    const size_t bytes = cfg.smem + log_v_smem_bytes(c, slots, elem, rs.first, rs.second);
    if (bytes > budget) continue;
    cfg.smem = bytes;
    cfg.log_rows = rs.first;
    cfg.log_steps = rs.second;
    cfg.log_v = true;
    return true;
  }
  cfg.log_v = false;
  return false;
}

void choose_pair_steps(SmemLaunch& cfg, size_t elem, bool with_v) {
  cfg.reg_threads = 0;
  if (cfg.delta) {
    cfg.reg_rows = static_cast<int>(cfg.rows / 32);  // (pair_delta_fits: a bucket of exactly these rows)
  } else if (cfg.tpp == 32 && register_steps_enabled()) {
    cfg.reg_rows = elem == sizeof(float) ? (with_v ? pair_register_rows<float, true>(cfg) : pair_register_rows<float, false>(cfg))
                                         : (with_v ? pair_register_rows<double, true>(cfg) : pair_register_rows<double, false>(cfg));
  } else {
    cfg.reg_rows = 0;
  }
}

template <typename T>
void launch_svd_whole(const EngineArgs<T>& args, const int32_t* tasks, int ntasks, const SmemLaunch& cfg,
                      bool with_v, cudaStream_t stream) {
  if (ntasks == 0) return;
  if (cfg.log_v) {
    TORCH_CHECK(with_v && sizeof(T) == sizeof(double) && args.vlog, "jsvd internal: V by the log is float64's, with V");
    if constexpr (sizeof(T) == sizeof(double)) {
      launch_tpp<T, false, true>(args, tasks, ntasks, cfg, stream);
      if (args.vlog_nrec) launch_log_v_apply<T>(args, tasks, ntasks, cfg, stream);
    }
    return;
  }
  if (with_v) launch_tpp<T, true>(args, tasks, ntasks, cfg, stream);
  else launch_tpp<T, false>(args, tasks, ntasks, cfg, stream);
}

template <typename T>
void launch_svd_pair(const EngineArgs<T>& args, const PairTask* tasks, int ntasks, const SmemLaunch& cfg,
                     bool with_v, cudaStream_t stream) {
  if (ntasks == 0) return;
  const PairKernel<T> kernel = pair_kernel<T>(cfg, with_v);
  int device = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  cudaLaunchConfig_t lc = {};
  lc.gridDim = dim3(ntasks);
  lc.blockDim = dim3(cfg.threads);
  lc.dynamicSmemBytes = cfg.smem;
  lc.stream = stream;
  cudaLaunchAttribute attr[1];
  if (!args.pair_next && dependent_launch(device)) {  // one round-robin step: a dependent of the one before
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    lc.attrs = attr;
    lc.numAttrs = 1;
  }
  C10_CUDA_CHECK(cudaLaunchKernelEx(&lc, kernel, args, static_cast<const int32_t*>(nullptr), tasks));
}

template void launch_svd_whole<float>(const EngineArgs<float>&, const int32_t*, int, const SmemLaunch&, bool, cudaStream_t);
template void launch_svd_whole<double>(const EngineArgs<double>&, const int32_t*, int, const SmemLaunch&, bool, cudaStream_t);
template void launch_svd_pair<float>(const EngineArgs<float>&, const PairTask*, int, const SmemLaunch&, bool, cudaStream_t);
template void launch_svd_pair<double>(const EngineArgs<double>&, const PairTask*, int, const SmemLaunch&, bool, cudaStream_t);

}  // namespace cuda
}  // namespace jsvd
