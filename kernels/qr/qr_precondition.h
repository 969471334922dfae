// QR preconditioning of the one-sided Jacobi (Drmac & Veselic, "New fast and
// accurate Jacobi SVD algorithm I", SIAM J. Matrix Anal. Appl. 29(4), 2008,
// with a sort of the columns by norm for their column pivoting): W P = Q R,
// the Jacobi runs on X = R^T, whose columns it orthogonalises in fewer sweeps
// (H100: 14 -> 11 at 100x512² float32, docs/scripts-history.md:
// precond_probe.py), and X = U_x S V_x^T gives W P = (Q V_x) S U_x^T. In
// float64 a second QR, R^T = Q2 R2, and the Jacobi on R2^T (xGEJSV's default
// path): W P = (Q U_x) S (Q2 V_x)^T.
#pragma once

#include "core.h"

#include <functional>
#include <vector>

#include "planner/planner.h"

namespace jsvd {
namespace cuda {

// How a uniform batch of rows x cols matrices (rows >= cols) is QR-preconditioned: not at all
// (variable-size batches: qr_list_member below; fewer than 256 columns in float32; JSVD_QR=0), by one
// launch that holds a whole matrix in shared memory (qr_whole_smem.h: where it fits), by the blocked QR
// with panels of `panel` columns, or, for a single tall matrix or where no panel fits one block, by
// cuSOLVER (`lapack`; JSVD_QR_LAPACK). Float32 from 256 columns; float64 from 32 where the one launch
// takes it, from 128 otherwise, and from 16 where rows >= max(512, 8 cols). JSVD_QR_MIN_COLS sets one
// bound for both dtypes; JSVD_QR_WHOLE=0 never takes the one launch (nor its float64 bound of 32 columns).
QrChoice qr_choice(int64_t rows, int64_t cols, size_t elem, bool uniform, int64_t batch, const DeviceLimits& lim);

// Whether the QR takes xGEJSV's second QR (R^T = Q2 R2) and sorts the rows first (by max|a_ij|): both for
// float64, unless JSVD_QR_TWICE / JSVD_QR_ROW_SORT say otherwise. Uniform batches and lists' members alike.
bool qr_twice_on(bool f64);
bool qr_row_sort_on(bool f64);

using Engine = std::function<CoreResult(const at::Tensor&, const PackedBatch&, const SvdOptions&)>;

// The SVD of a uniform packed batch A (1-D, private: overwritten with R) by
// the Jacobi `engine` on R^T; outputs packed as `engine`'s would be for A.
// `v_solve` (CallPlan::v_solve; svd only, it reads a count on the host): the
// Jacobi carries no V, and V_x = X^{-1} (U_x S) by a triangular solve (as
// xGEJSV does where R is well conditioned), kept where orthogonal to 10 q eps;
// the other matrices' Jacobi runs again with V (`engine` with want_v).
CoreResult svd_qr_preconditioned(const at::Tensor& A, const PackedBatch& b, const SvdOptions& opt,
                                 const QrChoice& qc, bool v_solve, const Engine& engine);

// Variable-size lists (qr_list.cpp): whether a member of a list of `count` takes the QR (what qr_choice
// gives its shape in a uniform batch, where that is the one-launch QR), the members of b that do, and
// the SVD of the list b with those members' Jacobi on their R^T, beside the others' on themselves, in
// one `engine` call.
bool qr_list_member(int64_t rows, int64_t cols, size_t elem, int64_t count, const DeviceLimits& lim);
std::vector<int64_t> qr_list_members(const PackedBatch& b, size_t elem, const DeviceLimits& lim);
CoreResult svd_qr_list(const at::Tensor& A, const PackedBatch& b, const SvdOptions& opt,
                       const std::vector<int64_t>& members, const Engine& engine);

}  // namespace cuda
}  // namespace jsvd
