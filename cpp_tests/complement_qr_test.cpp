// U's completion by QR (csrc/complement_qr.h), on CPU tensors: both engines call it on their packed U
// buffer, the CUDA engine from each matrix's own rank (a zero matrix: r = 0), grouping a uniform batch's
// matrices by (r, cols); and from the zero columns it finds itself (svd_ex). Each case checks that the
// given columns are kept, and that U is orthonormal.
// Exit status: 0 if every check passes.
#include <ATen/ATen.h>

#include <cstdio>
#include <utility>
#include <vector>

#include "complement_qr.h"

namespace {

using jsvd::CompletionJob;
using jsvd::PackedBatch;

int failures = 0;

void check(bool ok, const char* what, double value) {
  std::printf("  %-58s %.2e  %s\n", what, value, ok ? "ok" : "FAIL");
  if (!ok) ++failures;
}

// Matrix k's U (p x uc, column-major in the packed buffer) as a p x uc tensor view.
at::Tensor u_of(const at::Tensor& U, const PackedBatch& b, int64_t k) {
  return U.narrow(0, b.u_at(k), b.uc(k) * b.p(k)).view({b.uc(k), b.p(k)}).t();
}

// Fills matrix k's first r columns with orthonormal ones (and zeros after, as the engines leave them).
void seed_columns(const at::Tensor& U, const PackedBatch& b, int64_t k, int64_t r, at::Generator& g) {
  const at::Tensor u = u_of(U, b, k);
  u.zero_();
  if (r == 0) return;
  const at::Tensor q = std::get<0>(at::linalg_qr(at::randn({b.p(k), r}, g, U.options())));
  u.narrow(1, 0, r).copy_(q);
}

// U's packed buffer, each matrix's first ranks[k] columns orthonormal and zeros after; and a copy of it.
std::pair<at::Tensor, at::Tensor> seeded(const PackedBatch& b, const std::vector<int64_t>& ranks, at::ScalarType dt,
                                         uint64_t seed) {
  at::Generator g = at::detail::createCPUGenerator(seed);
  const at::Tensor U = at::zeros({b.u_numel}, at::TensorOptions().dtype(dt));
  for (int64_t k = 0; k < b.size(); ++k) seed_columns(U, b, k, ranks[k], g);
  return {U, U.clone()};
}

// Every matrix's first `cols` columns (0: all of them) orthonormal, and its first ranks[k] as given.
void check_completed(const char* name, const at::Tensor& U, const at::Tensor& before, const PackedBatch& b,
                     const std::vector<int64_t>& ranks, int64_t cols) {
  const double tol = (U.scalar_type() == at::kDouble ? 1e-13 : 1e-5);
  double orth = 0, kept = 0;
  for (int64_t k = 0; k < b.size(); ++k) {
    const int64_t c = cols > 0 ? cols : b.uc(k);
    const at::Tensor u = u_of(U, b, k).narrow(1, 0, c).to(at::kDouble);
    orth = std::max(orth, (u.t().matmul(u) - at::eye(c, u.options())).norm().item<double>());
    if (ranks[k] > 0)
      kept = std::max(kept, (u.narrow(1, 0, ranks[k]) - u_of(before, b, k).narrow(1, 0, ranks[k]).to(at::kDouble))
                                .abs().max().item<double>());
  }
  std::printf("%s\n", name);
  check(orth <= tol, "||U^T U - I||_F of the completed columns, every matrix", orth);
  check(kept == 0, "the given columns are kept", kept);
}

// complete_jobs_by_qr from each matrix's rank to its ucols.
void run(const char* name, const PackedBatch& b, const std::vector<int64_t>& ranks, at::ScalarType dt) {
  const auto [U, before] = seeded(b, ranks, dt, 7);
  std::vector<CompletionJob> jobs;
  for (int64_t k = 0; k < b.size(); ++k)
    if (ranks[k] < b.uc(k)) jobs.push_back({k, ranks[k], b.uc(k)});
  jsvd::complete_jobs_by_qr(U, b, jobs);
  check_completed(name, U, before, b, ranks, 0);
}

// complete_zero_columns_by_qr: each matrix's first q columns orthonormal up to its rank and zero after,
// the ranks not given.
void run_zero_columns(const char* name, const PackedBatch& b, const std::vector<int64_t>& ranks, at::ScalarType dt) {
  const auto [U, before] = seeded(b, ranks, dt, 11);
  jsvd::complete_zero_columns_by_qr(U.view({b.size(), b.uc(0), b.p(0)}).narrow(1, 0, b.q(0)));
  check_completed(name, U, before, b, ranks, b.q(0));
}

}  // namespace

int main() {
  // A uniform batch, full U (ucols = p): a zero matrix, two of one rank (gathered), one of another, one full.
  run("uniform 5 x 40x25, full, ranks 0 7 7 12 25", PackedBatch::uniform_of(5, 40, 25, true), {0, 7, 7, 12, 25},
      at::kDouble);
  // The whole batch of one rank, in place; float32.
  run("uniform 3 x 64x64, ranks 3 3 3 (float32)", PackedBatch::uniform_of(3, 64, 64, false), {3, 3, 3}, at::kFloat);
  // A list: thin and full members.
  run("list 30x10 full, 50x20 full, 9x9", PackedBatch::make({30, 50, 9}, {10, 20, 9}, true), {10, 4, 0},
      at::kDouble);
  // Zero columns found by the QR itself (svd_ex's tall matrices): ranks 1, 0, 8 (full rank), 3.
  run_zero_columns("zero columns, uniform 4 x 300x8, ranks 1 0 8 3", PackedBatch::uniform_of(4, 300, 8, false),
                   {1, 0, 8, 3}, at::kDouble);
  run_zero_columns("zero columns, uniform 2 x 500x6 full, ranks 2 5 (float32)", PackedBatch::uniform_of(2, 500, 6, true),
                   {2, 5}, at::kFloat);
  std::printf("%s\n", failures ? "FAILED" : "all passed");
  return failures ? 1 : 0;
}
