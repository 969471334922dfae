// The QR preconditioning of a variable-size list's members (issue 20: svd_varlen lists take the QR as
// uniform batches do). The members that qr_choice would precondition in a uniform batch of their shape,
// and that the one-launch QR takes (qr_whole_smem.h), go through it in one launch, which writes each
// one's X = R^T (R2^T for float64) over its own W. The Jacobi then runs on the whole list at once: the
// QR'd members as their q x q X beside the others as they are, so that both share its launch groups.
// It writes those members' factors past the end of the list's own results, where U and V are then made
// from them (one launch each), so that an application never reads what it writes.
#include "qr/qr_precondition.h"

#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>

#include <cstring>
#include <vector>

#include "engine/device_upload.h"
#include "engine/engine_types.h"
#include "engine/finite_check.h"
#include "engine/launch_groups.h"
#include "qr/qr_whole_smem.h"
#include "tuning_knobs.h"

namespace jsvd {
namespace cuda {

bool qr_list_member(int64_t rows, int64_t cols, size_t elem, int64_t count, const DeviceLimits& lim) {
  // Off unless JSVD_LIST_QR=1: on 8 random lists it was slower on 6 (H100, float32 100 x [200,400]x[32,64]:
  // 1.16 -> 1.67 ms, float64 156 x [65,128]: 6.7 -> 7.8; faster on float64 200 x [100,300]x[16,48],
  // 2.16 -> 1.67; docs/experiments.md, stop 42). The members it takes fit one block, where the list's
  // whole-matrix Jacobi, its rows spread over lanes, costs about what it costs on their R^T; the QR's
  // launch and the applications add to the list's time. Its win would be members too large for one
  // block (their Jacobi at the blocked levels), which need a blocked variable-size QR.
  return knobs().list_qr && rows >= cols && cols >= 1 && qr_choice(rows, cols, elem, /*uniform=*/true, count, lim).whole;
}

std::vector<int64_t> qr_list_members(const PackedBatch& b, size_t elem, const DeviceLimits& lim) {
  std::vector<int64_t> ks;
  if (b.uniform) return ks;
  for (int64_t k = 0; k < b.size(); ++k)
    if (qr_list_member(b.p(k), b.q(k), elem, b.size(), lim)) ks.push_back(k);
  return ks;
}

namespace {

template <typename T>
CoreResult qr_list(const at::Tensor& A, const PackedBatch& b, const SvdOptions& opt, const std::vector<int64_t>& ks,
                   const Engine& engine) {
  const int64_t N = b.size(), n = static_cast<int64_t>(ks.size());
  const bool uv = opt.compute_uv, f64 = A.scalar_type() == at::kDouble;
  // As the uniform path (qr_precondition.cpp): float64 sorts its rows and takes the second QR.
  const bool twice = qr_twice_on(f64), row_sort = qr_row_sort_on(f64);
  // The Jacobi's list: member k's X in place of its W (q x q at the same offset), its factors at the
  // ends of U and V. The members' offsets into the QR's buffers, consecutive.
  PackedBatch xb = b;
  std::vector<QrMember> m(n);
  int64_t y = 0, x = 0, t = 0, r = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = ks[i], p = b.p(k), q = b.q(k);
    xb.rows[k] = xb.ucols[k] = q;
    xb.u_off[k] = xb.u_numel;
    xb.v_off[k] = xb.v_numel;
    // One QR: X = U_x S V_x^T gives U from V_x and V from U_x; two: U from U_x, V from V_x.
    m[i] = QrMember{b.a_at(k), y, x, t, r, twice ? xb.u_numel : xb.v_numel, twice ? xb.v_numel : xb.u_numel,
                    b.u_at(k), b.v_at(k), b.s_at(k), static_cast<int32_t>(p), static_cast<int32_t>(q),
                    static_cast<int32_t>(b.uc(k)), 0};
    xb.u_numel += q * q;
    xb.v_numel += q * q;
    y += p * q;
    x += q * q;
    t += q;
    r += p;
  }
  // One upload: the members, then every matrix's descriptor (the finite check's).
  std::vector<uint8_t> host(n * sizeof(QrMember) + N * sizeof(MatrixDesc));
  std::memcpy(host.data(), m.data(), n * sizeof(QrMember));
  for (int64_t k = 0; k < N; ++k) {
    const MatrixDesc d = matrix_desc_of(b, k);
    std::memcpy(host.data() + n * sizeof(QrMember) + k * sizeof(MatrixDesc), &d, sizeof(MatrixDesc));
  }
  const at::Tensor table = upload_bytes(host.data(), host.size(), A.device());
  const uint8_t* dev = table.data_ptr<uint8_t>();
  const QrListLaunch l = qr_list_launch(reinterpret_cast<const QrMember*>(dev), m, sizeof(T), row_sort && uv);
  const auto opts = A.options();
  const at::Tensor scale = at::empty({n}, opts), perm = at::empty({t}, opts.dtype(at::kLong));
  at::Tensor Yq, Sf, Y2, tau2, rowperm;
  if (uv) {
    Yq = at::empty({y}, opts);
    Sf = at::empty({x}, opts);
    if (twice) {
      Y2 = at::empty({x}, opts);
      tau2 = at::empty({t}, opts);
    }
    if (row_sort) rowperm = at::empty({r}, opts.dtype(at::kInt));
  }
  auto ptr = [](const at::Tensor& z) { return z.defined() ? z.data_ptr<T>() : nullptr; };
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  QrWholeArgs<T> qa;
  qa.A = A.const_data_ptr<T>();
  qa.X = A.data_ptr<T>();
  qa.Y = ptr(Yq);
  qa.sort = knobs().qr_sort;
  qa.row_sort = row_sort;
  qa.twice = twice;
  qa.keep = uv;
  qa.S = ptr(Sf);
  qa.Y2 = ptr(Y2);
  qa.tau2 = ptr(tau2);
  qa.perm = perm.data_ptr<int64_t>();
  qa.rowperm = rowperm.defined() ? rowperm.data_ptr<int32_t>() : nullptr;
  qa.scale = scale.data_ptr<T>();
  qa.members = l.members;
  launch_qr_whole_list(qa, l, stream);

  SvdOptions xo = opt;
  xo.want_v = uv;  // (both factors of X make U and V)
  CoreResult rx = engine(A, xb, xo);
  launch_scale_s_list(rx.S.data_ptr<T>(), scale.const_data_ptr<T>(), l, stream);
  if (uv) {
    T* const U = rx.U.data_ptr<T>();
    T* const V = rx.V.data_ptr<T>();
    launch_apply_wy_list<T>(Yq.const_data_ptr<T>(), Sf.const_data_ptr<T>(),
                            rowperm.defined() ? rowperm.const_data_ptr<int32_t>() : nullptr, twice ? U : V, U, l, stream);
    launch_apply_reflectors_list<T>(ptr(Y2), twice, ptr(tau2), twice ? V : U, V, perm.const_data_ptr<int64_t>(), l,
                                    stream);
  }
  // S times the scale and U = Q U_R are new: finite or flagged (as the uniform path).
  launch_flag_non_finite<T>(rx.S.data_ptr<T>(), uv ? rx.U.data_ptr<T>() : nullptr, nullptr, rx.info.data_ptr<int32_t>(),
                            reinterpret_cast<const MatrixDesc*>(dev + n * sizeof(QrMember)), MatrixDesc{},
                            static_cast<int>(N), stream);
  return rx;
}

}  // namespace

CoreResult svd_qr_list(const at::Tensor& A, const PackedBatch& b, const SvdOptions& opt,
                       const std::vector<int64_t>& members, const Engine& engine) {
  TORCH_CHECK(!b.uniform && A.dim() == 1 && A.is_contiguous() && !members.empty(),
              "jsvd internal: svd_qr_list needs a packed list");
  CoreResult r;
  AT_DISPATCH_FLOATING_TYPES(A.scalar_type(), "svd_qr_list", [&] { r = qr_list<scalar_t>(A, b, opt, members, engine); });
  return r;
}

}  // namespace cuda
}  // namespace jsvd
