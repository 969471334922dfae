#include "engine/complete_u.h"

#include <algorithm>
#include <vector>

#include "complement_qr.h"
#include "levels/blocked/blocked_steps.h"

namespace jsvd {
namespace cuda {
namespace {

constexpr double kGreedyPerSecond = 3e9;  // p (ucols² - q²) a second, one block (H200)
constexpr double kQrSecondsPerMatrix = 1e-3;

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

template <typename T>
void complete_u(const EngineArgs<T>& args, const at::Tensor& U, const at::Tensor& rank, const PackedBatch& b,
                bool full_matrices, const DeviceLimits& lim, int64_t max_p, int64_t max_cols, cudaStream_t stream) {
  const int64_t N = b.size();
  const size_t es = sizeof(T);
  // The matrices whose extra columns the QR completes: all or none of a uniform batch; a list's member is
  // weighed against as many others as would take the QR alone (their greedy completions run side by
  // side, their QRs one after another).
  bool all = false;
  std::vector<int64_t> some;
  int64_t rest_p = 0, rest_cols = 0, max_q = 0;  // (the greedy's shared memory without them)
  if (full_matrices && b.uniform) {
    all = complement_by_qr(b.p(0), b.q(0), b.uc(0), es, N, lim);
    max_q = b.q(0);
  } else if (full_matrices) {
    int64_t alone = 0;
    for (int64_t k = 0; k < N; ++k) alone += complement_by_qr(b.p(k), b.q(k), b.uc(k), es, 1, lim);
    for (int64_t k = 0; k < N; ++k) {
      max_q = std::max(max_q, b.q(k));
      if (alone > 0 && complement_by_qr(b.p(k), b.q(k), b.uc(k), es, alone, lim)) {
        some.push_back(k);
      } else {
        rest_p = std::max(rest_p, b.p(k));
        rest_cols = std::max(rest_cols, b.uc(k));
      }
    }
  }
  if (!all && some.empty()) {
    launch_complete(args, /*every matrix*/ nullptr, static_cast<int>(N), max_p, max_cols, full_matrices, stream);
    return;
  }
  // U's first q columns of every matrix (rank-deficient ones), the QR's columns, then the others' extra ones.
  launch_complete(args, nullptr, static_cast<int>(N), max_p, max_q, /*full=*/false, stream);
  if (all) {
    const int64_t p = b.p(0), uc = b.uc(0);
    complete_columns_by_qr(U.narrow(0, 0, N * uc * p).view({N, uc, p}), b.q(0));
    return;
  }
  for (const int64_t k : some) {
    const int64_t p = b.p(k), uc = b.uc(k);
    complete_columns_by_qr(U.narrow(0, b.u_at(k), uc * p).view({1, uc, p}), b.q(k));
    rank.narrow(0, k, 1).fill_(static_cast<int>(uc));  // (the next launch leaves it)
  }
  if (rest_p > 0) launch_complete(args, nullptr, static_cast<int>(N), rest_p, rest_cols, /*full=*/true, stream);
}

template void complete_u<float>(const EngineArgs<float>&, const at::Tensor&, const at::Tensor&, const PackedBatch&,
                                bool, const DeviceLimits&, int64_t, int64_t, cudaStream_t);
template void complete_u<double>(const EngineArgs<double>&, const at::Tensor&, const at::Tensor&, const PackedBatch&,
                                 bool, const DeviceLimits&, int64_t, int64_t, cudaStream_t);

}  // namespace cuda
}  // namespace jsvd
