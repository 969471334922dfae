// CPU engine: one-sided (Hestenes) Jacobi SVD, parallel over the batch (and,
// when the batch is smaller than the thread pool, over the column-block tiles
// of one matrix, jacobi_cpu_schedule.h).
//
// The per-matrix solver lives in jacobi_cpu_solver.h; it is compiled three
// times here (baseline ISA, AVX2+FMA, AVX-512) and the best copy the CPU
// supports is used. Extension build flags therefore do not decide whether the
// inner loops are vectorised.
#include "../core.h"
#include "../tuning_knobs.h"
#include "../complement_qr.h"
#include "gram_start_cpu.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <thread>
#include <tuple>
#include <vector>

#include <unistd.h>

#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define JSVD_HAVE_AVX2_BUILD 1
#endif

namespace jsvd {
namespace {

// ---------------------------------------------------------------------------
// Thread pool. The extension is not compiled with -fopenmp, and ATen's
// at::parallel_for is an inline template around `#pragma omp parallel`: in
// this translation unit it silently ran everything on the calling thread
// (measured: 2 threads no faster than 1). So the engine keeps its own
// persistent workers, as many as at::get_num_threads() asks for.
//
// run(n, f) calls f(0) .. f(n-1) concurrently, f(0) on the caller, and
// returns when all are done. Workers spin briefly for the next job (the
// per-matrix schedule hands out many short jobs) and then sleep.
// A call made while the pool is busy (another Python thread, or nested)
// runs serially on its caller.
class Pool {
 public:
  static Pool& get() {
    static Pool* p = new Pool();  // leaked on purpose: detached workers outlive static destructors
    return *p;
  }

  template <typename F>
  void run(int n, F&& f) {
    if (n <= 1) {
      if (n == 1) f(0);
      return;
    }
    std::unique_lock<std::mutex> busy(run_mu_, std::try_to_lock);
    if (!busy.owns_lock() || forked()) {
      for (int k = 0; k < n; ++k) f(k);
      return;
    }
    ensure_workers(n - 1);
    std::function<void(int)> job = [&f](int k) { f(k); };
    {
      std::lock_guard<std::mutex> g(mu_);
      job_ = &job;
      njob_ = n;
      pending_.store(n - 1, std::memory_order_relaxed);
      gen_.fetch_add(1, std::memory_order_release);
    }
    cv_.notify_all();
    f(0);
    for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
      if (spins < 20000)
        cpu_relax();
      else
        std::this_thread::yield();
    }
  }

  static void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }

 private:
  Pool() : pid_(getpid()) {}

  // Workers do not survive fork(); a forked child runs serially.
  bool forked() const { return getpid() != pid_; }

  void ensure_workers(int n) {
    while (static_cast<int>(nworkers_) < n) {
      const int id = static_cast<int>(++nworkers_);  // worker ids 1, 2, ...
      const uint64_t g0 = gen_.load(std::memory_order_acquire);  // jobs after this one are its
      std::thread([this, id, g0] { loop(id, g0); }).detach();
    }
  }

  void loop(int id, uint64_t seen) {
    for (;;) {
      int spins = 0;
      while (gen_.load(std::memory_order_acquire) == seen && spins < 50000) {
        cpu_relax();
        ++spins;
      }
      if (gen_.load(std::memory_order_acquire) == seen) {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return gen_.load(std::memory_order_acquire) != seen; });
      }
      std::function<void(int)>* job;
      int njob;
      {
        std::lock_guard<std::mutex> g(mu_);
        seen = gen_.load(std::memory_order_relaxed);
        job = job_;
        njob = njob_;
      }
      if (id < njob) {
        (*job)(id);
        pending_.fetch_sub(1, std::memory_order_acq_rel);
      }
    }
  }

  std::mutex run_mu_, mu_;
  std::condition_variable cv_;
  std::atomic<uint64_t> gen_{0};
  std::atomic<int> pending_{0};
  std::function<void(int)>* job_ = nullptr;
  int njob_ = 0;
  size_t nworkers_ = 0;
  const pid_t pid_;
};

namespace generic {
#include "jacobi_cpu_solver.h"
}  // namespace generic

#ifdef JSVD_HAVE_AVX2_BUILD
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif
#define JSVD_SOLVER_AVX2 1
namespace avx2 {
#include "jacobi_cpu_solver.h"
}  // namespace avx2
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

// A third copy with AVX-512 kernels for the long-column loops.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,avx512f,avx512dq,avx512vl"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,avx512f,avx512dq,avx512vl")
#endif
#define JSVD_SOLVER_AVX512 1
namespace avx512 {
#include "jacobi_cpu_solver.h"
}  // namespace avx512
#undef JSVD_SOLVER_AVX512
#undef JSVD_SOLVER_AVX2
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

bool cpu_has_avx512() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vl") && knobs().cpu_avx512;
  }();
  return has;
}

bool cpu_has_avx2() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && knobs().cpu_avx2;
  }();
  return has;
}
#endif

template <typename T>
int32_t svd_one(T* a, T* u, T* s, T* v, int64_t p, int64_t q, int64_t ucols, double tol, int64_t max_sweeps,
                bool parallel) {
#ifdef JSVD_HAVE_AVX2_BUILD
  if (cpu_has_avx512()) return avx512::svd_one<T>(a, u, s, v, p, q, ucols, tol, max_sweeps, parallel);
  if (cpu_has_avx2()) return avx2::svd_one<T>(a, u, s, v, p, q, ucols, tol, max_sweeps, parallel);
#endif
  return generic::svd_one<T>(a, u, s, v, p, q, ucols, tol, max_sweeps, parallel);
}

// Whether matrix k's extra U columns under full_matrices come from LAPACK's QR (csrc/complement_qr.h)
// rather than svd_one's completion, a reflector at a time in scalar loops, which took 3.8 s of a
// 3000x300 matrix's 3.9 (this machine, 2-thread AMD EPYC; docs/experiments.md, stop 41): from about 2^24
// multiply-adds, (ucols - q) q p.
bool by_qr(const PackedBatch& b, int64_t k, bool uv) {
  return uv && b.uc(k) > b.q(k) &&
         static_cast<double>(b.uc(k) - b.q(k)) * static_cast<double>(b.q(k)) * static_cast<double>(b.p(k)) >= 16777216.0;
}

// A batch smaller than the pool spreads a matrix's pairs over it (the column-block tiles,
// jacobi_cpu_schedule.h) from kTileMinCols columns; narrower ones run whole on a thread, where the tiles'
// waits cost more than they share. This machine (2-thread Intel Xeon, one matrix, the Jacobi on M, median,
// ms, tiles / one thread): float64 4000x16 3.17 / 1.32, 8000x16 4.75 / 3.16, 1000x40 4.07 / 1.87, 64² 0.62 /
// 0.54; float32 1000x100 7.46 / 6.18, 3000x64 7.35 / 6.95, 96² 0.88 / 0.88; but float32 128² 1.59 / 1.75,
// 260² 14.4 / 19.8, 500x200 11.6 / 15.5, 512² 68 / 114, float64 400x160 12.7 / 15.6 (200² 9.0 / 7.4 and 256²
// 12.6 / 10.2 the exceptions).
constexpr int64_t kTileMinCols = 128;

// serial: every matrix on the calling thread (jacobi_svd_cpu); else over the pool's threads, by matrices
// or, where the batch is smaller than the pool and a matrix has kTileMinCols columns, by its tiles. done:
// members solved already (a list's members that took the start, jacobi_svd_cpu), left as they are.
template <typename T>
void run_batch(const at::Tensor& A, const PackedBatch& batch, const SvdOptions& opt, bool serial,
               const std::vector<char>* done, CoreResult& r) {
  T* a = A.data_ptr<T>();
  T* u = opt.compute_uv ? r.U.data_ptr<T>() : nullptr;
  T* v = opt.compute_uv ? r.V.data_ptr<T>() : nullptr;
  T* s = r.S.data_ptr<T>();
  int32_t* info = r.info.data_ptr<int32_t>();
  const int64_t max_sweeps = resolve_max_sweeps(opt);
  const int64_t nb = batch.size();
  const auto todo = [&](int64_t k) { return !(done && (*done)[k]); };
  int64_t left = nb;
  bool wide = nb > 0 && batch.q(0) >= kTileMinCols;  // (a matrix the tiles would take; a uniform batch: no loop)
  if (done || !batch.uniform) {
    left = 0;
    wide = false;
    for (int64_t k = 0; k < nb; ++k) {
      if (!todo(k)) continue;
      ++left;
      wide |= batch.q(k) >= kTileMinCols;
    }
  }
  const bool tiles = !serial && left < at::get_num_threads() && wide;
  auto one = [&](int64_t k) {
    if (!todo(k)) return;
    const double tol = resolve_tol(opt, batch.p(k), A.scalar_type());
    info[k] = svd_one<T>(a + batch.a_at(k), u ? u + batch.u_at(k) : nullptr, s + batch.s_at(k),
                         v ? v + batch.v_at(k) : nullptr, batch.p(k), batch.q(k),
                         by_qr(batch, k, u != nullptr) ? batch.q(k) : batch.uc(k), tol, max_sweeps,
                         tiles && batch.q(k) >= kTileMinCols);
  };
  if (serial || tiles) {
    for (int64_t k = 0; k < nb; ++k) one(k);
  } else {
    // Matrices are handed out one at a time from a shared counter rather than
    // in fixed slices: their sweep counts differ, and a thread that is slowed
    // down (a busy machine) then holds up nothing but its current matrix.
    std::atomic<int64_t> next{0};
    Pool::get().run(static_cast<int>(std::min<int64_t>(nb, at::get_num_threads())), [&](int) {
      for (int64_t k; (k = next.fetch_add(1, std::memory_order_relaxed)) < nb;) one(k);
    });
  }
  for (int64_t k = 0; k < nb; ++k) {
    if (!by_qr(batch, k, u != nullptr) || !todo(k)) continue;
    const int64_t p = batch.p(k), uc = batch.uc(k);
    complete_columns_by_qr(r.U.narrow(0, batch.u_at(k), uc * p).view({1, uc, p}), batch.q(k));
  }
}

}  // namespace

namespace {

CoreResult jacobi_cpu(const at::Tensor& A, const PackedBatch& batch, const SvdOptions& opt, bool serial = false,
                      const std::vector<char>* done = nullptr) {
  CoreResult r;
  r.S = at::empty({batch.s_numel}, A.options());
  r.info = at::empty({batch.size()}, A.options().dtype(at::kInt));
  if (opt.compute_uv) {
    r.U = at::zeros({batch.u_numel}, A.options());
    r.V = at::empty({batch.v_numel}, A.options());
  }
  AT_DISPATCH_FLOATING_TYPES(A.scalar_type(), "jacobi_svd_cpu", [&] { run_batch<scalar_t>(A, batch, opt, serial, done, r); });
  return r;
}

// The process that loaded the extension. A forked child skips the start: LAPACK's eigh runs OpenMP regions,
// whose threads do not survive fork(), and a child's first one hung (tests/test_cpu_threads.py).
const pid_t g_load_pid = getpid();

// The start on a uniform batch (cpu_start_on). A few matrices of at most kCpuStartSerialMaxCols columns run
// the Jacobi on X on the calling thread (gram_start_cpu.h: LAPACK's OpenMP threads, still spinning after
// its eigh, slowed the pool's).
CoreResult start_cpu(const at::Tensor& A, const PackedBatch& batch, const SvdOptions& opt) {
  const bool serial = batch.size() <= kCpuStartFewBatch && batch.q(0) <= kCpuStartSerialMaxCols;
  const auto on = [](bool one_thread) {
    return [one_thread](const at::Tensor& M, const PackedBatch& b, const SvdOptions& o) {
      return jacobi_cpu(M, b, o, one_thread);
    };
  };
  return svd_gram_start_cpu(A, batch, opt, on(false), on(serial));
}

// A list: its members grouped by shape, each group the start takes as a uniform batch (cpu_start_on; the
// few matrices' rules only for a list of as few) is solved so, and the rest by one Jacobi call that leaves
// those be. Without it a list's large members ran the Jacobi on M: this machine, svd_varlen of 768x3072
// and 512² float32 1072 ms, against 110 for two torch_jsvd.svd calls; with the few matrices' rules for
// every group the demo's 2000 random shapes of 4..64 took 115.6 ms against 104.3 before.
CoreResult list_cpu(const at::Tensor& A, const PackedBatch& batch, const SvdOptions& opt) {
  const int64_t nb = batch.size();
  std::map<std::tuple<int64_t, int64_t, int64_t>, std::vector<int64_t>> groups;  // (p, q, ucols): members
  for (int64_t k = 0; k < nb; ++k) groups[{batch.p(k), batch.q(k), batch.uc(k)}].push_back(k);
  std::vector<char> started(static_cast<size_t>(nb), 0);
  std::vector<std::pair<PackedBatch, const std::vector<int64_t>*>> taken;
  for (const auto& [shape, members] : groups) {
    const auto [p, q, uc] = shape;
    PackedBatch g = PackedBatch::uniform_of(static_cast<int64_t>(members.size()), p, q, uc > q);
    if (!cpu_start_on(g, A.scalar_type(), opt, nb)) continue;
    for (int64_t k : members) started[k] = 1;
    taken.emplace_back(std::move(g), &members);
  }
  if (taken.empty()) return jacobi_cpu(A, batch, opt);
  CoreResult r = jacobi_cpu(A, batch, opt, false, &started);
  for (const auto& [g, members] : taken) {
    const int64_t p = g.p(0), q = g.q(0), uc = g.uc(0), n = g.size();
    at::Tensor Ag;  // the group's matrices, packed together
    if (n == 1) {
      Ag = A.narrow(0, batch.a_at(members->front()), p * q);
    } else {
      Ag = at::empty({n * p * q}, A.options());
      for (int64_t i = 0; i < n; ++i) Ag.narrow(0, i * p * q, p * q).copy_(A.narrow(0, batch.a_at((*members)[i]), p * q));
    }
    const CoreResult rg = start_cpu(Ag, g, for_shape(opt, p, q));
    for (int64_t i = 0; i < n; ++i) {
      const int64_t k = (*members)[i];
      r.S.narrow(0, batch.s_at(k), q).copy_(rg.S.narrow(0, i * q, q));
      r.info.narrow(0, k, 1).copy_(rg.info.narrow(0, i, 1));
      if (!opt.compute_uv) continue;
      r.U.narrow(0, batch.u_at(k), p * uc).copy_(rg.U.narrow(0, i * p * uc, p * uc));
      r.V.narrow(0, batch.v_at(k), q * q).copy_(rg.V.narrow(0, i * q * q, q * q));
    }
  }
  return r;
}

}  // namespace

CoreResult jacobi_svd_cpu(const at::Tensor& input, const PackedBatch& batch, const SvdOptions& opt) {
  const at::Tensor A = packed_input(input);  // the sweeps work in place
  TORCH_CHECK(A.device().is_cpu() && A.dim() == 1 && A.is_contiguous() && A.numel() == batch.a_numel,
              "jsvd internal: jacobi_svd_cpu expects the packed 1-D CPU buffer");
  if (getpid() == g_load_pid) {
    if (cpu_start_on(batch, A.scalar_type(), opt)) return start_cpu(A, batch, opt);
    if (!batch.uniform && opt.may_sync && knobs().eigh != 0) return list_cpu(A, batch, opt);
  }
  return jacobi_cpu(A, batch, opt);
}

}  // namespace jsvd
