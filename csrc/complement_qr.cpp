#include "complement_qr.h"

#include <ATen/ops/eye.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/geqrf.h>
#include <ATen/ops/linalg_householder_product.h>
#include <ATen/ops/where.h>
#include <ATen/ops/ormqr.h>
#include <ATen/ops/tensor.h>

#include <map>
#include <utility>

namespace jsvd {

void complete_columns_by_qr(const at::Tensor& Ut, int64_t r) {
  const int64_t B = Ut.size(0), uc = Ut.size(1), p = Ut.size(2);
  if (uc <= r) return;
  // (only the identity's columns that are used: a p x p one was 484 MB at p = 11008 in float32)
  if (r == 0) {  // (nothing to be orthogonal to: the identity's first columns)
    Ut.copy_(at::eye(uc, p, Ut.options()).expand({B, uc, p}));
    return;
  }
  auto [a, tau] = at::geqrf(Ut.narrow(1, 0, r).transpose(1, 2));  // U_r: (B, p, r)
  // Q's columns r .. uc - 1: Q applied to those of the identity.
  at::Tensor E = at::zeros({p, uc - r}, Ut.options());
  E.narrow(0, r, uc - r).fill_diagonal_(1);
  Ut.narrow(1, r, uc - r).copy_(at::ormqr(a, tau, E.expand({B, p, uc - r}), /*left=*/true, /*transpose=*/false).transpose(1, 2));
}

void complete_zero_columns_by_qr(const at::Tensor& Ut) {
  auto [a, tau] = at::geqrf(Ut.transpose(1, 2));  // (B, p, q)
  const at::Tensor Q = at::linalg_householder_product(a, tau);  // Q's first q columns
  const at::Tensor zero = a.diagonal(0, -2, -1).abs().lt(0.5).unsqueeze(1);  // (B, 1, q): R_jj = 0
  Ut.copy_(at::where(zero, Q, Ut.transpose(1, 2)).transpose(1, 2));
}

void complete_jobs_by_qr(const at::Tensor& U, const PackedBatch& b, const std::vector<CompletionJob>& jobs) {
  if (!b.uniform) {
    for (const CompletionJob& j : jobs) {
      const at::Tensor Ut = U.narrow(0, b.u_at(j.k), b.uc(j.k) * b.p(j.k)).view({1, b.uc(j.k), b.p(j.k)});
      complete_columns_by_qr(Ut.narrow(1, 0, j.cols), j.r);
    }
    return;
  }
  const int64_t N = b.size(), uc = b.uc(0), p = b.p(0);
  const at::Tensor all = U.narrow(0, 0, N * uc * p).view({N, uc, p});
  std::map<std::pair<int64_t, int64_t>, std::vector<int64_t>> groups;  // (r, cols) -> matrices
  for (const CompletionJob& j : jobs) groups[{j.r, j.cols}].push_back(j.k);
  for (const auto& g : groups) {
    const int64_t r = g.first.first, cols = g.first.second;
    if (static_cast<int64_t>(g.second.size()) == N) {  // (the whole batch: in place)
      complete_columns_by_qr(all.narrow(1, 0, cols), r);
      continue;
    }
    const at::Tensor idx = at::tensor(g.second, at::TensorOptions().dtype(at::kLong)).to(U.device());
    const at::Tensor sub = all.index_select(0, idx).narrow(1, 0, cols).contiguous();
    complete_columns_by_qr(sub, r);
    all.narrow(1, 0, cols).index_copy_(0, idx, sub);
  }
}

}  // namespace jsvd
