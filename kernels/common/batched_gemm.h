// Batched GEMMs on views of a batch, by cuBLAS's strided batched GEMM called directly on the current
// stream's handle: no dispatch, output allocation, copy or per-call heuristics (at::bmm's host time,
// about 50 us a call on the H200 under the profiler, was most of the device's idle time in the Gram
// eigenvectors' start of a batch; the QR's GEMMs since 3a53f20). Full precision: callers hold
// at::NoTF32Guard or call the float64 GEMM.
#pragma once

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/Exceptions.h>

#include <algorithm>
#include <type_traits>

#include "tuning_knobs.h"

namespace jsvd {
namespace cuda {

// A row-major batched view (B, r, c) as cuBLAS sees it: column-major, so the
// view itself (unit stride along c) is the transpose of cuBLAS's matrix, and a
// transposed view (unit stride along r) is that matrix.
struct BlasView {
  cublasOperation_t op;  // what turns cuBLAS's matrix into the view's transpose
  int64_t ld;
};

// Unit stride along the view's rows (its last dimension) or along its columns, with a leading
// dimension that covers the other: what cuBLAS can take as is.
inline bool unit_rows(const at::Tensor& M) { return M.stride(2) == 1 && M.stride(1) >= std::max<int64_t>(M.size(2), 1); }
inline bool unit_cols(const at::Tensor& M) { return M.stride(1) == 1 && M.stride(2) >= std::max<int64_t>(M.size(1), 1); }

inline BlasView blas_view(const at::Tensor& M) {
  if (unit_rows(M)) return {CUBLAS_OP_N, M.stride(1)};
  TORCH_CHECK(unit_cols(M), "jsvd internal: a GEMM operand needs unit stride in one of its matrix dimensions");
  return {CUBLAS_OP_T, M.stride(2)};
}

// Z = alpha X Y + beta Z for batched row-major views (Z with unit stride along
// its rows; X and Y either way), on the current stream: row-major Z = X Y is
// column-major Z^T = Y^T X^T, so cuBLAS's A is Y and its B is X.
template <typename T>
void bmm_into(const at::Tensor& Z, const at::Tensor& X, const at::Tensor& Y, T alpha, T beta) {
  TORCH_CHECK(Z.stride(2) == 1 && X.size(2) == Y.size(1) && Z.size(1) == X.size(1) && Z.size(2) == Y.size(2),
              "jsvd internal: bmm_into shapes");
  const BlasView x = blas_view(X), y = blas_view(Y);
  const cublasHandle_t h = at::cuda::getCurrentCUDABlasHandle();  // (current stream; TF32 off under NoTF32Guard)
  const auto gemm = [&](auto strided_batched) {
    TORCH_CUDABLAS_CHECK(strided_batched(h, y.op, x.op, static_cast<int>(Z.size(2)), static_cast<int>(Z.size(1)),
                                         static_cast<int>(X.size(2)), &alpha, Y.const_data_ptr<T>(),
                                         static_cast<int>(y.ld), Y.stride(0), X.const_data_ptr<T>(),
                                         static_cast<int>(x.ld), X.stride(0), &beta, Z.mutable_data_ptr<T>(),
                                         static_cast<int>(Z.stride(1)), Z.stride(0), static_cast<int>(Z.size(0))));
  };
  if constexpr (std::is_same_v<T, float>)
    gemm(cublasSgemmStridedBatched);
  else
    gemm(cublasDgemmStridedBatched);
}

// A batched view with unit stride in one of its matrix dimensions, as bmm_into takes it (a copy
// only where the view has none, e.g. a strided slice).
inline at::Tensor blas_operand(const at::Tensor& M) { return unit_rows(M) || unit_cols(M) ? M : M.contiguous(); }

// M V for the batch's matrices M (Wd: (B, q, rows) float64, row j M's column j) and V (B, q, q) float64,
// packed the same way: V^T W, (B, q, rows), by one batched DGEMM.
inline at::Tensor times_v(const at::Tensor& Wd, const at::Tensor& V) {
  const at::Tensor Y = at::empty({Wd.size(0), V.size(2), Wd.size(2)}, Wd.options());
  bmm_into<double>(Y, V.mT(), Wd, 1.0, 0.0);
  return Y;
}

// C = Y Y^T (float64, (B, q, q) contiguous) of Y (B, q, p). cuBLAS's strided batched GEMM gives a q x q
// product a CTA or a few per matrix, however long p (its single GEMM splits p, its batched one does not):
// H100, 7 x 16 x 200000 float64 1.3 ms. Where 2 or more matrices have together at most half as many such
// 32 x 32 tiles as the device has SMs, p is cut into kGramChunk-long pieces, copied into a batch of their
// own (a pass over Y), their products summed (JSVD_GRAM_CHUNK=0: never). H100, stop 60, 9a31309, two
// rounds, ms of svd, with / without (the start's G, its test's X^T X and CholeskyQR2's two products):
// float64 7x200000x16 1.35, 1.41 / 3.43, 3.44; singular values from 1 to 1e-6 float32 7x200000x16 1.94,
// 1.96 / 4.20, 4.25, 15x50000x32 2.47, 2.48 / 2.70, 2.70, 6x100000x64 4.88, 5.09 / 5.60, 5.64, 20x50000x16
// 1.49, 1.52 / 1.85, 1.88, float64 7x200000x16 2.29, 2.34 / 6.47, 6.51; but one matrix (1x20000x64 2.48 /
// 2.32-2.36, 1x400000x16 float64 1.01-1.07 / 0.90-1.03) and 130x20000x16 (2.78-2.80 / 2.44-2.48) lost.
constexpr int64_t kGramChunk = 4096;
inline void gram_into(const at::Tensor& C, const at::Tensor& Y) {
  const int64_t B = Y.size(0), q = Y.size(1), p = Y.size(2), s = p / kGramChunk, tiles = (q + 31) / 32;
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  if (B < 2 || s < 2 || 2 * B * tiles * tiles > sms || !knobs().gram_chunk) {
    bmm_into<double>(C, Y, Y.mT(), 1.0, 0.0);
    return;
  }
  const at::Tensor pieces = Y.narrow(2, 0, s * kGramChunk)
                                .reshape({B, q, s, kGramChunk})
                                .permute({0, 2, 1, 3})
                                .reshape({B * s, q, kGramChunk});
  const at::Tensor parts = at::empty({B * s, q, q}, Y.options());
  bmm_into<double>(parts, pieces, pieces.mT(), 1.0, 0.0);
  at::Tensor out = C;  // (a handle on C's storage: sum_out writes there)
  at::sum_out(out, parts.view({B, s, q, q}), 1);
  if (s * kGramChunk < p) {
    const at::Tensor tail = Y.narrow(2, s * kGramChunk, p - s * kGramChunk);
    bmm_into<double>(C, tail, tail.mT(), 1.0, 1.0);
  }
}

}  // namespace cuda
}  // namespace jsvd
