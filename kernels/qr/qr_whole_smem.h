// The QR preconditioning of small matrices in one launch (qr_whole_smem.cu): a thread block per
// matrix, the whole matrix in shared memory, where the blocked path (householder_panel.cu and cuBLAS,
// qr_precondition.cpp) pays a dozen launches and small GEMMs per panel.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace jsvd {
namespace cuda {

// Rows the application keeps in registers: at most 32 a lane.
constexpr int64_t kQrWholeMaxRows = 1024;

// Shared memory of the factorisation kernel for p x q matrices (p >= q), of the kernel that applies
// the reflectors of an L-row factor of r columns, and of the application of Q to U (apply_wy.cu).
size_t qr_whole_smem(int64_t p, int64_t q, size_t elem);
size_t apply_reflectors_smem(int64_t L, int64_t r, size_t elem);
size_t apply_wy_smem(int64_t p, int64_t q, size_t elem);
// Whether the path takes p x q matrices: the kernels' shared memory, and p <= kQrWholeMaxRows.
bool qr_whole_fits(int64_t p, int64_t q, size_t elem, size_t smem_per_block);

// A member of a variable-size list on the one-launch path (qr_list.cpp): where its pieces are, as
// offsets into each buffer (a uniform batch's are k times its sizes, and it passes no table).
struct QrMember {
  int64_t a;            // W in A (q x p, row c = column c): read, and X = R^T (or R2^T) written over it
  int64_t y;            // Q's reflectors Y (p x q)
  int64_t x;            // S, Y2 (q x q)
  int64_t t;            // perm, tau2 (q)
  int64_t r;            // rowperm (p)
  int64_t left, right;  // the Jacobi's factors of X (q x q) that make U and V
  int64_t u, v, s;      // U (p x uc), V (q x q) and S (q) in the results
  int32_t p, q, uc, pad_;
};

// What the one-launch QRs (launch_qr_whole, launch_qr_regs) read and write, for B matrices p x q.
template <typename T>
struct QrWholeArgs {
  const T* A;                  // input: element (r, c) of matrix k at A[k sb + c sc + r sr] (a packed buffer or
  int64_t sb = 0, sc = 0, sr = 0;  //   the caller's view, read in place)
  T* Y = nullptr;              // where keep: Q's reflectors (B, p x q, column-major, consecutive); may be A
  int p = 0, q = 0;
  bool sort = true, row_sort = false, twice = false, keep = false;
  T *X = nullptr, *S = nullptr, *Y2 = nullptr, *tau2 = nullptr;
  int64_t* perm = nullptr;
  int32_t* rowperm = nullptr;
  T* scale = nullptr;
  // A list (launch_qr_whole only): member k's shape and offsets in members[k] (p, q, sb, sc, sr and
  // the uniform offsets unused; X may be A: each member's X is written over its own W).
  const QrMember* members = nullptr;
};

// A list's launch shapes: the largest each kernel needs over its members (qr_whole_fits for each).
struct QrListLaunch {
  const QrMember* members = nullptr;  // on the device
  int64_t count = 0;
  int max_p = 0, max_q = 0, max_uc = 0, qr_threads = 0;
  size_t qr_smem = 0, wy_smem = 0;
};
QrListLaunch qr_list_launch(const QrMember* dev, const std::vector<QrMember>& host, size_t elem, bool row_sort);

// For each matrix W of A: divides it by max|a| (scale[k]; 1 for a zero matrix), orders its rows by
// decreasing max|a_ij| if `row_sort` (P_r; rowperm[k][r]: the row at position r, written where `keep`)
// and its columns by decreasing norm (perm[k][i]: the column at position i; the identity unless
// `sort`), P_r W P = Q R by Householder reflectors (xGEQR2), and, if `twice`, R^T = Q2 R2. X (B, q x q,
// column-major) receives R^T, or R2^T if twice. Where `keep`: Q = I - Y S^{-1} Y^T with Y (p x q,
// explicit, in W's row order: P_r^T Y) in Y and S (B, q x q, column-major, upper triangular) in S;
// Q2's reflectors in Y2 (B, q x q; v_j below the diagonal of column j, v_j(j) = 1 implied) with tau2.
template <typename T>
void launch_qr_whole(const QrWholeArgs<T>& a, int64_t B, cudaStream_t stream);
// The same for a list's members (a.members = l.members).
template <typename T>
void launch_qr_whole_list(const QrWholeArgs<T>& a, const QrListLaunch& l, cudaStream_t stream);

// out[k] (p x nc, column-major) = P_r^T Q [M_k 0; 0 I] (its first nc columns), Q = I - Y_s S^{-1} Y_s^T
// with Y_s = P_r Y, Y and S from launch_qr_whole (rowperm: P_r, null for none); M (q x q, column-major,
// consecutive). apply_wy.cu.
template <typename T>
void launch_apply_wy(const T* Y, const T* S, const int32_t* rowperm, const T* M, T* out, int p, int q, int nc,
                     int64_t B, cudaStream_t stream);

// out[k] (L x L, column-major) = H_0 ... H_{r-1} M_k (M: L x L, column-major, consecutive), H_h = I -
// tau[k][h] v v^T with v = [0; 1; Y[k] column h below row h] (Y: L x r, consecutive): V's Q2 of the
// second QR. Row i of the product goes to row perm[k][i] of out where perm is given. r = 0: a copy
// (with perm).
template <typename T>
void launch_apply_reflectors(const T* Y, int L, int r, const T* tau, const T* M, T* out, const int64_t* perm, int64_t B,
                             cudaStream_t stream);

// The two applications for a list's members: U (at each member's u) from `left` (based at Ml), and
// V (at v) from `right` (based at Mr), with Q2's reflectors where `twice`; S (at s) times its scale.
template <typename T>
void launch_apply_wy_list(const T* Y, const T* S, const int32_t* rowperm, const T* Ml, T* out, const QrListLaunch& l,
                          cudaStream_t stream);
template <typename T>
void launch_apply_reflectors_list(const T* Y2, bool twice, const T* tau2, const T* Mr, T* out, const int64_t* perm,
                                  const QrListLaunch& l, cudaStream_t stream);
template <typename T>
void launch_scale_s_list(T* S, const T* scale, const QrListLaunch& l, cudaStream_t stream);

}  // namespace cuda
}  // namespace jsvd
