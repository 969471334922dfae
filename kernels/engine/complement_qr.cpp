#include "engine/complement_qr.h"

#include <ATen/ops/eye.h>
#include <ATen/ops/geqrf.h>
#include <ATen/ops/ormqr.h>

#include <algorithm>

namespace jsvd {
namespace cuda {
namespace {

constexpr double kGreedyPerSecond = 3e9;   // p (ucols² - q²) a second, one block (H200)
constexpr double kQrSecondsPerMatrix = 1e-3;

// Ut: (B, ucols, p), row c the packed column c of each matrix's U. Fills rows q.. from the QR of rows ..q.
void complete_rows(const at::Tensor& Ut, int64_t q) {
  const int64_t B = Ut.size(0), uc = Ut.size(1), p = Ut.size(2);
  const at::Tensor thin = Ut.narrow(1, 0, q).transpose(1, 2);  // (B, p, q): U_q
  auto [a, tau] = at::geqrf(thin);
  // Q's columns q .. uc - 1: Q applied to those of the identity.
  const at::Tensor E = at::eye(p, Ut.options()).narrow(1, q, uc - q).expand({B, p, uc - q});
  Ut.narrow(1, q, uc - q).copy_(at::ormqr(a, tau, E, /*left=*/true, /*transpose=*/false).transpose(1, 2));
}

}  // namespace

bool complement_by_qr(int64_t p, int64_t q, int64_t ucols, size_t elem, int64_t batch, const DeviceLimits& lim) {
  if (ucols <= q) return false;
  const size_t greedy_smem = static_cast<size_t>(p) * (sizeof(double) + elem) + static_cast<size_t>(ucols) * elem;
  if (greedy_smem > lim.smem_per_block) return true;
  const int64_t waves = (batch + lim.sm_count - 1) / std::max(1, lim.sm_count);
  const double greedy = static_cast<double>(waves) * static_cast<double>(p) *
                        (static_cast<double>(ucols) * ucols - static_cast<double>(q) * q) / kGreedyPerSecond;
  return greedy > static_cast<double>(batch) * kQrSecondsPerMatrix;
}

void complete_by_qr(const at::Tensor& U, const at::Tensor& rank, const PackedBatch& b, const std::vector<int64_t>& mats) {
  if (b.uniform && mats.empty()) {
    const int64_t B = b.size(), p = b.p(0), q = b.q(0), uc = b.uc(0);
    complete_rows(U.narrow(0, 0, B * uc * p).view({B, uc, p}), q);
    rank.fill_(static_cast<int>(uc));
    return;
  }
  for (const int64_t k : mats) {
    const int64_t p = b.p(k), q = b.q(k), uc = b.uc(k);
    complete_rows(U.narrow(0, b.u_at(k), uc * p).view({1, uc, p}), q);
    rank.narrow(0, k, 1).fill_(static_cast<int>(uc));
  }
}

}  // namespace cuda
}  // namespace jsvd
