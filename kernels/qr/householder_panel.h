// Panel factorisation of the blocked Householder QR (householder_panel.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace jsvd {
namespace cuda {

constexpr int kMaxPanelWidth = 32;
// The kernel's static shared memory (G/T and four per-column arrays, double).
constexpr size_t kPanelStaticSmem = (kMaxPanelWidth * (kMaxPanelWidth + 1) + 4 * kMaxPanelWidth) * sizeof(double);

// Dynamic shared memory of a panel of `rows` x `w` (the panel itself).
size_t householder_panel_smem(int64_t rows, int64_t w, size_t elem);

// QR of nmat panels (one block each), w <= kMaxPanelWidth <= rows. Panel k's
// column c is A[k * a_bs + c * a_ld + i], i < rows. Afterwards the panel holds
// R on and above its diagonal and zeros below; Yt (nmat, w, rows) holds the
// reflectors as rows (zeros above the diagonal, 1 on it) and Tm (nmat, w, w)
// the upper triangular T of Q = H_0 ... H_{w-1} = I - Y T Y^T (row-major).
template <typename T>
void launch_householder_panel(T* A, int64_t a_bs, int64_t a_ld, int rows, int w, T* Yt, T* Tm, int nmat,
                              cudaStream_t stream);

}  // namespace cuda
}  // namespace jsvd
