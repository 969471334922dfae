// Reverse-mode autograd of jsvd.svd, jsvd.svd_ex and jsvd.svdvals for LibTorch programs (the CMake build,
// CMakeLists.txt). The Python package registers its own Autograd kernels, which also carry forward mode and
// torch.func's transforms (torch_jsvd/_autograd.py), so this file is left out of its build
// (JSVD_PYTHON_MODULE, setup.py). The formulas are the same: torch.linalg.svd's (svd_backward in
// torch/csrc/autograd/FunctionsManual.cpp), real case, as torch_jsvd/_autograd.py writes them.
#ifndef JSVD_PYTHON_MODULE

#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include "op_handles.h"

#include <optional>
#include <tuple>

namespace jsvd {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

at::Tensor skew(const at::Tensor& X) { return X - X.mT(); }

// gA for the reduced SVD A = U diag(S) Vh; undefined gradients are absent (not zeros: a zero gU would still
// form 0 / (S_j^2 - S_i^2), NaN for repeated singular values).
at::Tensor svd_backward(const at::Tensor& gU, const at::Tensor& gS, const at::Tensor& gVh, const at::Tensor& U,
                        const at::Tensor& S, const at::Tensor& Vh) {
  if (!gU.defined() && !gS.defined() && !gVh.defined()) return {};
  const int64_t m = U.size(-2), n = Vh.size(-1), k = S.size(-1);
  if (!gU.defined() && !gVh.defined())  // S only: U diag(gS) Vh
    return m >= n ? at::matmul(U, gS.unsqueeze(-1) * Vh) : at::matmul(U * gS.unsqueeze(-2), Vh);
  const at::Tensor S2 = S * S;
  // E_ij = S_j^2 - S_i^2, with a non-zero diagonal (only 0 / E_ii is ever formed there)
  const at::Tensor E = S2.unsqueeze(-2) - S2.unsqueeze(-1) + at::eye(k, S.options());
  at::Tensor gA;
  if (gU.defined() && gVh.defined()) {
    gA = (skew(at::matmul(U.mT(), gU)) * S.unsqueeze(-2) + S.unsqueeze(-1) * skew(at::matmul(Vh, gVh.mT()))) / E;
  } else if (gU.defined()) {
    gA = skew(at::matmul(U.mT(), gU)) * (S.unsqueeze(-2) / E);
  } else {
    gA = S.unsqueeze(-1) * (skew(at::matmul(Vh, gVh.mT())) / E);
  }
  if (gS.defined()) gA = gA + at::diag_embed(gS);
  if (m > n && gU.defined()) {  // gA = [U gA + (I_m - U U^T) gU S^-1] Vh
    const at::Tensor gUSinv = gU / S.unsqueeze(-2);
    gA = at::matmul(U, gA) + gUSinv - at::matmul(U, at::matmul(U.mT(), gUSinv));
    return at::matmul(gA, Vh);
  }
  if (m < n && gVh.defined()) {  // gA = U [gA Vh + S^-1 gVh (I_n - V V^T)]
    const at::Tensor SinvgVh = gVh / S.unsqueeze(-1);
    gA = at::matmul(gA, Vh) + SinvgVh - at::matmul(at::matmul(SinvgVh, Vh.mT()), Vh);
    return at::matmul(U, gA);
  }
  return m >= n ? at::matmul(U, at::matmul(gA, Vh)) : at::matmul(at::matmul(U, gA), Vh);
}

// U and V for a values-only call's gradient, in backward's grad mode (on under create_graph, so that a
// second derivative sees their dependence on A).
std::tuple<at::Tensor, at::Tensor, at::Tensor> factors(const at::Tensor& A, std::optional<double> tol,
                                                       std::optional<int64_t> max_sweeps) {
  static const auto svd = op_handle<SvdSig>("jsvd::svd");
  return svd.call(A, false, true, tol, max_sweeps);
}

std::optional<double> saved_tol(AutogradContext* ctx) {
  const auto& t = ctx->saved_data["tol"];
  return t.isNone() ? std::nullopt : std::optional<double>(t.toDouble());
}
std::optional<int64_t> saved_sweeps(AutogradContext* ctx) {
  const auto& s = ctx->saved_data["max_sweeps"];
  return s.isNone() ? std::nullopt : std::optional<int64_t>(s.toInt());
}

// jsvd.svd (ex = false) and jsvd.svd_ex (ex = true: info is a fourth, non-differentiable output).
template <bool kEx>
struct SvdFunction : public torch::autograd::Function<SvdFunction<kEx>> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& A, bool full_matrices, bool compute_uv,
                               std::optional<double> tol, std::optional<int64_t> max_sweeps) {
    at::AutoDispatchBelowADInplaceOrView guard;
    variable_list out;
    if constexpr (kEx) {
      static const auto op = op_handle<SvdExSig>("jsvd::svd_ex");
      auto [U, S, Vh, info] = op.call(A, full_matrices, compute_uv, tol, max_sweeps);
      out = {U, S, Vh, info};
      ctx->mark_non_differentiable({info});
    } else {
      static const auto op = op_handle<SvdSig>("jsvd::svd");
      auto [U, S, Vh] = op.call(A, full_matrices, compute_uv, tol, max_sweeps);
      out = {U, S, Vh};
    }
    ctx->set_materialize_grads(false);
    ctx->saved_data["full_matrices"] = full_matrices;
    ctx->saved_data["compute_uv"] = compute_uv;
    ctx->saved_data["tol"] = tol ? c10::IValue(*tol) : c10::IValue();
    ctx->saved_data["max_sweeps"] = max_sweeps ? c10::IValue(*max_sweeps) : c10::IValue();
    if (compute_uv) ctx->save_for_backward({out[0], out[1], out[2]});
    else ctx->save_for_backward({A});  // (U and Vh are placeholders: recomputed)
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    at::Tensor U, S, Vh, gU = grads[0], gVh = grads[2];
    if (ctx->saved_data["compute_uv"].toBool()) {
      U = saved[0], S = saved[1], Vh = saved[2];
      if (ctx->saved_data["full_matrices"].toBool()) {
        // the trailing columns of U / rows of Vh are an arbitrary basis: their gradients are ignored (as torch)
        const int64_t k = S.size(-1);
        U = U.narrow(-1, 0, k), Vh = Vh.narrow(-2, 0, k);
        if (gU.defined()) gU = gU.narrow(-1, 0, k);
        if (gVh.defined()) gVh = gVh.narrow(-2, 0, k);
      }
    } else {
      std::tie(U, S, Vh) = factors(saved[0], saved_tol(ctx), saved_sweeps(ctx));
      gU = gVh = at::Tensor();
    }
    return {svd_backward(gU, grads[1], gVh, U, S, Vh), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

struct SvdvalsFunction : public torch::autograd::Function<SvdvalsFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& A, std::optional<double> tol,
                            std::optional<int64_t> max_sweeps) {
    at::AutoDispatchBelowADInplaceOrView guard;
    static const auto op = op_handle<SvdvalsSig>("jsvd::svdvals");
    ctx->saved_data["tol"] = tol ? c10::IValue(*tol) : c10::IValue();
    ctx->saved_data["max_sweeps"] = max_sweeps ? c10::IValue(*max_sweeps) : c10::IValue();
    ctx->save_for_backward({A});
    return op.call(A, tol, max_sweeps);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto [U, S, Vh] = factors(ctx->get_saved_variables()[0], saved_tol(ctx), saved_sweeps(ctx));
    return {svd_backward({}, grads[0], {}, U, S, Vh), at::Tensor(), at::Tensor()};
  }
};

std::tuple<at::Tensor, at::Tensor, at::Tensor> svd_autograd(const at::Tensor& A, bool full_matrices, bool compute_uv,
                                                            std::optional<double> tol,
                                                            std::optional<int64_t> max_sweeps) {
  const auto out = SvdFunction<false>::apply(A, full_matrices, compute_uv, tol, max_sweeps);
  return {out[0], out[1], out[2]};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> svd_ex_autograd(const at::Tensor& A, bool full_matrices,
                                                                           bool compute_uv, std::optional<double> tol,
                                                                           std::optional<int64_t> max_sweeps) {
  const auto out = SvdFunction<true>::apply(A, full_matrices, compute_uv, tol, max_sweeps);
  return {out[0], out[1], out[2], out[3]};
}

at::Tensor svdvals_autograd(const at::Tensor& A, std::optional<double> tol, std::optional<int64_t> max_sweeps) {
  return SvdvalsFunction::apply(A, tol, max_sweeps);
}

}  // namespace
}  // namespace jsvd

TORCH_LIBRARY_IMPL(jsvd, Autograd, m) {
  m.impl("svd", jsvd::svd_autograd);
  m.impl("svd_ex", jsvd::svd_ex_autograd);
  m.impl("svdvals", jsvd::svdvals_autograd);
}

#endif  // JSVD_PYTHON_MODULE
