// The start's Jacobi on X by CholeskyQR2 (start_cholqr.h).
#include "precondition/start_cholqr.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>

#include "common/batched_gemm.h"
#include "precondition/eigh_precondition.h"
#include "precondition/syev_batched.h"
#include "tuning_knobs.h"

namespace jsvd {
namespace cuda {

bool x_by_cholqr(int64_t rows, int64_t cols, const SvdOptions& opt) {
  if (opt.full_matrices || knobs().x_cholqr == 0) return false;
  return knobs().x_cholqr == 1 || (rows > kEighMidQrRows && rows >= kCholQrMinRatio * cols);
}

namespace {

// One pass: R^T R = Y Y^T (Y packed, (B, q, p) contiguous: row j is column j of the matrix), and Y's Q
// packed, R^-T Y, by R's inverse (q x q) and a GEMM: cuBLAS's batched triangular solve took 0.45 ms on
// 7 x 16 x 200000 (H100). The inverse's errors are, like the solve's, relative to R's column scaling
// (Higham, Accuracy and Stability, ch. 8), and the second pass takes Q's to rounding.
// Returns (Q packed, R, Y Y^T); *info: potrf's.
std::tuple<at::Tensor, at::Tensor, at::Tensor> cholqr_pass(const at::Tensor& Y, at::Tensor* info) {
  const int64_t B = Y.size(0), q = Y.size(1), p = Y.size(2);
  const at::Tensor C = at::empty({B, q, q}, Y.options());
  gram_into(C, Y);
  const at::Tensor R = potrf_batched(C, info).triu();  // (L column-major in the lower triangle: R = L^T row-major)
  const at::Tensor Rinv = at::linalg_solve_triangular(R, at::eye(q, Y.options()).expand({B, q, q}), /*upper=*/true);
  const at::Tensor Q = at::empty({B, q, p}, Y.options());
  bmm_into<double>(Q, Rinv.mT(), Y, 1.0, 0.0);
  return {Q, R, C};
}

}  // namespace

std::optional<CoreResult> jacobi_on_x_by_cholqr(const at::Tensor& Xd, at::ScalarType dtype, const SvdOptions& opt,
                                                const Engine& square) {
  const at::NoTF32Guard no_tf32;
  const int64_t B = Xd.size(0), q = Xd.size(1), p = Xd.size(2);
  at::Tensor info1, info2;
  const auto [Q1, R1, C1] = cholqr_pass(Xd.contiguous(), &info1);
  const auto [Q2, R2, C2] = cholqr_pass(Q1, &info2);
  // (NaN fails the comparison: a failed first factorisation leaves Q1 non-finite)
  const at::Tensor dev = at::linalg_matrix_norm(C2 - at::eye(q, C2.options()));
  const bool ok = (info1.eq(0).all() & info2.eq(0).all() & dev.le(kCholQrMaxDev).all()).item<bool>();
  if (!ok) return std::nullopt;
  // R = R2 R1, packed (its columns as rows): R^T
  const at::Tensor Rp = at::matmul(R2, R1).mT().contiguous().to(dtype);
  SvdOptions xo = opt;
  xo.full_matrices = false;
  xo.want_v = true;
  xo.tol = resolve_tol(opt, p, dtype);  // (X's own threshold)
  CoreResult r = square(Rp.view({-1}), PackedBatch::uniform_of(B, q, q, false), xo);
  if (opt.compute_uv) {  // U = Q2 U_R; packed, U_R^T Q2^T
    const at::Tensor U = at::empty({B, q, p}, Xd.options());
    bmm_into<double>(U, r.U.view({B, q, q}).to(at::kDouble), Q2, 1.0, 0.0);
    r.U = U.to(dtype).view({-1});
  }
  r.polish = false;  // (U and V from float64 products of orthogonal factors)
  return r;
}

}  // namespace cuda
}  // namespace jsvd
