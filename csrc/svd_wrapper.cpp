#include "svd_wrapper.h"

#include "op_common.h"

#include <ATen/ops/from_blob.h>
#include <c10/util/Exception.h>
#include <c10/util/accumulate.h>
#include <c10/util/strides.h>

#include <algorithm>
#include <cmath>
#include <string>

namespace jsvd {

using at::Tensor;

namespace {
// (built only on failure: a list checks thousands of members)
std::string arg_name(const char* base, int64_t index) {
  return index < 0 ? std::string(base) : std::string(base) + "[" + std::to_string(index) + "]";
}
}  // namespace

void check_float_dtype(at::ScalarType dt, const char* op, const char* base, int64_t index) {
  TORCH_CHECK(!at::isComplexType(dt), op, ": complex inputs are not yet supported (", arg_name(base, index),
              " has dtype ", dt, ")");
  TORCH_CHECK(dt == at::kFloat || dt == at::kDouble || dt == at::kHalf || dt == at::kBFloat16, op,
              ": expected ", arg_name(base, index),
              " to be a floating point tensor (float32, float64, float16 or bfloat16), but got ", dt);
}

void check_matrix(const Tensor& A, const char* op, const char* base, int64_t index, int64_t exact_dim) {
  if (exact_dim > 0) {
    TORCH_CHECK(A.dim() == exact_dim, op, ": expected ", arg_name(base, index),
                " to be a 2-D matrix (m, n), but got a ", A.dim(), "-D tensor");
  } else {
    TORCH_CHECK(A.dim() >= 2, op, ": expected ", arg_name(base, index),
                " to have at least 2 dimensions (..., m, n), but got a ", A.dim(), "-D tensor");
  }
  check_float_dtype(A.scalar_type(), op, base, index);
}

at::ScalarType compute_dtype(at::ScalarType dt) {
  return dt == at::kDouble ? at::kDouble : at::kFloat;
}

SvdOptions make_options(bool full_matrices, bool compute_uv, std::optional<double> tol,
                        std::optional<int64_t> max_sweeps, bool may_sync, const char* op) {
  SvdOptions o;
  o.may_sync = may_sync;
  o.full_matrices = full_matrices;
  o.compute_uv = compute_uv;
  if (tol.has_value()) {
    TORCH_CHECK(std::isfinite(*tol) && *tol > 0, op, ": tol must be a positive finite number, but got ", *tol);
    o.tol = *tol;
  }
  if (max_sweeps.has_value()) {
    TORCH_CHECK(*max_sweeps >= 1, op, ": max_sweeps must be >= 1, but got ", *max_sweeps);
    o.max_sweeps = *max_sweeps;
  }
  return o;
}

namespace {
std::vector<int64_t> with_tail(c10::IntArrayRef batch, std::initializer_list<int64_t> tail) {
  std::vector<int64_t> s(batch.begin(), batch.end());
  s.insert(s.end(), tail);
  return s;
}
}  // namespace

std::pair<Tensor, Tensor> empty_factors(c10::IntArrayRef batch, int64_t m, int64_t n, bool full_matrices,
                                        const at::TensorOptions& opts) {
  const int64_t k = std::min(m, n);
  Tensor U = at::empty(with_tail(batch, {full_matrices ? m : k, m}), opts).mT();  // F-contiguous, as below
  Tensor Vh = at::empty(with_tail(batch, {full_matrices ? n : k, n}), opts);
  if (full_matrices && U.numel() > 0) U.copy_(at::eye(m, opts));
  if (full_matrices && Vh.numel() > 0) Vh.copy_(at::eye(n, opts));
  return {U, Vh};
}

namespace {
InfoMinFn cuda_info_min = nullptr;  // (set at load by the CUDA kernels' registration)
}  // namespace

void register_info_min(c10::DeviceType type, InfoMinFn fn) {
  TORCH_CHECK(type == c10::DeviceType::CUDA, "jsvd internal: register_info_min takes CUDA only");
  cuda_info_min = fn;
}

void check_info(const Tensor& info, const char* op, const SvdOptions& opt) {
  if (info.numel() == 0) return;
  int32_t worst = 0;
  if (info.is_cuda() && cuda_info_min != nullptr) {
    worst = cuda_info_min(info);
  } else {
    // (a CPU info: a loop, no reduction op, whose dispatch is host time that small calls are made of)
    const Tensor host = info.to(at::kCPU).contiguous();
    const int32_t* v = host.const_data_ptr<int32_t>();
    worst = *std::min_element(v, v + host.numel());
  }
  TORCH_CHECK_LINALG(worst != kInfoNonFinite, op,
                     ": the input contains NaN or Inf, so its SVD is not defined (info = ",
                     kInfoNonFinite, "). Use torch_jsvd.svd_ex to get per-matrix info without raising.");
  TORCH_CHECK_LINALG(worst != kInfoNotConverged, op,
                     ": the Jacobi iteration did not converge within max_sweeps = ", resolve_max_sweeps(opt),
                     " sweeps for at least one matrix (info = ", kInfoNotConverged,
                     "). Increase max_sweeps or tol, or use torch_jsvd.svd_ex, which returns the last iterate "
                     "and per-matrix info without raising.");
  TORCH_CHECK_LINALG(worst != kInfoNonFiniteResult, op,
                     ": the result is not finite although the input is (info = ", kInfoNonFiniteResult,
                     "): the singular values exceed the range of the dtype (entries near its overflow limit); "
                     "scale the input down, or compute in float64.");
  TORCH_CHECK(worst >= 0, op, ": engine returned an unknown info code ", worst);
}

namespace {

// t (batch..., r, c) as a (B, r, c) view, or undefined where the batch
// dimensions do not merge into one stride.
Tensor batch_as_3d(const Tensor& t, int64_t B) {
  int64_t bs = 0, next = -1;  // the merged stride; the stride the next outer dimension must have
  for (int64_t i = t.dim() - 3; i >= 0; --i) {
    if (t.size(i) == 1) continue;
    if (next >= 0 && t.stride(i) != next) return Tensor();
    if (next < 0) bs = t.stride(i);
    next = t.stride(i) * t.size(i);
  }
  return t.as_strided({B, t.size(-2), t.size(-1)}, {bs, t.stride(-2), t.stride(-1)});
}

std::tuple<Tensor, Tensor, Tensor, Tensor> svd_ex_common(const Tensor& A, bool full_matrices, bool compute_uv,
                                                         std::optional<double> tol,
                                                         std::optional<int64_t> max_sweeps, EngineFn engine,
                                                         const char* op, bool may_sync,
                                                         SvdOptions* opt_out = nullptr, bool* info_read = nullptr) {
  check_matrix(A, op, "A");
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  const SvdOptions opt = for_shape(make_options(full_matrices, compute_uv, tol, max_sweeps, may_sync, op), m, n);
  if (opt_out) *opt_out = opt;

  const auto batch = A.sizes().slice(0, A.dim() - 2);
  const int64_t B = c10::multiply_integers(batch);
  const auto opts = A.options();
  const auto info_opts = A.options().dtype(at::kInt);
  // (created only where returned: an allocation is host time a small call feels)
  const auto no_uv = [&] { return at::empty({0}, opts); };

  if (B == 0 || k == 0) {
    Tensor S = at::empty(with_tail(batch, {k}), opts);
    Tensor info = at::zeros(batch, info_opts);
    if (!compute_uv) return {no_uv(), S, no_uv(), info};
    auto [U, Vh] = empty_factors(batch, m, n, full_matrices, opts);
    return {U, S, Vh, info};
  }

  // The engine wants tall matrices p x q (p >= q) column-major. Column-major W
  // is row-major W^T, so a tall A goes in as A.mT and a wide A (W = A^T) as A
  // itself: a (B, q, p) view when the batch dimensions merge and the dtype is
  // the compute dtype (the engine packs it where it needs its own copy, see
  // core.h); otherwise one copy here does the packing, the strides and the cast.
  const bool tall = m >= n;
  const int64_t p = tall ? m : n, q = k;
  const auto cdt = compute_dtype(A.scalar_type());
  const Tensor W = tall ? A.mT() : A;
  Tensor input = A.scalar_type() == cdt ? batch_as_3d(W, B) : Tensor();
  if (!input.defined()) {
    input = at::empty(with_tail(batch, {q, p}), opts.dtype(cdt));
    input.copy_(W);
    input = input.view({-1});
  }

  const PackedBatch pb = PackedBatch::uniform_of(B, p, q, opt.full_matrices);
  const CoreResult r = engine(input, pb, opt);
  if (info_read) *info_read = r.info_read;

  Tensor S = r.S.view(with_tail(batch, {k}));
  Tensor info = r.info.view(batch);
  if (S.scalar_type() != A.scalar_type()) S = S.to(A.scalar_type());
  if (!compute_uv) return {no_uv(), S, no_uv(), info};

  // Packed U_w (p x wu) and V_w (q x q) read row-major are U_w^T and V_w^T.
  // Tall A = U_w S V_w^T: U = U_w, Vh = V_w^T. Wide A = V_w S U_w^T: U = V_w,
  // Vh = U_w^T. Either way U is a column-major buffer and Vh a row-major one,
  // so both are views, no copy: U F-contiguous and Vh C-contiguous, the strides
  // torch.linalg.svd gives on CUDA (cuSOLVER) too. (One tensor op each, not a
  // chain of views: small calls feel every tensor op's host time.)
  const int64_t wu = pb.ucols[0];
  const Tensor& Ub = tall ? r.U : r.V;  // U's buffer, (batch..., m, cu) column-major
  const Tensor& Vb = tall ? r.V : r.U;  // Vh's, (batch..., rv, n) row-major
  const int64_t cu = tall ? wu : q, rv = tall ? q : wu;
  // (the engines return packed 1-D buffers, core.h; U's strides are a contiguous (batch..., m, cu)'s
  // with the last two swapped)
  TORCH_INTERNAL_ASSERT(Ub.dim() == 1 && (Ub.numel() <= 1 || Ub.stride(0) == 1) && Ub.numel() == B * m * cu);
  const std::vector<int64_t> u_sizes = with_tail(batch, {m, cu});
  c10::DimVector u_strides = c10::contiguous_strides(u_sizes);
  u_strides[batch.size()] = 1;
  u_strides[batch.size() + 1] = m;
  Tensor U = Ub.as_strided(u_sizes, u_strides);
  Tensor Vh = Vb.view(with_tail(batch, {rv, n}));
  if (U.scalar_type() != A.scalar_type()) U = U.to(A.scalar_type());  // keeps the strides
  if (Vh.scalar_type() != A.scalar_type()) Vh = Vh.to(A.scalar_type());
  return {U, S, Vh, info};
}

}  // namespace

std::tuple<Tensor, Tensor, Tensor, Tensor> svd_ex_impl(const Tensor& A, bool full_matrices, bool compute_uv,
                                                       std::optional<double> tol, std::optional<int64_t> max_sweeps,
                                                       EngineFn engine) {
  return svd_ex_common(A, full_matrices, compute_uv, tol, max_sweeps, engine, "jsvd.svd_ex",
                       /*may_sync=*/false);
}

std::tuple<Tensor, Tensor, Tensor> svd_impl(const Tensor& A, bool full_matrices, bool compute_uv,
                                            std::optional<double> tol, std::optional<int64_t> max_sweeps,
                                            EngineFn engine) {
  SvdOptions opt;
  bool info_read = false;
  auto [U, S, Vh, info] = svd_ex_common(A, full_matrices, compute_uv, tol, max_sweeps, engine, "jsvd.svd",
                                          /*may_sync=*/true, &opt, &info_read);
  if (!info_read) check_info(info, "jsvd.svd", opt);
  return {U, S, Vh};
}

Tensor svdvals_impl(const Tensor& A, std::optional<double> tol, std::optional<int64_t> max_sweeps,
                    EngineFn engine) {
  SvdOptions opt;
  bool info_read = false;
  auto res = svd_ex_common(A, false, false, tol, max_sweeps, engine, "jsvd.svdvals", /*may_sync=*/true, &opt,
                           &info_read);
  if (!info_read) check_info(std::get<3>(res), "jsvd.svdvals", opt);
  return std::get<1>(res);
}

}  // namespace jsvd
