// CPU kernels of the jsvd ops: the generic op layer driving the CPU engine.
#include <torch/library.h>

#include "../core.h"
#include "../svd_wrapper.h"

namespace jsvd {
namespace {

std::tuple<at::Tensor, at::Tensor, at::Tensor> svd_cpu(const at::Tensor& A, bool full_matrices, bool compute_uv,
                                                       std::optional<double> tol, std::optional<int64_t> max_sweeps) {
  return svd_impl(A, full_matrices, compute_uv, tol, max_sweeps, &jacobi_svd_cpu);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> svd_ex_cpu(const at::Tensor& A, bool full_matrices,
                                                                      bool compute_uv, std::optional<double> tol,
                                                                      std::optional<int64_t> max_sweeps) {
  return svd_ex_impl(A, full_matrices, compute_uv, tol, max_sweeps, &jacobi_svd_cpu);
}

at::Tensor svdvals_cpu(const at::Tensor& A, std::optional<double> tol, std::optional<int64_t> max_sweeps) {
  return svdvals_impl(A, tol, max_sweeps, &jacobi_svd_cpu);
}

std::tuple<std::vector<at::Tensor>, std::vector<at::Tensor>, std::vector<at::Tensor>> svd_varlen_cpu(
    at::TensorList As, bool full_matrices, bool compute_uv, std::optional<double> tol,
    std::optional<int64_t> max_sweeps) {
  return svd_varlen_impl(As, full_matrices, compute_uv, tol, max_sweeps, &jacobi_svd_cpu);
}

}  // namespace

TORCH_LIBRARY_IMPL(jsvd, CPU, m) {
  m.impl("svd", &svd_cpu);
  m.impl("svd_ex", &svd_ex_cpu);
  m.impl("svdvals", &svdvals_cpu);
  m.impl("svd_varlen", &svd_varlen_cpu);
}

}  // namespace jsvd
