// The Gram eigenvectors' start for a list's large members (list_start.h).
#include "precondition/list_start.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>

#include <algorithm>
#include <map>

#include "common/batched_gemm.h"
#include "engine/batched_copy.h"
#include "precondition/eigh_precondition.h"
#include "precondition/start_checks.h"
#include "precondition/syev_batched.h"
#include "tuning_knobs.h"

namespace jsvd {
namespace cuda {

std::vector<int64_t> list_start_members(const std::vector<int64_t>& rows, const std::vector<int64_t>& cols,
                                        size_t elem) {
  std::vector<int64_t> ks;
  if (knobs().list_start == 0 || knobs().eigh == 0 || !kHaveSyevBatched) return ks;
  int64_t large = 0;
  for (size_t k = 0; k < cols.size(); ++k) {
    if (syev_batched_square(rows[k], cols[k], elem)) {
      ks.push_back(static_cast<int64_t>(k));
      large += cols[k] >= kSyevBatchedLargeCols;
    }
  }
  if (knobs().list_start != 1 && static_cast<int64_t>(ks.size()) < syev_batched_min_batch(kEighMinCols, elem) &&
      large < syev_batched_min_batch(kSyevBatchedLargeCols, elem))
    ks.clear();
  return ks;
}

int64_t list_start_order(int64_t cols) {
  const int64_t width = knobs().list_start_class;
  return (cols + width - 1) / width * width;
}

namespace {

// One size class: its members (list indices), their order n (padded) and most rows P, V0 (B, n, n; columns
// by decreasing eigenvalue, the member's own first) and which members keep it.
struct StartClass {
  std::vector<int64_t> ks;
  std::vector<uint8_t> keep;
  int64_t n = 0, P = 0;
  at::Tensor V0;
};

template <typename T>
CoreResult list_start(const at::Tensor& A, const PackedBatch& b, const SvdOptions& opt, const std::vector<int64_t>& ks,
                      const Engine& jacobi) {
  const at::NoTF32Guard no_tf32;
  const bool f64 = A.scalar_type() == at::kDouble;
  const at::ScalarType dt = A.scalar_type();
  const auto dopts = A.options().dtype(at::kDouble);
  T* const a = A.data_ptr<T>();
  std::map<int64_t, StartClass> classes;
  for (const int64_t k : ks) {
    StartClass& c = classes[list_start_order(b.q(k))];
    c.ks.push_back(k);
    c.P = std::max(c.P, b.p(k));
  }
  std::vector<StartClass*> taken;
  for (auto& kv : classes) {
    StartClass& c = kv.second;
    const int64_t B = static_cast<int64_t>(c.ks.size()), n = kv.first, P = c.P;
    c.n = n;
    // W (B, n, P): member i's W (row j: column j of M) in its top-left q x p corner, zeros elsewhere
    const at::Tensor W = at::zeros({B, n, P}, dopts);
    double* const w = W.data_ptr<double>();
    std::vector<MatrixCopy> in;
    std::vector<int64_t> q(B);
    for (int64_t i = 0; i < B; ++i) {
      const int64_t k = c.ks[i], p = b.p(k);
      q[i] = b.q(k);
      in.push_back(MatrixCopy{a + b.a_at(k), w + i * n * P, q[i], p, p, 1, P, 1});
    }
    batched_copy_cuda(in, dt, at::kDouble, A.device());
    const at::Tensor G = at::empty({B, n, n}, dopts);
    bmm_into<double>(G, W, W.mT(), 1.0, 0.0);
    // The padding's diagonal: the member's largest for start_checks (its rule is on the member's own
    // columns), then -trace (below every eigenvalue of the member's G) for the solver.
    const at::Tensor qs = at::tensor(q, at::kLong).to(A.device(), /*non_blocking=*/true);
    const at::Tensor pad = at::arange(n, dopts.dtype(at::kLong)).unsqueeze(0) >= qs.unsqueeze(1);
    const at::Tensor d = G.diagonal(0, -2, -1);
    const at::Tensor tr = d.sum(-1, /*keepdim=*/true), top = d.amax(-1, /*keepdim=*/true);
    d.copy_(at::where(pad, top, d));
    const at::Tensor bad = at::zeros({B}, A.options().dtype(at::kInt));
    start_checks(G, start_limits(f64, n), bad);
    d.copy_(at::where(pad, -(tr + tr.eq(0).to(at::kDouble)), d));
    // (a declined member's G, which may hold NaN, replaced by I: the solver sees finite matrices only)
    const at::Tensor declined = bad.ne(0);
    G.copy_(at::where(declined.view({B, 1, 1}), at::eye(n, dopts).expand({B, n, n}), G));
    bool failed = false;
    at::Tensor ev;  // (B, n), increasing: the padding's first
    c.V0 = syev_batched(G, &failed, &ev, /*may_graph=*/false);
    if (failed) continue;
    at::Tensor keep = declined.logical_not();
    if (f64 && knobs().eigh_cond) {
      // (a member's least eigenvalue is entry n - q of its row)
      const at::Tensor least = ev.gather(1, (n - qs).unsqueeze(1)).squeeze(1);
      keep.logical_and_(least.ge(ev.select(-1, n - 1) * kEighMinEigRatioF64));
    }
    keep = keep.to(at::kByte).cpu();
    c.keep.assign(keep.const_data_ptr<uint8_t>(), keep.const_data_ptr<uint8_t>() + B);
    if (std::count(c.keep.begin(), c.keep.end(), 1) == 0) continue;
    // X = M V0, as packed X^T = V0^T W, over the member's W
    const at::Tensor X = times_v(W, c.V0);
    std::vector<MatrixCopy> out;
    for (int64_t i = 0; i < B; ++i) {
      const int64_t k = c.ks[i], p = b.p(k);
      if (c.keep[i])
        out.push_back(MatrixCopy{X.const_data_ptr<double>() + i * n * P, a + b.a_at(k), q[i], p, P, 1, p, 1});
    }
    batched_copy_cuda(out, at::kDouble, dt, A.device());
    taken.push_back(&c);
  }
  CoreResult r = jacobi(A, b, opt);
  if (!opt.compute_uv || !opt.want_v) return r;
  // V = V0 V_x; packed V^T = V_x^T V0^T, in float64 (eigh_precondition.cpp), the member's in the corner.
  T* const v = r.V.data_ptr<T>();
  for (StartClass* c : taken) {
    const int64_t B = static_cast<int64_t>(c->ks.size()), n = c->n;
    const at::Tensor Vx = at::zeros({B, n, n}, dopts), Vt = at::empty({B, n, n}, dopts);
    std::vector<MatrixCopy> in, out;
    for (int64_t i = 0; i < B; ++i) {
      const int64_t k = c->ks[i], q = b.q(k);
      if (!c->keep[i]) continue;
      in.push_back(MatrixCopy{v + b.v_at(k), Vx.data_ptr<double>() + i * n * n, q, q, q, 1, n, 1});
      out.push_back(MatrixCopy{Vt.const_data_ptr<double>() + i * n * n, v + b.v_at(k), q, q, n, 1, q, 1});
    }
    batched_copy_cuda(in, dt, at::kDouble, A.device());
    bmm_into<double>(Vt, Vx, c->V0.mT(), 1.0, 0.0);
    batched_copy_cuda(out, at::kDouble, dt, A.device());
  }
  return r;
}

}  // namespace

CoreResult svd_list_start(const at::Tensor& A, const PackedBatch& b, const SvdOptions& opt,
                          const std::vector<int64_t>& ks, const Engine& jacobi) {
  TORCH_CHECK(!b.uniform && A.dim() == 1 && A.is_contiguous() && !ks.empty() && opt.may_sync,
              "jsvd internal: svd_list_start needs a packed list and a call that may synchronise");
  CoreResult r;
  AT_DISPATCH_FLOATING_TYPES(A.scalar_type(), "svd_list_start",
                             [&] { r = list_start<scalar_t>(A, b, opt, ks, jacobi); });
  return r;
}

}  // namespace cuda
}  // namespace jsvd
