// Gradients through the jsvd ops in a LibTorch program (csrc/autograd/svd_autograd.cpp), against
// at::linalg_svd's on the same inputs: first derivatives of gauge-invariant losses, and a second
// derivative (create_graph) through the values-only forms. Exit status: 0 if every check passes.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "op_handles.h"

namespace {

using Factors = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

int failures = 0;

void check(double err, const std::string& what) {
  const bool ok = err <= 1e-9;
  std::printf("  %-58s %.3e  %s\n", what.c_str(), err, ok ? "ok" : "FAIL");
  if (!ok) ++failures;
}

// Losses unchanged when a pair (u_i, v_i) flips sign, so that the gradient is defined.
const std::vector<std::pair<const char*, std::function<at::Tensor(const Factors&)>>> kLosses = {
    {"S^3", [](const Factors& f) { return std::get<1>(f).pow(3).sum(); }},
    {"sin(U S Vh)",
     [](const Factors& f) {
       const auto& [U, S, Vh] = f;
       const int64_t k = S.size(-1);
       return at::matmul(U.narrow(-1, 0, k) * S.unsqueeze(-2), Vh.narrow(-2, 0, k)).sin().sum();
     }},
    {"cos(U U^T) + (V V^T)^2",
     [](const Factors& f) {
       const auto& [U, S, Vh] = f;
       const int64_t k = S.size(-1);
       const auto Uk = U.narrow(-1, 0, k), Vk = Vh.narrow(-2, 0, k);
       return at::matmul(Uk, Uk.mT()).cos().sum() + at::matmul(Vk.mT(), Vk).pow(2).sum();
     }},
};

at::Tensor grad_of(const at::Tensor& loss, const at::Tensor& A, bool create_graph = false) {
  return torch::autograd::grad({loss}, {A}, {}, /*retain_graph=*/true, create_graph)[0];
}

}  // namespace

int main() {
  const auto svd = jsvd::op_handle<jsvd::SvdSig>("jsvd::svd");
  const auto svd_ex = jsvd::op_handle<jsvd::SvdExSig>("jsvd::svd_ex");
  const auto svdvals = jsvd::op_handle<jsvd::SvdvalsSig>("jsvd::svdvals");
  at::manual_seed(0);
  const std::vector<std::vector<int64_t>> shapes = {{5, 3}, {3, 5}, {4, 4}, {2, 6, 4}};
  for (const auto& shape : shapes) {
    const auto A = at::randn(shape, at::kDouble).requires_grad_();
    std::string name;
    for (size_t i = 0; i < shape.size(); ++i) name += (i ? "x" : "") + std::to_string(shape[i]);
    std::printf("%s\n", name.c_str());
    for (const bool full : {false, true}) {
      const Factors ours = svd.call(A, full, true, std::nullopt, std::nullopt);
      const auto [U, S, Vh] = at::linalg_svd(A, full);
      const Factors ref{U, S, Vh};
      for (const auto& [what, loss] : kLosses) {
        const auto err = (grad_of(loss(ours), A) - grad_of(loss(ref), A)).abs().max().item<double>();
        check(err, std::string("svd, full_matrices=") + (full ? "1, " : "0, ") + what);
      }
    }
    const auto g_ref = grad_of(at::linalg_svdvals(A).pow(3).sum(), A);
    const auto [Ue, Se, Vhe, info] = svd_ex.call(A, false, true, std::nullopt, std::nullopt);
    check((grad_of(Se.pow(3).sum(), A) - g_ref).abs().max().item<double>(), "svd_ex, S^3");
    check(info.requires_grad() ? 1.0 : 0.0, "svd_ex's info needs no gradient");
    const auto S_only = std::get<1>(svd_ex.call(A, false, false, std::nullopt, std::nullopt));
    check((grad_of(S_only.pow(3).sum(), A) - g_ref).abs().max().item<double>(), "svd_ex compute_uv=0, S^3");
    check((grad_of(svdvals.call(A, std::nullopt, std::nullopt).pow(3).sum(), A) - g_ref).abs().max().item<double>(),
          "svdvals, S^3");
    // A second derivative: the gradient of <grad(S^3), W> (a Hessian-vector product).
    const auto W = at::randn(shape, at::kDouble);
    const auto hvp = [&](const at::Tensor& S) {
      return grad_of((grad_of(S.pow(3).sum(), A, /*create_graph=*/true) * W).sum(), A);
    };
    const auto h_ref = hvp(at::linalg_svdvals(A));
    check((hvp(svdvals.call(A, std::nullopt, std::nullopt)) - h_ref).abs().max().item<double>(),
          "svdvals, Hessian-vector product of S^3");
    check((hvp(std::get<1>(svd.call(A, false, true, std::nullopt, std::nullopt))) - h_ref).abs().max().item<double>(),
          "svd, Hessian-vector product of S^3");
  }
  std::printf(failures ? "%d check(s) FAILED\n" : "all checks passed\n", failures);
  return failures ? 1 : 0;
}
