// The Gram eigenvectors' start (eigh_precondition.h) for a variable-size list's large near-square members
// (issue 21). A uniform batch of 100 float32 512² matrices takes it and solves in ~55 ms; a list of the
// same sizes had only the block-pair Jacobi on A, a dozen sweeps (H100, bench_varlen at bdac5fc: 458 x
// [257,512] 380 ms against 128 ms for a uniform batch of its mean shape).
//
// The members' shapes differ, and syevBatched takes one order per call. Each member's Gram matrix is
// padded to its size class (a multiple of JSVD_LIST_START_CLASS columns, 128) as diag(G, -t I), t = trace
// G (1 for a zero G): the padding's eigenvalues lie below every one of G's (G is semi-definite, -t <=
// -lambda_max), so its eigenvectors come last and apart from G's, whose first q components are G's own.
// One syevBatched per class (direct, not a graph: a list's classes change from call to call), X = M V0
// written over the member's W, the Jacobi on the whole list at once, and V = V0 V_x after it.
// syevBatched's host side sets its time (a launch sequence per column, whatever the batch:
// syev_batched.cpp), so fewer, larger classes win until the padding's work shows. H100, b8f7d30, ms,
// class width 64 / 128 / 512 (JSVD_LIST_START=0): float32 458 x [257,512] 200 / 186 / 228 (370), float64
// 120 x [257,512] 121 / 82 / 83 (219); S, U and V as accurate as without. The uniform rule's minimum
// count holds for lists too: 40 x [100,600] forced on (JSVD_LIST_START=1, its ~28 members of 256 columns
// and more) 82 ms against 28.
#pragma once

#include <vector>

#include "core.h"
#include "qr/qr_precondition.h"  // Engine

namespace jsvd {
namespace cuda {

// The members of a list of rows x cols matrices (rows >= cols each) that take the start, by index: those
// of syevBatched's near-square shapes (syev_batched_square, eigh_precondition.h: kEighMinCols to
// kSyevBatchedMaxCols columns, rows < 2 cols), where the list has as many as a uniform batch would need
// (syev_batched_min_batch; JSVD_LIST_START=1: any number, =0: none).
std::vector<int64_t> list_start_members(const std::vector<int64_t>& rows, const std::vector<int64_t>& cols,
                                        size_t elem);
// The order a member of `cols` columns is padded to (its size class).
int64_t list_start_order(int64_t cols);

// The SVD of packed list A (1-D, a buffer of the call's own: the members' X is written over their W) by the
// start on members `ks` and `jacobi` on the whole list. Synchronises (svd, svdvals, svd_varlen only).
// A member whose Gram matrix fails start_checks (each member's own), a float64 member whose eigenvalues
// span more than kEighMinEigRatioF64, and a class on which syevBatched fails keep their A.
CoreResult svd_list_start(const at::Tensor& A, const PackedBatch& b, const SvdOptions& opt,
                          const std::vector<int64_t>& ks, const Engine& jacobi);

}  // namespace cuda
}  // namespace jsvd
