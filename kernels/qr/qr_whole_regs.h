// The one-launch QR of matrices of at most 32 columns with the matrix in registers (qr_whole_regs.cu):
// launch_qr_whole's contract (qr_whole_smem.h), for the narrow tall shapes where the shared-memory
// kernel's column-per-group loops were instruction-bound (the batched QR's register level,
// batched-qr-svd-hmatrix-compression.txt).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "qr/qr_whole_smem.h"

namespace jsvd {
namespace cuda {

// Whether p x q matrices (p >= q) fit: q <= 32, and p rows over at most 512 threads (256 at 32
// columns) with at most 64 registers of the matrix a thread; p <= kQrWholeMaxRows (apply_wy.cu).
bool qr_regs_fits(int64_t p, int64_t q, size_t elem);

// launch_qr_whole (qr_whole_smem.h), with the same arguments and results.
template <typename T>
void launch_qr_regs(const QrWholeArgs<T>& a, int64_t B, cudaStream_t stream);

}  // namespace cuda
}  // namespace jsvd
