// The op layer's shared checks and conversions (csrc/svd_wrapper.cpp defines
// them; csrc/svd_varlen.cpp uses them too).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <utility>

#include "core.h"

namespace jsvd {

// A clear error naming the argument (base, or base[index] for index >= 0)
// unless dt is float32, float64, float16 or bfloat16.
void check_float_dtype(at::ScalarType dt, const char* op, const char* base, int64_t index = -1);

// A clear error naming the argument unless A is a real floating point matrix
// (batch allowed, or exactly exact_dim dimensions). `index` >= 0: A is
// base[index] of a list (built into the message only on failure).
void check_matrix(const at::Tensor& A, const char* op, const char* base, int64_t index = -1,
                  int64_t exact_dim = -1);

// float16 / bfloat16 are computed in float32 and returned in their own dtype.
at::ScalarType compute_dtype(at::ScalarType dt);

// The options of one call, tol and max_sweeps checked.
SvdOptions make_options(bool full_matrices, bool compute_uv, std::optional<double> tol,
                        std::optional<int64_t> max_sweeps, bool may_sync, const char* op);

// The (U, Vh) torch.linalg.svd returns when min(m, n) == 0: nothing to
// decompose, and the "full" bases of the empty side are identities.
std::pair<at::Tensor, at::Tensor> empty_factors(c10::IntArrayRef batch, int64_t m, int64_t n, bool full_matrices,
                                                const at::TensorOptions& opts);

// Raises like torch.linalg.svd when any info < 0. The only host sync of the op layer.
void check_info(const at::Tensor& info, const char* op, const SvdOptions& opt);

// min(info) read on the host, for check_info: a backend may register a way faster than a copy of the
// whole info (CUDA: one launch and a pinned read, kernels/engine/info_min.h), once, at load.
using InfoMinFn = int32_t (*)(const at::Tensor& info);
void register_info_min(c10::DeviceType type, InfoMinFn fn);

}  // namespace jsvd
