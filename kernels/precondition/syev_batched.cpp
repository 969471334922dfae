// cuSOLVER's batched symmetric eigen-solver and Cholesky factorisation (syev_batched.h).
#include "precondition/syev_batched.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/util/Exception.h>
#include <cusolverDn.h>

#include <algorithm>
#include <memory>
#include <type_traits>
#include <unordered_map>
#include <vector>

namespace jsvd {
namespace cuda {
namespace {

// A handle per thread and device, made once (cusolverDnCreate costs milliseconds) and kept for the
// process. ATen's own (at::cuda::getCurrentCUDASolverDnHandle) lives in libtorch_cuda_linalg, which torch
// loads only at its first linear-algebra call, so an extension cannot link against it.
cusolverDnHandle_t solver_handle() {
  thread_local std::unordered_map<int, cusolverDnHandle_t> handles;
  int device = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  auto it = handles.find(device);
  if (it == handles.end()) {
    cusolverDnHandle_t h = nullptr;
    TORCH_CHECK(cusolverDnCreate(&h) == CUSOLVER_STATUS_SUCCESS, "jsvd: cusolverDnCreate failed");
    it = handles.emplace(device, h).first;
  }
  return it->second;
}

}  // namespace

at::Tensor syev_batched(const at::Tensor& G, bool* failed, at::Tensor* eigenvalues) {
#if CUSOLVER_VERSION < 12000
  TORCH_CHECK(false, "jsvd internal: syev_batched needs cuSOLVER 12.0 (CUDA 13) or later");
#else
  TORCH_CHECK(G.dim() == 3 && G.size(1) == G.size(2) && G.is_contiguous() && G.is_cuda() &&
                  (G.scalar_type() == at::kDouble || G.scalar_type() == at::kFloat),
              "jsvd internal: syev_batched takes a contiguous (B, q, q) float32/float64 CUDA tensor");
  const int64_t B = G.size(0), q = G.size(1);
  const cudaDataType dt = G.scalar_type() == at::kDouble ? CUDA_R_64F : CUDA_R_32F;
  at::Tensor W = at::empty({B, q}, G.options());
  at::Tensor info = at::zeros({B}, G.options().dtype(at::kInt));
  cusolverDnHandle_t handle = solver_handle();
  TORCH_CHECK(cusolverDnSetStream(handle, at::cuda::getCurrentCUDAStream()) == CUSOLVER_STATUS_SUCCESS,
              "jsvd: cusolverDnSetStream failed");
  cusolverDnParams_t params = nullptr;
  TORCH_CHECK(cusolverDnCreateParams(&params) == CUSOLVER_STATUS_SUCCESS, "jsvd: cusolverDnCreateParams failed");
  // (destroyed however this returns: the work buffer's allocation below may throw)
  const std::unique_ptr<std::remove_pointer_t<cusolverDnParams_t>, decltype(&cusolverDnDestroyParams)> params_guard(
      params, &cusolverDnDestroyParams);
  size_t device_bytes = 0, host_bytes = 0;
  cusolverStatus_t st = cusolverDnXsyevBatched_bufferSize(handle, params, CUSOLVER_EIG_MODE_VECTOR,
                                                          CUBLAS_FILL_MODE_LOWER, q, dt, G.data_ptr(), q, dt,
                                                          W.data_ptr(), dt, &device_bytes, &host_bytes, B);
  if (st == CUSOLVER_STATUS_SUCCESS) {
    at::Tensor work = at::empty({static_cast<int64_t>(std::max<size_t>(device_bytes, 1))}, G.options().dtype(at::kByte));
    std::vector<char> host(std::max<size_t>(host_bytes, 1));
    st = cusolverDnXsyevBatched(handle, params, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, q, dt,
                                G.data_ptr(), q, dt, W.data_ptr(), dt, work.data_ptr(), device_bytes,
                                host.data(), host_bytes, info.data_ptr<int>(), B);
  }
  TORCH_CHECK(st == CUSOLVER_STATUS_SUCCESS, "jsvd: cusolverDnXsyevBatched failed with status ", static_cast<int>(st));
  *failed = info.ne(0).any().item<bool>();
  if (eigenvalues) *eigenvalues = W;
  // Column-major eigenvectors, by increasing eigenvalue: as a row-major (B, q, q) tensor that is V^T.
  return G.mT().flip(-1);
#endif
}

at::Tensor potrf_batched(const at::Tensor& G, at::Tensor* info, double shift) {
  TORCH_CHECK(G.dim() == 3 && G.size(1) == G.size(2) && G.is_contiguous() && G.is_cuda() &&
                  G.scalar_type() == at::kDouble,
              "jsvd internal: potrf_batched takes a contiguous (B, q, q) float64 CUDA tensor");
  const int64_t B = G.size(0), q = G.size(1);
  at::Tensor L = G.clone();
  if (shift > 0 && G.numel() > 0)
    L.diagonal(0, -2, -1).add_(G.diagonal(0, -2, -1).amax(-1, /*keepdim=*/true) * shift);
  *info = at::zeros({B}, G.options().dtype(at::kInt));
  if (B == 0 || q == 0) return L;
  // (the array of the matrices' device addresses potrfBatched takes, formed on the device)
  const int64_t base = reinterpret_cast<int64_t>(L.data_ptr<double>());
  const at::Tensor ptrs = at::arange(base, base + B * q * q * 8, q * q * 8, G.options().dtype(at::kLong));
  cusolverDnHandle_t handle = solver_handle();
  TORCH_CHECK(cusolverDnSetStream(handle, at::cuda::getCurrentCUDAStream()) == CUSOLVER_STATUS_SUCCESS,
              "jsvd: cusolverDnSetStream failed");
  const cusolverStatus_t st =
      cusolverDnDpotrfBatched(handle, CUBLAS_FILL_MODE_LOWER, static_cast<int>(q),
                              reinterpret_cast<double**>(ptrs.data_ptr<int64_t>()), static_cast<int>(q),
                              info->data_ptr<int>(), static_cast<int>(B));
  TORCH_CHECK(st == CUSOLVER_STATUS_SUCCESS, "jsvd: cusolverDnDpotrfBatched failed with status ", static_cast<int>(st));
  return L;
}

}  // namespace cuda
}  // namespace jsvd
