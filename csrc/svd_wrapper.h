// Device-generic op layer: validation, dtype handling, packing of any input
// into a PackedBatch for an engine (core.h), and mapping of the packed results
// back to torch.linalg.svd's (U, S, Vh). Each backend registers these functions
// with its own engine (csrc/cpu/ops_cpu.cpp, kernels/engine/ops_cuda.cpp).
#pragma once

#include <ATen/ATen.h>
#include <torch/library.h>

#include <cstdint>
#include <optional>
#include <tuple>
#include <vector>

#include "core.h"

namespace jsvd {

using EngineFn = CoreResult (*)(const at::Tensor&, const PackedBatch&, const SvdOptions&);

// One strided 2-D copy dst <- src: same shape, any strides (in elements),
// the dtype converted.
struct MatrixCopy {
  const void* src;
  void* dst;
  int64_t rows, cols;
  int64_t src_rs, src_cs, dst_rs, dst_cs;
};

// A backend does a whole list of copies in one pass (kernels/engine/batched_copy.cu:
// one upload and one launch instead of a launch per matrix; csrc/cpu/batched_copy_cpu.cpp:
// one parallel loop); svd_varlen packs its inputs and unpacks its outputs with it.
using BatchedCopyFn = void (*)(const std::vector<MatrixCopy>& copies, at::ScalarType src, at::ScalarType dst,
                               const at::Device& device);

// jsvd::svd_ex. Never synchronises with the device: info (int32, batch shape)
// holds the sweeps taken, or kInfoNotConverged / kInfoNonFinite.
// compute_uv=false returns U and Vh as empty tensors of shape (0,), as
// torch._linalg_svd does.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> svd_ex_impl(
    const at::Tensor& A, bool full_matrices, bool compute_uv, std::optional<double> tol,
    std::optional<int64_t> max_sweeps, EngineFn engine);

// jsvd::svd: svd_ex_impl with SvdOptions::may_sync (the engine may stop early
// on a device flag), then raises (a LinAlgError, like torch.linalg.svd)
// if any matrix did not converge or held NaN/Inf. This is the one host sync.
std::tuple<at::Tensor, at::Tensor, at::Tensor> svd_impl(
    const at::Tensor& A, bool full_matrices, bool compute_uv, std::optional<double> tol,
    std::optional<int64_t> max_sweeps, EngineFn engine);

// jsvd::svdvals: singular values only; raises like svd_impl.
at::Tensor svdvals_impl(const at::Tensor& A, std::optional<double> tol,
                        std::optional<int64_t> max_sweeps, EngineFn engine);

// jsvd::svd_varlen: a list of 2-D matrices of any shapes, packed into one
// PackedBatch and solved by one engine call; raises like svd_impl.
std::tuple<std::vector<at::Tensor>, std::vector<at::Tensor>, std::vector<at::Tensor>>
svd_varlen_impl(at::TensorList As, bool full_matrices, bool compute_uv, std::optional<double> tol,
                std::optional<int64_t> max_sweeps, EngineFn engine, BatchedCopyFn batched_copy);

// jsvd::svd_varlen_packed: the matrices of one 1-D buffer `values`, member i
// described by row i of `members` (int64, CPU, (count, 5): rows, cols, offset,
// row stride, column stride, in elements of values), as a nested tensor holds
// them. Returns U, S and Vh as 1-D buffers holding each member's factor
// C-contiguous, in member order (U_i m_i x (full ? m_i : k_i), S_i k_i,
// Vh_i (full ? n_i : k_i) x n_i): no tensor a matrix. Raises like svd_impl.
std::tuple<at::Tensor, at::Tensor, at::Tensor> svd_varlen_packed_impl(
    const at::Tensor& values, const at::Tensor& members, bool full_matrices, bool compute_uv,
    std::optional<double> tol, std::optional<int64_t> max_sweeps, EngineFn engine, BatchedCopyFn batched_copy);

// The five op kernels of one backend, bound to its engine (and, optionally,
// its batched copy):
//   TORCH_LIBRARY_IMPL(jsvd, CPU, m) { register_kernels<&jacobi_svd_cpu>(m); }
template <EngineFn kEngine, BatchedCopyFn kBatchedCopy>
void register_kernels(torch::Library& m) {
  m.impl("svd", [](const at::Tensor& A, bool full_matrices, bool compute_uv, std::optional<double> tol,
                   std::optional<int64_t> max_sweeps) {
    return svd_impl(A, full_matrices, compute_uv, tol, max_sweeps, kEngine);
  });
  m.impl("svd_ex", [](const at::Tensor& A, bool full_matrices, bool compute_uv, std::optional<double> tol,
                      std::optional<int64_t> max_sweeps) {
    return svd_ex_impl(A, full_matrices, compute_uv, tol, max_sweeps, kEngine);
  });
  m.impl("svdvals", [](const at::Tensor& A, std::optional<double> tol, std::optional<int64_t> max_sweeps) {
    return svdvals_impl(A, tol, max_sweeps, kEngine);
  });
  m.impl("svd_varlen", [](at::TensorList As, bool full_matrices, bool compute_uv, std::optional<double> tol,
                          std::optional<int64_t> max_sweeps) {
    return svd_varlen_impl(As, full_matrices, compute_uv, tol, max_sweeps, kEngine, kBatchedCopy);
  });
  m.impl("svd_varlen_packed", [](const at::Tensor& values, const at::Tensor& members, bool full_matrices,
                                 bool compute_uv, std::optional<double> tol, std::optional<int64_t> max_sweeps) {
    return svd_varlen_packed_impl(values, members, full_matrices, compute_uv, tol, max_sweeps, kEngine,
                                  kBatchedCopy);
  });
}

}  // namespace jsvd
