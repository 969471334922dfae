// orth_polish (orth_polish.h): the task list, and batched GEMMs where a factor exceeds a block.
#include "engine/orth_polish.h"

#include <algorithm>
#include <vector>

#include "engine/device_upload.h"

namespace jsvd {
namespace cuda {
namespace {

// One factor of every matrix of a uniform batch, as (N, cols, rows): its columns are the rows of
// this view into the result. Q <- Q - Q E / 2 where ||E||_F is small enough, else unchanged. (The
// correction is of order eps: TF32, where the caller allows it, computes it well enough.)
void polish_by_gemm(at::Tensor Qt) {
  const at::Tensor Qd = Qt.to(at::kDouble);
  at::Tensor E = at::bmm(Qd, Qd.transpose(1, 2));
  E.diagonal(0, 1, 2).sub_(1.0);
  const at::Tensor skip = at::linalg_vector_norm(E, 2, at::IntArrayRef{1, 2}).le(kPolishMaxDefect).logical_not_();
  // (a skipped matrix's correction zeroed, NaN included)
  Qt.sub_(at::bmm(E.to(at::kFloat), Qt).masked_fill_(skip.view({-1, 1, 1}), 0), 0.5);
}

}  // namespace

void orth_polish(const at::Tensor& U, const at::Tensor& V, const PackedBatch& b, cudaStream_t stream) {
  const int64_t N = b.size();
  if (N == 0 || !U.defined() || !V.defined() || U.scalar_type() != at::kFloat || !U.is_contiguous() ||
      !V.is_contiguous())
    return;
  if (b.uniform) {
    const int64_t p = b.p(0), q = b.q(0), uc = b.uc(0);
    if (q < kPolishMinCols) return;
    const size_t su = polish_smem_bytes(p, q), sv = polish_smem_bytes(q, q);
    const bool u_fits = su <= kPolishMaxSmem, v_fits = sv <= kPolishMaxSmem;
    if (!u_fits) polish_by_gemm(U.view({N, uc, p}).narrow(1, 0, q));
    if (!v_fits) polish_by_gemm(V.view({N, q, q}));
    if (v_fits) {
      const int nu = u_fits ? static_cast<int>(N) : 0;
      launch_orth_polish(U.data_ptr<float>(), V.data_ptr<float>(), nullptr, nu, nu + static_cast<int>(N),
                         static_cast<int>(q), PolishTask{p * uc, static_cast<int32_t>(p), static_cast<int32_t>(q)},
                         PolishTask{q * q, static_cast<int32_t>(q), static_cast<int32_t>(q)},
                         u_fits ? su : sv, stream);
    }
    return;
  }
  // A list: a task for each member's factor that one block holds, U's first.
  std::vector<PolishTask> tasks;
  tasks.reserve(2 * N);
  size_t smem = 0;
  int nu = 0, max_cols = 0;
  for (int pass = 0; pass < 2; ++pass) {
    for (int64_t k = 0; k < N; ++k) {
      const int64_t q = b.q(k), rows = pass == 0 ? b.p(k) : q;
      const size_t bytes = polish_smem_bytes(rows, q);
      if (q < kPolishMinCols || bytes > kPolishMaxSmem) continue;
      tasks.push_back(PolishTask{pass == 0 ? b.u_at(k) : b.v_at(k), static_cast<int32_t>(rows),
                                 static_cast<int32_t>(q)});
      smem = std::max(smem, bytes);
      max_cols = std::max(max_cols, static_cast<int>(q));
    }
    if (pass == 0) nu = static_cast<int>(tasks.size());
  }
  if (tasks.empty()) return;
  const at::Tensor dev = upload_bytes(tasks.data(), tasks.size() * sizeof(PolishTask), U.device());
  launch_orth_polish(U.data_ptr<float>(), V.data_ptr<float>(), reinterpret_cast<const PolishTask*>(dev.data_ptr()),
                     nu, static_cast<int>(tasks.size()), max_cols, PolishTask{}, PolishTask{}, smem, stream);
}

}  // namespace cuda
}  // namespace jsvd
