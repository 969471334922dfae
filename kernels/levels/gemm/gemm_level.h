// The GEMM level of the W-cycle (paper §III-B, §IV-D; the block-oriented
// one-sided Jacobi of hierarchically-blocked-jacobi-multi-gpu.txt §3-4): for
// matrices too large for the shared-memory levels to keep the GPU busy, each
// round-robin step of block-column pairs of width w is, for every pair of
// every matrix of a group at once,
//   1. G = [A_i A_j]^T [A_i A_j]       batched GEMMs (rows split in `split`
//                                      chunks so that a step fills the GPU)
//   2. G = J diag J^T                  the Gram EVD in shared memory
//                                      (levels/gram/gram_evd.cuh), one block a pair
//   3. [A_i A_j] <- [A_i A_j] J,  [V_i V_j] <- [V_i V_j] J   batched GEMMs
// in float64 whatever the input's type (exact inner products for float32
// data: the Gram matrix must not lose what the rotations need; on the H100
// FP64 tensor cores run DGEMM at FP32's SIMT peak).
//
// Layout: each matrix is copied, with its columns zero-padded to k = 2P
// blocks of w and its rows to the split, into a work buffer whose block
// columns are slots: pair p of a step is slots 2p, 2p + 1, adjacent, so a
// pair is one m x 2w operand. Step 3 writes each half of a pair's result
// straight to its slot of the next step in a second buffer (the circle
// method's fixed permutation, round_robin.h), so no data moves besides the
// GEMMs, and after each whole sweep every slot is back in place.
#pragma once

#include <ATen/ATen.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "host_device.h"
#include "engine/engine_types.h"

namespace jsvd {
namespace cuda {

struct GemmShape {
  int64_t m = 0, n = 0;   // the matrix (tall orientation)
  int64_t w = 0;          // block width
  int64_t pairs = 0;      // P: pairs per step (k = 2P blocks)
  int64_t split = 1;      // row chunks of the Gram GEMMs
  int64_t m_pad = 0;      // rows of A's work buffer (a multiple of split)
  int64_t n_pad = 0;      // columns (and V's rows): 2P w
  JSVD_HOST_DEVICE int64_t c() const { return 2 * w; }
  JSVD_HOST_DEVICE int64_t chunk() const { return m_pad / split; }
};

// The work layout of `batch` m x n matrices at width w on a GPU of `sm_count` SMs.
GemmShape gemm_shape(int64_t m, int64_t n, int64_t w, int64_t batch, int sm_count);

// Widest block pair the Gram EVD takes at this level (shared memory).
constexpr int kGemmMaxPair = 64;

// One group of matrices of one shape at the GEMM level, for one call: its
// work buffers live from the constructor (copy in, V = I) to finish (copy
// back into args.A and args.Vw, in the order the blocked levels' finalisation
// reads). `mats` lists the group's matrices (nullptr: all of a uniform batch).
template <typename T>
class GemmLevel {
 public:
  GemmLevel(const EngineArgs<T>& args, const int32_t* mats, int nmats, const GemmShape& shape, int inner_sweeps,
            const at::Device& device, cudaStream_t stream);
  // One sweep: 2P - 1 steps.
  void sweep(const EngineArgs<T>& args, cudaStream_t stream);
  void finish(const EngineArgs<T>& args, cudaStream_t stream);

 private:
  GemmShape g_;
  const int32_t* mats_;
  int nmats_, inner_sweeps_;
  bool uv_;
  int cur_ = 0;  // the buffer holding the current step's input
  at::Tensor xa_[2], xv_[2], gram_, rot_, tables_;
  // The pointer tables in tables_ (cuBLAS's const double* const[] / double* const[]).
  const double* const* t_gram_a_[2];
  double* const* t_gram_c_;
  const double* const* t_upd_a_[2];
  const double* const* t_upd_j_;
  double* const* t_upd_c_[2];
  const double* const* t_vupd_a_[2];
  double* const* t_vupd_c_[2];
};

// Launchers (gemm_level_kernels.cu).
template <typename T>
void launch_gemm_copy(const EngineArgs<T>& args, const int32_t* mats, int nmats, const GemmShape& g, double* xa,
                      double* xv, bool in, cudaStream_t stream);
// The pointer tables of steps 1 and 3 for both buffers (layout: GemmLevel's
// constructor).
void launch_gemm_tables(const GemmShape& g, int nmats, double* const* xa, double* const* xv, double* gram,
                        double* rot, void** tables, cudaStream_t stream);
// Step 2: each pair's J (the identity when its matrix has converged or the
// pair is orthogonal) from the sum of its split partial Gram matrices.
template <typename T>
void launch_gemm_pair_evd(const EngineArgs<T>& args, const int32_t* mats, int nmats, const GemmShape& g,
                          const double* gram, double* rot, int inner_sweeps, cudaStream_t stream);

}  // namespace cuda
}  // namespace jsvd
