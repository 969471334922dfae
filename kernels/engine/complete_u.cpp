#include "engine/complete_u.h"

#include <ATen/ops/from_blob.h>

#include <algorithm>
#include <vector>

#include "complement_qr.h"
#include "levels/blocked/blocked_steps.h"

namespace jsvd {
namespace cuda {
namespace {

// p (ucols² - r²) a second, one block: 2e10 with 16 candidates a round (H100 at 97dd7b9, svd_ex of a
// rank-one 1024² matrix: its completion ~38 ms in float32, ~48 in float64; 3e9 one at a time, H200)
constexpr double kGreedyPerSecond = 2e10;
constexpr double kQrSecondsPerMatrix = 1e-3;

// Whether the greedy kernel holds a p-row column (one candidate a round).
bool greedy_fits(int64_t p, int64_t cols, size_t elem, const DeviceLimits& lim) {
  return complete_smem(p, cols, 1, elem) + kCompleteStaticSmem <= lim.smem_per_block;
}

}  // namespace

bool complement_by_qr(int64_t p, int64_t r, int64_t cols, size_t elem, int64_t batch, const DeviceLimits& lim) {
  if (cols <= r) return false;
  if (!greedy_fits(p, cols, elem, lim)) return true;
  const int64_t waves = (batch + lim.sm_count - 1) / std::max(1, lim.sm_count);
  const double greedy = static_cast<double>(waves) * static_cast<double>(p) *
                        (static_cast<double>(cols) * cols - static_cast<double>(r) * r) / kGreedyPerSecond;
  return greedy > static_cast<double>(batch) * kQrSecondsPerMatrix;
}

template <typename T>
void complete_u(const EngineArgs<T>& args, const at::Tensor& U, const at::Tensor& rank, const PackedBatch& b,
                const SvdOptions& opt, const DeviceLimits& lim, int64_t max_p, int64_t max_cols, cudaStream_t stream) {
  const int64_t N = b.size(), M = b.uniform ? 1 : N;  // (a uniform batch: matrix 0 stands for all)
  const size_t es = sizeof(T);
  const bool full = opt.full_matrices;
  const auto cols_of = [&](int64_t k) { return full ? b.uc(k) : b.q(k); };
  // svd and svdvals read the ranks where a greedy completion from rank 0 would be slow: the QR then
  // completes each matrix from its own rank (a rank-deficient or zero matrix: 1024² float32 307 ms in the
  // greedy, H200 bench_corpus at 98cbd92). svd_ex, which never reads, completes U's first q columns
  // greedily, and the extra ones of full_matrices by the QR where it pays.
  bool read = false;
  for (int64_t k = 0; opt.may_sync && !read && k < M; ++k) read = complement_by_qr(b.p(k), 0, cols_of(k), es, 1, lim);
  std::vector<int32_t> r_host;
  if (read) {
    const at::Tensor h = rank.to(at::kCPU);
    r_host.assign(h.const_data_ptr<int32_t>(), h.const_data_ptr<int32_t>() + N);
  }
  if (!read && !greedy_fits(b.p(0), b.q(0), es, lim)) {
    // svd_ex (which reads no rank) of matrices too tall for the greedy kernel (float32 from about 19000
    // rows: its launch failed): the zero columns by a QR on the device, then full_matrices' extra ones.
    // (A list never gets here: svd_varlen reads.)
    TORCH_CHECK(b.uniform, "jsvd internal: complete_u without the ranks of a list");
    const at::Tensor Ut = U.narrow(0, 0, N * b.uc(0) * b.p(0)).view({N, b.uc(0), b.p(0)});
    complete_zero_columns_by_qr(Ut.narrow(1, 0, b.q(0)));
    if (full) complete_columns_by_qr(Ut, b.q(0));
    return;
  }
  // Where each matrix's completion starts (clamped: a matrix with NaN input has no rank of its own).
  const auto from = [&](int64_t k) -> int64_t {
    return read ? std::clamp<int64_t>(r_host[k], 0, b.q(k)) : b.q(k);
  };
  // The jobs: a matrix is weighed against as many others as would take the QR alone (their greedy
  // completions run side by side, their QRs one after another).
  const int64_t count = read ? N : M;
  int64_t alone = 0;
  for (int64_t k = 0; k < count; ++k) alone += complement_by_qr(b.p(k), from(k), cols_of(k), es, 1, lim);
  std::vector<CompletionJob> jobs;
  int64_t rest_p = 0, rest_cols = 0, max_q = 0;  // (the greedy's shared memory without the QR's matrices)
  for (int64_t k = 0; k < count; ++k) {
    max_q = std::max(max_q, b.q(k));
    if (alone > 0 && complement_by_qr(b.p(k), from(k), cols_of(k), es, b.uniform && !read ? N : alone, lim)) {
      jobs.push_back({k, from(k), cols_of(k)});
    } else if (!read || from(k) < cols_of(k)) {
      // (with the ranks read, only the matrices the greedy has work in size its shared memory: a
      // full-rank matrix too tall for it, e.g. the Gram start's 400000 x 16, made its launch fail)
      rest_p = std::max(rest_p, b.p(k));
      rest_cols = std::max(rest_cols, cols_of(k));
    }
  }
  if (jobs.empty()) {
    if (!read)
      launch_complete(args, /*every matrix*/ nullptr, static_cast<int>(N), max_p, max_cols, full,
                      lim.smem_per_block, stream);
    else if (rest_cols > 0)
      launch_complete(args, nullptr, static_cast<int>(N), rest_p, rest_cols, full, lim.smem_per_block, stream);
    return;
  }
  if (!read) {
    // U's first q columns of every matrix (rank-deficient ones) first; a uniform batch's one job stands
    // for every matrix
    launch_complete(args, nullptr, static_cast<int>(N), max_p, max_q, /*full=*/false, lim.smem_per_block, stream);
    if (b.uniform) {
      for (int64_t k = 1; k < N; ++k) jobs.push_back({k, b.q(0), cols_of(0)});
      rest_p = 0;
    }
  }
  complete_jobs_by_qr(U, b, jobs);
  if (rest_p == 0) return;
  // The others by the greedy: the jobs' matrices count as complete.
  if (read) {
    for (const CompletionJob& j : jobs) r_host[j.k] = static_cast<int32_t>(j.cols);
    rank.copy_(at::from_blob(r_host.data(), {N}, at::TensorOptions().dtype(at::kInt)));
  } else {
    for (const CompletionJob& j : jobs) rank.narrow(0, j.k, 1).fill_(static_cast<int>(j.cols));
  }
  launch_complete(args, nullptr, static_cast<int>(N), rest_p, rest_cols, full, lim.smem_per_block, stream);
}

template void complete_u<float>(const EngineArgs<float>&, const at::Tensor&, const at::Tensor&, const PackedBatch&,
                                const SvdOptions&, const DeviceLimits&, int64_t, int64_t, cudaStream_t);
template void complete_u<double>(const EngineArgs<double>&, const at::Tensor&, const at::Tensor&, const PackedBatch&,
                                 const SvdOptions&, const DeviceLimits&, int64_t, int64_t, cudaStream_t);

}  // namespace cuda
}  // namespace jsvd
