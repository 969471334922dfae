// The QR preconditioning of small matrices in one launch (qr_whole_smem.cu): a thread block per
// matrix, the whole matrix in shared memory, where the blocked path (householder_panel.cu and cuBLAS,
// qr_precondition.cpp) pays a dozen launches and small GEMMs per panel.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace jsvd {
namespace cuda {

// Rows the application keeps in registers: at most 32 a lane.
constexpr int64_t kQrWholeMaxRows = 1024;

// Shared memory of the factorisation kernel for p x q matrices (p >= q), and of the kernel that
// applies the reflectors of an L-row factor of r columns.
size_t qr_whole_smem(int64_t p, int64_t q, size_t elem);
size_t apply_reflectors_smem(int64_t L, int64_t r, size_t elem);
// Whether the path takes p x q matrices: both kernels' shared memory, and p <= kQrWholeMaxRows.
bool qr_whole_fits(int64_t p, int64_t q, size_t elem, size_t smem_per_block);

// For each of the B matrices of W (p x q, column-major, consecutive): divides it by max|a| (scale[k];
// 1 for a zero matrix), orders its columns by decreasing norm (perm[k][i]: the column at position i;
// the identity unless `sort`), W P = Q R by Householder reflectors (xGEQR2), and, if `twice`, R^T =
// Q2 R2. X (B, q x q, column-major) receives R^T, or R2^T if twice. Where `keep`: Q's reflectors in
// W (v_j below the diagonal of column j, v_j(j) = 1 implied) with tau1 (B, q), and Q2's in Y2
// (B, q x q) with tau2.
template <typename T>
void launch_qr_whole(T* W, int64_t B, int p, int q, bool sort, bool twice, bool keep, T* X, T* tau1, T* Y2, T* tau2,
                     int64_t* perm, T* scale, cudaStream_t stream);

// out[k] (L x nc, column-major) = H_0 ... H_{r-1} M_k, where M_k's column j is [M[k] column j; 0]
// (M: mrows x mc, column-major, mrows <= L) for j < mc and e_j beyond (full_matrices' completion),
// H_h = I - tau[k][h] v v^T with v = [0; 1; Y[k] column h below row h] (Y: L x r, consecutive). Row
// i of the product goes to row perm[k][i] of out where perm is given. r = 0: a copy (with perm).
template <typename T>
void launch_apply_reflectors(const T* Y, int L, int r, const T* tau, const T* M, int mrows, int mc, T* out, int nc,
                             const int64_t* perm, int64_t B, cudaStream_t stream);

}  // namespace cuda
}  // namespace jsvd
