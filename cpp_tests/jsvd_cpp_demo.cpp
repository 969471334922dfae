// Calls the jsvd ops through the dispatcher, as any LibTorch program would,
// and checks the results on the CPU. Exit status: 0 if every check passes.
#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <optional>
#include <tuple>
#include <vector>

#include "op_handles.h"

namespace {


int failures = 0;

void check(bool ok, const char* what, double value, double bound) {
  std::printf("  %-34s %.3e  (bound %.3e)  %s\n", what, value, bound, ok ? "ok" : "FAIL");
  if (!ok) ++failures;
}

double max_of(const at::Tensor& t) { return t.numel() ? t.max().item<double>() : 0.0; }

// ||A - U diag(S) Vh||_F / ||A||_F and ||Q^T Q - I||_F, per matrix, in double.
void check_svd(const at::Tensor& A, const at::Tensor& U, const at::Tensor& S, const at::Tensor& Vh) {
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  const double eps = A.scalar_type() == at::kDouble ? std::numeric_limits<double>::epsilon()
                                                    : std::numeric_limits<float>::epsilon();
  const double bound = 10.0 * std::max(m, n) * eps;
  const auto Ad = A.to(at::kDouble), Ud = U.to(at::kDouble), Sd = S.to(at::kDouble), Vd = Vh.to(at::kDouble);
  const auto R = at::matmul(Ud.narrow(-1, 0, k) * Sd.unsqueeze(-2), Vd.narrow(-2, 0, k));
  const auto rec = at::linalg_matrix_norm(Ad - R) / at::linalg_matrix_norm(Ad);
  const auto eyeU = at::eye(U.size(-1), Ud.options()), eyeV = at::eye(Vh.size(-2), Ud.options());
  const auto orthU = at::linalg_matrix_norm(at::matmul(Ud.mT(), Ud) - eyeU);
  const auto orthV = at::linalg_matrix_norm(at::matmul(Vd, Vd.mT()) - eyeV);
  check(max_of(rec) <= bound, "reconstruction", max_of(rec), bound);
  check(max_of(orthU) <= bound, "orthogonality of U", max_of(orthU), bound);
  check(max_of(orthV) <= bound, "orthogonality of Vh", max_of(orthV), bound);
  const auto sref = at::linalg_svdvals(Ad);
  const auto serr = (Sd - sref).abs().max().item<double>() / sref.max().item<double>();
  check(serr <= bound, "S vs at::linalg_svdvals", serr, bound);
  const bool sorted = (S.narrow(-1, 0, k - 1) >= S.narrow(-1, 1, k - 1)).all().item<bool>();
  check(sorted && (S >= 0).all().item<bool>(), "S descending, >= 0", 0.0, 0.0);
}

}  // namespace

int main() {
  at::manual_seed(0);
  const auto svd = jsvd::op_handle<jsvd::SvdSig>("jsvd::svd");
  const auto svd_ex = jsvd::op_handle<jsvd::SvdExSig>("jsvd::svd_ex");
  const auto svdvals = jsvd::op_handle<jsvd::SvdvalsSig>("jsvd::svdvals");

  const std::vector<std::vector<int64_t>> shapes = {{8, 8}, {40, 13}, {13, 40}, {6, 9, 5}, {2, 3, 16, 16}};
  for (const auto dtype : {at::kFloat, at::kDouble}) {
    for (const auto& shape : shapes) {
      for (const bool full : {true, false}) {
        const auto A = at::randn(shape, at::TensorOptions().dtype(dtype));
        std::printf("jsvd::svd %s %s full_matrices=%d\n", c10::toString(dtype), A.sizes().vec().size() ? 
                    c10::str(A.sizes()).c_str() : "", full);
        auto [U, S, Vh] = svd.call(A, full, true, std::nullopt, std::nullopt);
        check_svd(A, U, S, Vh);
      }
    }
  }

  const auto A = at::randn({4, 20, 12}, at::TensorOptions().dtype(at::kDouble));
  auto [U, S, Vh, info] = svd_ex.call(A, false, true, std::nullopt, std::nullopt);
  std::printf("jsvd::svd_ex info = %s\n", c10::str(info).c_str());
  check((info >= 0).all().item<bool>() && info.scalar_type() == at::kInt, "svd_ex info >= 0 (int32)", 0.0, 0.0);
  const auto s2 = svdvals.call(A, std::nullopt, std::nullopt);
  const double d = (s2 - S).abs().max().item<double>();
  check(d <= 1e-13, "svdvals == svd_ex S", d, 1e-13);

  std::printf(failures ? "FAILED: %d check(s)\n" : "all checks passed\n", failures);
  return failures ? 1 : 0;
}
