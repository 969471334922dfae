// CUDA kernels of the jsvd ops: the generic op layer driving the CUDA engine,
// and jsvd::plan, the level selector's plan for given shapes.
#include <torch/library.h>

#include <c10/cuda/CUDAFunctions.h>

#include "core.h"
#include "svd_wrapper.h"
#include "engine/batched_copy.h"
#include "engine/info_min.h"
#include "op_common.h"
#include "planner/planner.h"

namespace jsvd {
namespace {

std::string plan(std::vector<int64_t> rows, std::vector<int64_t> cols, c10::ScalarType dtype, bool compute_uv,
                 int64_t device, bool sync) {
  TORCH_CHECK(rows.size() == cols.size(), "jsvd.plan: rows and cols must have the same length");
  TORCH_CHECK(dtype == at::kFloat || dtype == at::kDouble || dtype == at::kHalf || dtype == at::kBFloat16,
              "jsvd.plan: dtype must be a floating dtype, got ", dtype);
  TORCH_CHECK(device >= 0 && device < c10::cuda::device_count(), "jsvd.plan: no CUDA device ", device);
  // float16/bfloat16 are computed in float32
  const size_t elem = dtype == at::kDouble ? sizeof(double) : sizeof(float);
  return cuda::plan_json(rows, cols, elem, compute_uv, static_cast<int>(device), sync);
}

// The auto-tuner's choice for a uniform batch, calibrating now if the shape
// is new (torch_jsvd.tune).
std::string tune(int64_t batch, int64_t rows, int64_t cols, c10::ScalarType dtype, bool compute_uv, int64_t device) {
  TORCH_CHECK(batch >= 1 && rows >= 1 && cols >= 1, "jsvd.tune: batch, rows and cols must be positive, got ", batch,
              ", ", rows, ", ", cols);
  TORCH_CHECK(dtype == at::kFloat || dtype == at::kDouble, "jsvd.tune: dtype must be float32 or float64, got ", dtype);
  TORCH_CHECK(device >= 0 && device < c10::cuda::device_count(), "jsvd.tune: no CUDA device ", device);
  return cuda::plan_json(std::vector<int64_t>(batch, rows), std::vector<int64_t>(batch, cols),
                         dtype == at::kDouble ? sizeof(double) : sizeof(float), compute_uv, static_cast<int>(device));
}
}  // namespace

TORCH_LIBRARY_FRAGMENT(jsvd, m) {
  m.def("plan(int[] rows, int[] cols, ScalarType dtype, bool compute_uv=True, int device=0, bool sync=True) -> str",
        &plan);
  m.def("tune(int batch, int rows, int cols, ScalarType dtype, bool compute_uv=True, int device=0) -> str", &tune);
}

TORCH_LIBRARY_IMPL(jsvd, CUDA, m) {
  register_kernels<&jacobi_svd_cuda, &batched_copy_cuda>(m);
  register_info_min(c10::DeviceType::CUDA, &cuda::info_min_cuda);
}

}  // namespace jsvd
