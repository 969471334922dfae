// CUDA kernels of the jsvd ops: the generic op layer driving the CUDA engine,
// and jsvd::plan, the level selector's plan for given shapes.
#include <torch/library.h>

#include <c10/cuda/CUDAFunctions.h>

#include "../csrc/core.h"
#include "../csrc/svd_wrapper.h"
#include "planner.h"

namespace jsvd {
namespace {

std::tuple<at::Tensor, at::Tensor, at::Tensor> svd_cuda(const at::Tensor& A, bool full_matrices, bool compute_uv,
                                                        std::optional<double> tol, std::optional<int64_t> max_sweeps) {
  return svd_impl(A, full_matrices, compute_uv, tol, max_sweeps, &jacobi_svd_cuda);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> svd_ex_cuda(const at::Tensor& A, bool full_matrices,
                                                                       bool compute_uv, std::optional<double> tol,
                                                                       std::optional<int64_t> max_sweeps) {
  return svd_ex_impl(A, full_matrices, compute_uv, tol, max_sweeps, &jacobi_svd_cuda);
}

at::Tensor svdvals_cuda(const at::Tensor& A, std::optional<double> tol, std::optional<int64_t> max_sweeps) {
  return svdvals_impl(A, tol, max_sweeps, &jacobi_svd_cuda);
}

std::tuple<std::vector<at::Tensor>, std::vector<at::Tensor>, std::vector<at::Tensor>> svd_varlen_cuda(
    at::TensorList As, bool full_matrices, bool compute_uv, std::optional<double> tol,
    std::optional<int64_t> max_sweeps) {
  return svd_varlen_impl(As, full_matrices, compute_uv, tol, max_sweeps, &jacobi_svd_cuda);
}

std::string plan(std::vector<int64_t> rows, std::vector<int64_t> cols, c10::ScalarType dtype, bool compute_uv,
                 int64_t device) {
  TORCH_CHECK(rows.size() == cols.size(), "jsvd.plan: rows and cols must have the same length");
  TORCH_CHECK(dtype == at::kFloat || dtype == at::kDouble || dtype == at::kHalf || dtype == at::kBFloat16,
              "jsvd.plan: dtype must be a floating dtype, got ", dtype);
  TORCH_CHECK(device >= 0 && device < c10::cuda::device_count(), "jsvd.plan: no CUDA device ", device);
  // float16/bfloat16 are computed in float32
  const size_t elem = dtype == at::kDouble ? sizeof(double) : sizeof(float);
  return cuda::plan_json(rows, cols, elem, compute_uv, static_cast<int>(device));
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(jsvd, m) {
  m.def("plan(int[] rows, int[] cols, ScalarType dtype, bool compute_uv=True, int device=0) -> str", &plan);
}

TORCH_LIBRARY_IMPL(jsvd, CUDA, m) {
  m.impl("svd", &svd_cuda);
  m.impl("svd_ex", &svd_ex_cuda);
  m.impl("svdvals", &svdvals_cuda);
  m.impl("svd_varlen", &svd_varlen_cuda);
}

}  // namespace jsvd
