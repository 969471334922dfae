// The Gram eigenvectors as the Jacobi's starting V (eigh_precondition.h).
#include "precondition/eigh_precondition.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <tuple>
#include <vector>

#include "common/batched_gemm.h"
#include "eigen/evd_small.h"
#include "precondition/gram_products.h"
#include "precondition/start_cholqr.h"
#include "precondition/start_checks.h"
#include "precondition/start_converged.h"
#include "precondition/start_refine.h"
#include "precondition/start_x_steps.h"
#include "precondition/syev_batched.h"
#include "tuning_knobs.h"

namespace jsvd {
namespace cuda {

bool start_f64_gram_on(int64_t batch, int64_t rows, int64_t cols, size_t elem) {
  if (knobs().eigh == 1) return true;
  const bool f64 = elem == sizeof(double);
  if (eigh_few_tall(batch, rows, cols)) return true;
  if (cols >= kEighMinCols) {
    if (!syev_batched_on(batch)) return batch <= kEighMaxBatch && (batch == 1 || cols >= kEighBatchMinCols);
    return syev_batched_square(rows, cols, elem) && batch >= syev_batched_min_batch(cols, elem);
  }
  if (cols > kEighJacobiMaxCols)  // (the Gram matrices beyond the engine's one-block Jacobi: syevBatched)
    return eigh_mid_cols(cols) && syev_batched_on(batch) &&
           (rows >= kEighMidRatio * cols || (f64 && cols < kEighMidMaxCols));
  const double work = static_cast<double>(batch) * rows * cols * cols;
  if (cols < kEighTallMinCols) return false;
  if (f64) return rows >= kEighTallRatioF64 * cols && work >= kEighTallMinWorkF64;
  return ((batch * kEighTallBatchPerCol >= cols || rows > kEighMidQrRows) && rows >= kEighTallRatio * cols &&
          work >= kEighTallMinWork) ||
         (batch >= kEighManyMinBatch && rows >= kEighManyRatio * cols && work >= kEighManyMinWork);
}

namespace {

// float32's large batches of 65 to 128 columns that JSVD_START_EVD32_TALL puts on the float32 solver
// (evd32_route_on's x_tested): tall ones from kEvd32TallMinBatch matrices, near-square ones of at least
// kEvd32SquareLongRatio rows a column (or kEvd32SquareMidRatio from kEvd32SquareMidCols columns;
// JSVD_START_EVD32_SQUARE_RATIO=R: R/100 alone) from JSVD_START_EVD32_SQUARE's (0: not), squarer ones from
// kEvd32SquareMinBatch. (JSVD_START_EVD32_TALL_MIN=N: tall ones from N, for A/Bs of that limit.)
bool evd32_tested_shape(int64_t batch, int64_t rows, int64_t cols) {
  if (knobs().start_evd32_tall <= 0 || !eigh_mid_cols(cols)) return false;
  if (rows >= kEighMidRatio * cols)
    return batch >= (knobs().start_evd32_tall_min > 0 ? knobs().start_evd32_tall_min : kEvd32TallMinBatch);
  const int64_t n = knobs().start_evd32_square, r = knobs().start_evd32_square_ratio;
  const bool long_enough = r > 0 ? 100 * rows >= r * cols
                                 : rows >= kEvd32SquareLongRatio * cols ||
                                       (cols >= kEvd32SquareMidCols && rows >= kEvd32SquareMidRatio * cols);
  return n > 0 && batch >= (long_enough ? n : std::max(n, kEvd32SquareMinBatch));
}

}  // namespace

bool evd32_route_on(int64_t batch, int64_t rows, int64_t cols, size_t elem, bool x_tested) {
  if (knobs().start_evd32 == 0 || cols <= kEighJacobiMaxCols || !syev_batched_on(batch)) return false;
  if (knobs().start_evd32 == 1) return true;
  const bool f64 = elem == sizeof(double);
  const int64_t min_batch = f64 ? kEvd32MinBatchF64 : kEvd32MinBatchF32;
  if (!f64 && x_tested && evd32_tested_shape(batch, rows, cols)) return true;
  return cols >= (f64 ? kEvd32MinColsF64 : kEvd32MinColsF32) && cols <= kEvd32MaxCols && rows < 2 * cols &&
         batch >= min_batch;
}

bool eigh_precondition_on(int64_t batch, int64_t rows, int64_t cols, size_t elem, bool uniform) {
  if (!uniform || knobs().eigh == 0) return false;
  // (x_tested: the call's options decide it, svd_eigh_preconditioned's first test)
  return start_f64_gram_on(batch, rows, cols, elem) || evd32_route_on(batch, rows, cols, elem, /*x_tested=*/true);
}

bool gram_eig_by_jacobi(int64_t cols) {
  return cols <= std::min<int64_t>(kGramJacobiKnobMaxCols, knobs().gram_eig_jacobi_cols);
}

bool eigh_few_tall(int64_t batch, int64_t rows, int64_t cols) {
  return batch <= kEighMaxBatch && cols >= kEighTallMinCols && cols < kEighMinCols &&
         rows >= kEighTallRatioF64 * cols && static_cast<double>(batch) * rows * cols * cols >= kEighFewMinWork;
}

bool start_x_by_qr(int64_t batch, int64_t rows, int64_t cols) {
  if (knobs().start_x_qr >= 0) return knobs().start_x_qr == 1;
  // (fewer matrices than columns: tall ones only, where the QR shortens the Jacobi's columns; a square X's R
  // costs the Jacobi what X would, the QR on top: docs/experiments.md, stop 62)
  return (rows > kEighMidQrRows && (eigh_mid_cols(cols) || (batch < cols && rows >= kEighMidRatio * cols))) ||
         eigh_few_tall(batch, rows, cols);
}

namespace {

// A batch of small Gram matrices' eigenvectors by this engine's one-sided Jacobi on them, in one call (the
// warp or shared-memory level), where torch.linalg.eigh would loop over them. Its V is orthogonal to
// working precision whether or not it converged, which is all X = M V0 needs (the Jacobi on X does the rest).
at::Tensor gram_eigenvectors(const at::Tensor& G, bool f64, const StartEngines& e) {
  const int64_t B = G.size(0), q = G.size(1);
  SvdOptions go;
  go.may_sync = false;
  if (!f64) go.tol = kGramTolF32;
  const CoreResult g = e.alone(G.view({-1}), PackedBatch::uniform_of(B, q, q, false), go);
  return g.V.view({B, q, q}).mT();  // (packed V holds V^T)
}

// The Jacobi on X = M V0 (X float32 or Xd float64, (B, q, rows): row j is X's column j), and V = V0 V_x.
// Long matrices: CholeskyQR2 on X (x_by_cholqr, start_cholqr.h). Where it is not taken or declines, the
// QR path on X for long ones of 65 to kEighMidMaxCols columns, long batches of fewer matrices than
// columns and a few tall ones (start_x_by_qr), else the planned Jacobi on X.
CoreResult jacobi_on_x(const at::Tensor& A, const PackedBatch& b, const SvdOptions& opt, const StartEngines& e,
                       const at::Tensor& V0, at::Tensor X, at::Tensor Xd) {
  const int64_t B = b.size(), p = b.rows[0], q = b.cols[0];
  std::optional<CoreResult> by_cholqr;
  if (x_by_cholqr(p, q, opt)) {
    if (!Xd.defined()) Xd = X.to(at::kDouble);  // (the start's own X, float32: as the Jacobi on X would read it)
    by_cholqr = jacobi_on_x_by_cholqr(Xd, A.scalar_type(), opt, e.alone);
  }
  CoreResult r;
  if (by_cholqr) {
    r = std::move(*by_cholqr);
  } else {
    if (!X.defined()) X = Xd.to(A.scalar_type());  // (X rounded once, only where the Jacobi reads it)
    r = (start_x_by_qr(B, p, q) ? e.without_start : e.jacobi)(X.view({-1}), b, opt);
  }
  // V = V0 V_x; packed, V^T = V_x^T V0^T. In float64: a float32 product's errors of about q eps
  // would cost V as much orthogonality again.
  if (opt.compute_uv) {
    const at::Tensor Vt = at::empty({B, q, q}, V0.options());
    bmm_into<double>(Vt, r.V.view({B, q, q}).to(at::kDouble), V0.mT(), 1.0, 0.0);
    r.V = Vt.to(A.scalar_type()).view({-1});
  }
  return r;
}

// t's int32 values on the host: through pinned memory, on the current stream, one wait.
std::vector<int32_t> read_ints(const at::Tensor& t) {
  const at::Tensor host = at::empty({t.numel()}, t.options().device(at::kCPU).pinned_memory(true));
  host.copy_(t.reshape({-1}), /*non_blocking=*/true);
  at::cuda::CUDAEvent read;
  read.record(at::cuda::getCurrentCUDAStream());
  read.synchronize();
  const int32_t* v = host.const_data_ptr<int32_t>();
  return std::vector<int32_t>(v, v + t.numel());
}

// The batched start where its test may end the call. float32: C = V0^T G V0 (start_converged.h) and U =
// M V0 D^-1 by one product; H100, JSVD_START_CONVERGED=1 / 0, two rounds, ms: 1000x1024x16 0.35-0.36 /
// 0.53-0.54, 4000x256x16 0.45-0.47 / 0.66-0.71, 2000x512x24 1.14-1.21 / 1.57-1.62, 1000x128x32 0.57-0.62 /
// 0.63-0.64, 100x512x64 0.84-0.88 / 0.90-0.95 (docs/experiments.md, stop 49). float64: the Jacobi's own
// test on the formed X (converged_start_f64, core.h); H100, stop 52, JSVD_START_CONVERGED_F64=1 / 0:
// 1000x1024x16 0.615-0.620 / 0.801-0.820, 100x512x64 0.818-0.888 / 0.991-1.164, 30x20000x24 0.80-0.92 /
// 4.01-4.14, 1000x128x32 0.61-0.67 / 0.61-0.81. The checks' and the test's flags are read once, at the
// end, with the outputs already queued (one product wasted where the test fails), so that the host
// returns as soon as the read does. (Replaying these launches as a CUDA graph from a shape's second call,
// input copied in and outputs cloned out, was no faster: docs/experiments.md, stop 73.)
CoreResult batched_start_tested(const at::Tensor& A, const at::Tensor& W, const PackedBatch& b,
                                const SvdOptions& opt, const StartEngines& e, double tol) {
  const int64_t B = b.size(), p = b.rows[0], q = b.cols[0];
  const bool f64 = A.scalar_type() == at::kDouble, uv = opt.compute_uv;
  const at::ScalarType dtype = A.scalar_type();
  const at::Tensor flags = at::zeros({2}, A.options().dtype(at::kInt));  // the checks', the test's
  const at::Tensor G = at::empty({B, q, q}, A.options().dtype(at::kDouble));
  // (float32 matrices of at most 16 columns: G and X by the start's own kernels, straight from M,
  // gram_products.h; otherwise cuBLAS's DGEMMs on M in float64)
  const bool own = !f64 && knobs().gram_products && gram_products_take(W);
  at::Tensor Wd;
  if (own) {
    gram_f64(W, G);
  } else {
    Wd = blas_operand(f64 ? W : W.to(at::kDouble));
    gram_into(G, Wd);
  }
  start_checks(G, start_limits(f64, q), flags.select(0, 0));
  const at::Tensor V0 = gram_eigenvectors(G, f64, e);
  CoreResult r;  // (the outputs where the test passes)
  at::Tensor X, Xd;
  if (!f64) {
    const StartConverged sc = start_converged(G, V0, p, tol, dtype);
    flags.select(0, 1).copy_(sc.fails);
    r.S = sc.S.view({-1});
    if (uv && own) {
      r.U = start_product(W, sc.Vs).view({-1});
    } else if (uv) {
      r.U = times_v(Wd, sc.Vs).to(dtype).view({-1});
    }
    if (uv) r.V = sc.Vt.view({-1});
  } else {
    Xd = times_v(Wd, V0);
    const at::Tensor C = at::empty({B, q, q}, G.options());
    gram_into(C, Xd);
    flags.select(0, 1).copy_(converged_fails(C, p, tol, StartTest::kX64));
    r = converged_outputs(C, Xd, V0, uv, dtype);  // (U = X D^-1)
  }
  const std::vector<int32_t> read = read_ints(flags);
  // (M not finite or out of range)
  if (read[0] != 0) return e.without_start(A, b, opt);
  if (read[1] == 0) {
    r.info = at::ones({B}, A.options().dtype(at::kInt));  // (what the Jacobi's one sweep on X would report)
    // (read on the host: M finite and in range, every C_jj above col_min, so S, U and V are finite)
    r.info_read = knobs().info_read;
    r.polish = false;  // (U normalised from float64, V0 orthogonal to float64's rounding)
    return r;
  }
  if (own) {
    X = start_product(W, V0);
  } else if (!f64) {
    Xd = times_v(Wd, V0);
  }
  r = jacobi_on_x(A, b, opt, e, V0, X, Xd);
  r.polish = false;  // (the batched Jacobi's V0: U and V as orthogonal as gesvda's, svd_eigh_preconditioned)
  return r;
}

// The one read's declines (svd_eigh_preconditioned), in the two reads' order: the checks' flag (M not finite or
// out of range), then the pivots' (to the float64 solver's route where its rule takes the batch, from G again).
std::optional<CoreResult> one_read_declined(int32_t bad, int32_t spread, const at::Tensor& A, const PackedBatch& b,
                                            const SvdOptions& opt, const StartEngines& e) {
  if (bad != 0) return e.without_start(A, b, opt);
  if (spread == 0) return std::nullopt;
  return start_f64_gram_on(b.size(), b.rows[0], b.cols[0], A.element_size())
             ? svd_eigh_preconditioned(A, b, opt, e, /*evd32_ok=*/false)
             : e.without_start(A, b, opt);
}

}  // namespace

bool syev_batched_on(int64_t batch) { return kHaveSyevBatched && batch > kEighMaxBatch; }

bool syev_batched_square(int64_t rows, int64_t cols, size_t elem) {
  return cols >= kEighMinCols && rows < 2 * cols &&
         cols <= (elem == sizeof(double) ? kSyevBatchedMaxCols : kSyevBatchedMaxColsF32);
}

int64_t syev_batched_min_batch(int64_t cols, size_t elem) {
  const bool large = cols >= kSyevBatchedLargeCols;
  return elem == sizeof(double) ? (large ? kSyevBatchedMinBatchLargeF64 : kSyevBatchedMinBatchF64)
                                : (large ? kSyevBatchedMinBatchLargeF32 : kSyevBatchedMinBatchF32);
}

CoreResult svd_eigh_preconditioned(const at::Tensor& A, const PackedBatch& b, const SvdOptions& opt,
                                   const StartEngines& e, bool evd32_ok) {
  const int64_t B = b.size(), p = b.rows[0], q = b.cols[0];
  TORCH_CHECK(b.uniform && A.numel() == B * p * q, "jsvd internal: eigh preconditioning needs a uniform batch");
  const at::NoTF32Guard no_tf32;  // (full-precision GEMMs whatever allow_tf32 says)
  const at::Tensor W = A.dim() == 3 ? A : A.view({B, q, p});  // row j of W: column j of the matrix M
  const bool f64 = A.scalar_type() == at::kDouble;
  // svd (reduced U) and svdvals: where M V0 is already converged in every matrix (start_converged.h), U,
  // S and V without the Jacobi on X (float32 from G and V0 or from X; float64 from X, by the Jacobi's test).
  const bool converged_outputs_ok = opt.may_sync && (!opt.compute_uv || (opt.want_v && !opt.full_matrices)) &&
                                    knobs().start_converged;
  const bool x_tested32 = !f64 && converged_outputs_ok;
  // (float32's near-square batches take the start only where X is tested: full_matrices leaves them here,
  // before any of its work)
  if (!start_f64_gram_on(B, p, q, A.element_size()) &&
      !(evd32_ok && evd32_route_on(B, p, q, A.element_size(), x_tested32)))
    return e.without_start(A, b, opt);
  // The Gram matrix, its eigenvectors and X = M V0 in float64 (products of float32 entries are exact
  // there, and their squares neither overflow nor underflow), X rounded once: its columns start
  // orthogonal to about float32's rounding. W is the caller's tensor where it came unpacked (the
  // planner's read_in_place): float32's float64 copy keeps its strides, and cuBLAS reads either
  // orientation. The start runs where start_checks passes every matrix (*bad is read once): M finite,
  // ||M||_F within range for M V0 (float64: 2^500, so that G neither overflows nor, from 2^-440, loses
  // digits to underflow), float64 columns within the ratio.
  const bool batched = gram_eig_by_jacobi(q);
  const bool converged_route = !f64 && converged_outputs_ok;
  const bool test_x_f64 = f64 && converged_outputs_ok && knobs().start_converged_f64;  // (float64: X itself)
  const double tol = resolve_tol(opt, p, A.scalar_type());
  if (batched && (converged_route || test_x_f64)) return batched_start_tested(A, W, b, opt, e, tol);
  // (the checks', the float32 solver's pivots', its late checks' and X's test: the one-read route's flags)
  const at::Tensor flags = at::empty({4}, A.options().dtype(at::kInt)), bad = flags.select(0, 0);
  C10_CUDA_CHECK(cudaMemsetAsync(flags.data_ptr(), 0, 4 * sizeof(int32_t), at::cuda::getCurrentCUDAStream()));
  const at::Tensor G = at::empty({B, q, q}, A.options().dtype(at::kDouble));
  // float32 matrices of at most 16 columns: G and X by the start's own kernels, straight from M
  // (gram_products.h); otherwise cuBLAS's DGEMMs on M in float64.
  at::Tensor Wd;
  const bool own = batched && knobs().gram_products && gram_products_take(W);
  if (own) {
    gram_f64(W, G);
  } else {
    Wd = blas_operand(f64 ? W : W.to(at::kDouble));
    gram_into(G, Wd);
  }
  start_checks(G, start_limits(f64, q), bad);
  // float64 on syevBatched's route: the Cholesky pivots' test (kEighMinEigRatioF64), read with the checks
  // before syevBatched, so that an ill-conditioned batch does not pay for it (not on the float32 solver's
  // route, whose own test on the pivots comes below).
  const bool evd32_candidate = evd32_ok && !batched && evd32_route_on(B, p, q, A.element_size(), x_tested32);
  // (float32's batches of 65 to 128 columns on the float32 solver: X tested, below; only where the outputs
  // may come from X. Tall ones and near-square ones: JSVD_START_EVD32_SQUARE's)
  const bool evd32_tested = evd32_candidate && x_tested32 && evd32_tested_shape(B, p, q);
  const bool evd32_square = evd32_tested && p < kEighMidRatio * q;
  if (f64 && !batched && syev_batched_on(B) && knobs().eigh_cond == 1 && !evd32_candidate) {
    at::Tensor info;
    const at::Tensor L = potrf_batched(G, &info);
    cholesky_checks(G, L, info, kEighMinEigRatioF64, bad);
  }
  // (syevd synchronises anyway: read first; the batched Jacobi never does, so it is read last, where svd
  // reads its info next anyway, and a declined batch is then solved again without the start; the float32
  // solver's pivots' test reads them with its own flag, one wait for both)
  const bool pivots_test = evd32_candidate && knobs().start_evd32 != 1;
  // The tested route's one read: the checks', the pivots', the late checks' and X's test, all at X's test, so
  // that the host queues the solver and its refinements while the device runs them (37x300x77 spent 0.63 ms
  // of GPU work in a 1.1 ms call with three reads; H200, stop 89). The own solver's kernels read the pivots'
  // flag and skip a declined batch (evd_small_async's skip), which pays for the refinement's GEMMs queued
  // before the host sees the flags and goes to the float64 solver's route from the start (evd32_ok); G not
  // finite reaches the solver as zeros (trace_scaled_float). JSVD_START_EVD32_ONE_READ=0: the pivots read
  // before the solver. H200, stop 90: Gaussian batches up to 0.2 ms faster, declined ones ~0.1 ms slower.
  const bool one_read = pivots_test && evd32_tested && evd_small_on(B, q) && knobs().start_evd32_one_read &&
                        knobs().start_late_check;
  // The checks' and the pivots' flags on the host, through pinned memory and an event recorded after the
  // checks (the one read: after the pivots): the batched route's read at its end waits for the checks alone,
  // not for the Jacobi queued after them, so the host's work after it overlaps that; the one read polls them
  // without a wait while the host queues the refinement, so that a declined batch whose flags are in by
  // then queues no more of the route's work.
  const at::Tensor flags_host = at::empty({2}, flags.options().device(at::kCPU).pinned_memory(true));
  at::cuda::CUDAEvent flags_in;
  const auto copy_flags = [&] {
    flags_host.copy_(flags.slice(0, 0, 2), /*non_blocking=*/true);
    flags_in.record(at::cuda::getCurrentCUDAStream());
  };
  if (!one_read) copy_flags();
  const auto ok = [&] {
    TORCH_INTERNAL_ASSERT(!one_read, "jsvd internal: the one read reads the checks with X's test");
    flags_in.synchronize();
    return flags_host.const_data_ptr<int32_t>()[0] == 0;
  };
  const auto declined_early = [&]() -> std::optional<CoreResult> {
    if (!one_read || !flags_in.query()) return std::nullopt;
    const int32_t* h = flags_host.const_data_ptr<int32_t>();
    return one_read_declined(h[0], h[1], A, b, opt, e);
  };
  at::Tensor late_bad;  // (the float32 solver's route: its checks, on the device, read at the end)
  // Whether the checks read last decline the batch (the batched route's, the float32 solver's late ones).
  const auto declined_late = [&] { return (batched && !ok()) || (late_bad.defined() && late_bad.item<bool>()); };
  if (!batched && !pivots_test && !ok()) return e.without_start(A, b, opt);
  // float32 on the eigen-solvers' routes: float64's test on X^T X at float32's tol (converged_fails' kX32;
  // JSVD_START_CONVERGED_X32=0: G's bound, kG32). H100, stop 57, two rounds, ms, on / off: 1x1536²
  // 19.8-19.9 / 23.4-24.0, 12x768² 50.6-50.9 / 56.8-71.0; 1x4096², 100x512², 10x1024², 200x256², 1x3072x768
  // and cond=1e6 squares equal within 2% (their X fails both tests, or passes both)
  const StartTest x_test = f64 ? StartTest::kX64 : knobs().start_converged_x32 ? StartTest::kX32 : StartTest::kG32;
  at::Tensor V0;  // columns: the eigenvectors, by decreasing eigenvalue
  bool may_pass = false;  // (whether X is tested; the eigen-solvers' routes: where the eigenvalues leave it a chance)
  bool by_syevd = false;  // V0 from syevd (a few large matrices)
  int steps = 0;  // (start_x_steps' on X where it fails its test)
  if (batched) {
    V0 = gram_eigenvectors(G, f64, e);  // (untested: full_matrices, or JSVD_START_CONVERGED*=0)
  } else {
    // float64 syevd costs about what float32's does up to 2048² (H100: 19.4 against 18.7 ms at 1536²,
    // 127 against 97 at 4096²), and the float32 route's V0, an approximation, left the Jacobi more
    // sweeps: same build (a9e2a25, JSVD_EIGH_F64), 1x4096² 276 -> 202 ms with the residual 1.1e-6 ->
    // 6.1e-8, 1x1024² 18.3 -> 14.2, 1x3072x768 14.9 -> 12.6, 1x1536² 31.1 -> 29.2.
    // A batch in one call of cuSOLVER's syevBatched, where torch.linalg.eigh would loop over syevd.
    // (||M||_F^2, for the converged test's bound: before syevBatched overwrites G)
    // (float64: tall matrices only, near-square ones' X hardly passes: 200x256², 1x2048² paid 1%)
    // Gram matrices solved in float32 (evd32_route_on), where their Cholesky pivots leave few eigenvectors
    // below what float32 resolves (kEvd32PivotRatio; JSVD_START_EVD32=1: untested). X is then not
    // converged (about eps32 lambda_max / gap, or its square after refine_eigenvectors), and not tested,
    // but for float32's batches of 65 to 128 columns (evd32_tested), whose X is mostly converged after a
    // second refinement: tested as the float64 solver's X is, without its eigenvalues' pre-test.
    bool evd32 = evd32_candidate;
    if (pivots_test) {
      at::Tensor info;
      const at::Tensor L = potrf_batched(G, &info, kEvd32Shift);
      const at::Tensor spread = flags.select(0, 1);
      const double ratio = evd32_tested && !evd32_square ? kEvd32TallPivotRatio : kEvd32PivotRatio;
      cholesky_checks(G, L, info, ratio, spread, q / kEvd32ColsPerSmallPivot);
      if (one_read) {
        copy_flags();
      } else {
        evd32 = read_ints(spread)[0] == 0;
        if (!ok()) return e.without_start(A, b, opt);  // (G not finite or out of range: its pivots mean nothing)
        // (declined: float32 batches the float64 solver's rule takes go to it; float64 ones, whose rule would
        // decline them by their pivots or eigenvalues anyway, and the rest to the QR path)
        if (!evd32 && (f64 || !start_f64_gram_on(B, p, q, A.element_size()))) return e.without_start(A, b, opt);
      }
    }
    const bool test_x = !evd32 && (converged_route || (test_x_f64 && p >= kEighMidRatio * q));
    may_pass = evd32 && evd32_tested;
    // (float64's squares, untested above: the steps' own test, after them)
    steps = !evd32 && (test_x || test_x_f64) && q <= kXStepsMaxCols ? knobs().start_x_steps : 0;
    const at::Tensor fro = test_x || steps > 0 ? G.diagonal(0, -2, -1).sum(-1) : at::Tensor();
    at::Tensor w;  // the eigenvalues, increasing
    if (evd32) {
      // (each G over its trace ||M||_F^2 first: float32's G would overflow from ||M||_F ~ 2^64; a zero
      // matrix keeps its zero G; start_refine.h's kernels for this route's element-wise steps)
      at::Tensor failed;
      const at::Tensor G32 = trace_scaled_float(G);
      // (the one read: the own solver skips its work where the pivots declined the batch; cuSOLVER's cannot)
      V0 = evd_small_on(B, q) ? evd_small_async(G32, &failed, &w, one_read ? flags.select(0, 1) : at::Tensor())
                              : syev_batched_async(G32, &failed, &w);
      V0 = newton_schulz_step(V0.to(at::kDouble));
      if (f64) V0 = newton_schulz_step(V0);  // (~1e-9 -> float64's rounding)
      // (float32's tall batches: JSVD_START_EVD32_TALL refinements of two Newton-Schulz steps each. Three
      // and then one (stops 65-66) left a member of equal or clustered singular values 2e-5 from
      // orthogonal, whose batch then went back to the QR path after the start: the second refinement's capped
      // E, ||E||_F <= kRefineMaxNorm within the cluster, needs more than one step. Two and two: 2e-10, as
      // many GEMMs, and Gaussian members' X as converged: a CPU emulation, docs/experiments.md, stop 66.)
      if (evd32_tested) {
        for (int k = 0; k < knobs().start_evd32_tall; ++k) {
          if (std::optional<CoreResult> r = declined_early()) return std::move(*r);
          V0 = refine_eigenvectors(G, V0, 2);
        }
        if (std::optional<CoreResult> r = declined_early()) return std::move(*r);
      } else if (knobs().start_refine) {
        V0 = refine_eigenvectors(G, V0, f64 ? 4 : 3);
      }
      // V = V0 V_x is only as orthogonal as V0. cuSOLVER documents its eigenvectors as orthogonal (2e-5 to
      // 7e-5 in float32 on every batch measured, ~4e-9 after the step); one batch where they, or the
      // refinement, left more (or where syevBatched did not converge) goes to the QR path rather than
      // return a V short of orthogonal. Both read after the Jacobi on X is queued (late_bad), so that the
      // host queues the steps above while syevBatched runs; where this route falls back the Jacobi on X
      // was wasted, which no batch measured did.
      const at::Tensor F = at::empty({B, q, q}, V0.options());
      bmm_into<double>(F, V0.mT(), V0, 1.0, 0.0);
      late_bad = failed;
      flag_orth_defect(F, f64 ? kEvd32MaxOrthF64 : kEvd32MaxOrthF32, late_bad);
      if (!knobs().start_late_check) {  // (read now, and not again at the end)
        if (late_bad.item<bool>()) return e.without_start(A, b, opt);
        late_bad = at::Tensor();
      }
    } else if (syev_batched_on(B)) {
      bool failed = false;
      V0 = syev_batched(G, &failed, &w);
      if (failed) return e.without_start(A, b, opt);
      // float64: a matrix whose eigenvalues span more than kEighMinEigRatioF64 sends the batch to the QR path
      // (eigh_precondition.h: V0 then leaves the Jacobi on X nearly as many sweeps as on M).
      if (f64 && knobs().eigh_cond &&
          w.select(-1, 0).lt(w.select(-1, -1) * kEighMinEigRatioF64).any().item<bool>())
        return e.without_start(A, b, opt);
    } else {
      by_syevd = true;
      try {
        std::tie(w, V0) = at::linalg_eigh(G);
        V0 = V0.flip(-1);
      } catch (const c10::Error&) {
        return e.without_start(A, b, opt);  // (syevd did not converge)
      }
    }
    // C_jj is an eigenvalue to within the solver's backward error, far below eg: a matrix whose least
    // eigenvalue is below half of column_ok's bound cannot pass `kind`'s test (one read).
    const auto columns_may_pass = [&](StartTest kind) {
      const ConvergedStart unit = converged_start(kind, 1.0, p, q, tol);
      return w.select(-1, 0).ge(fro * (0.5 * unit.col_min)).all().item<bool>();
    };
    if (test_x) may_pass = columns_may_pass(x_test);
    // (the steps cannot lift a column: float32 only where X is tested at all, float64 by its steps' test,
    // whose col_min is below kX64's: no second read where X's columns may pass already)
    if (steps > 0 && f64) {
      if (!may_pass && !columns_may_pass(StartTest::kX64Steps)) steps = 0;
    } else if (!may_pass) {
      steps = 0;
    }
  }
  TORCH_INTERNAL_ASSERT(!one_read || (may_pass && !own), "jsvd internal: the one read needs X's test");
  at::Tensor X, Xd;  // packed, M V0 is V0^T W
  if (own) {
    X = start_product(W, V0);
  } else {
    Xd = times_v(Wd, V0);
    at::Tensor C;
    if (may_pass) {
      // The eigen-solvers' routes and float64's batched one: the test on C = X^T X (converged_fails), and
      // U = X D^-1 from X itself.
      C = at::empty({B, q, q}, G.options());
      gram_into(C, Xd);
      const at::Tensor fails = converged_fails(C, p, tol, x_test);
      bool passes;
      if (one_read) {
        flags.select(0, 2).copy_(late_bad);
        flags.select(0, 3).copy_(fails);
        const std::vector<int32_t> read = read_ints(flags);
        // (the late checks after the pivots: a skipped solver fails them)
        if (std::optional<CoreResult> r = one_read_declined(read[0], read[1], A, b, opt, e)) return std::move(*r);
        if (read[2] != 0) return e.without_start(A, b, opt);
        late_bad = at::Tensor();  // (read)
        passes = read[3] == 0;
      } else {
        passes = read_ints(fails)[0] == 0;
      }
      if (passes) {
        if (declined_late()) return e.without_start(A, b, opt);
        CoreResult r = converged_outputs(C, Xd, V0, opt.compute_uv, A.scalar_type());
        r.polish = false;
        r.info_read = knobs().info_read;  // (as batched_start_tested's)
        return r;
      }
    }
    // X not converged: first-order steps on X itself (start_x_steps.h), each tested, where V0 came from a
    // float64 solver; the Jacobi on X from the last step's X and V0 where they do not pass.
    if (steps > 0) {
      const StartTest kind = f64 ? StartTest::kX64Steps : x_test;
      if (std::optional<CoreResult> r =
              start_x_steps(Xd, V0, C, p, tol, kind, opt.compute_uv, A.scalar_type(), steps)) {
        if (declined_late()) return e.without_start(A, b, opt);
        r->info_read = knobs().info_read;
        return std::move(*r);
      }
    }
  }
  CoreResult r = jacobi_on_x(A, b, opt, e, V0, X, Xd);
  if (declined_late()) return e.without_start(A, b, opt);
  // The Jacobi on X took a few sweeps. After the batched solvers U and V measured at least as orthogonal
  // as gesvda's (H100, stop 56: 200x256² float32 ||U^T U - I||_F 2.4e-6 against 9.5e-6, 100x512² 1.8e-6
  // against 5.2e-5); after syevd, on the far wider X of one matrix, not (1x1536² 3.1e-6 against 1.4e-6);
  // after the float32 solver's near-square batches, not (200x128² 9.5e-7 against 4.3e-7; polished: 4.2e-7,
  // H200, stop 68).
  r.polish = r.polish && (by_syevd || evd32_square);
  return r;
}

}  // namespace cuda
}  // namespace jsvd
