// jsvd::svd_varlen (a list of matrices) and jsvd::svd_varlen_packed (matrices
// described by a table over one buffer, as a nested tensor holds them): both
// pack their members into one PackedBatch, solve it with one engine call and
// move the factors out with one batched copy (or none).
#include "svd_wrapper.h"

#include "op_common.h"

#include <ATen/ops/from_blob.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <string>

namespace jsvd {

using at::Tensor;

namespace {

// A strided matrix inside a tensor: element offset from its data pointer,
// shape and strides (in elements). A vector is a one-column matrix.
struct Piece {
  const Tensor* base;
  int64_t offset, rows, cols, rs, cs;
};

Piece whole(const Tensor& t) {
  return t.dim() == 2 ? Piece{&t, 0, t.size(0), t.size(1), t.stride(0), t.stride(1)}
                      : Piece{&t, 0, t.size(0), 1, t.stride(0), 1};
}

Piece transposed(Piece p) {
  std::swap(p.rows, p.cols);
  std::swap(p.rs, p.cs);
  return p;
}

// dst <- src for every pair, by the backend's batched copy: no per-matrix
// tensor, one launch (or pass). All srcs share one dtype, as do all dsts.
void copy_all(const std::vector<std::pair<Piece, Piece>>& pairs, BatchedCopyFn batched_copy) {
  if (pairs.empty()) return;
  const Tensor& s0 = *pairs[0].first.base;
  const Tensor& d0 = *pairs[0].second.base;
  const int64_t se = s0.element_size(), de = d0.element_size();
  std::vector<MatrixCopy> copies;
  copies.reserve(pairs.size());
  for (const auto& [src, dst] : pairs) {
    copies.push_back(MatrixCopy{static_cast<const char*>(src.base->const_data_ptr()) + src.offset * se,
                                static_cast<char*>(dst.base->data_ptr()) + dst.offset * de, src.rows, src.cols,
                                src.rs, src.cs, dst.rs, dst.cs});
  }
  batched_copy(copies, s0.scalar_type(), d0.scalar_type(), d0.device());
}

// Tensors that are pieces of one buffer, each with a storage of its own that keeps the buffer's
// alive: svd_varlen's per-matrix results without an allocation or a copy each (2000 matrices: their
// 6000 allocations took about 7 ms of host time on the H100's host; issue 21). Disjoint pieces, so the
// results do not alias one another (torch.library.opcheck compares storages). Tensor.record_stream
// on a piece does not reach the buffer's allocation (documented in svd_varlen).
class PieceOf {
 public:
  explicit PieceOf(const Tensor& buffer) : buffer_(buffer) {}
  Tensor operator()(int64_t offset, c10::IntArrayRef sizes, c10::IntArrayRef strides) const {
    c10::StorageImpl* owner = buffer_.storage().unsafeGetStorageImpl();
    c10::raw::intrusive_ptr::incref(owner);
    return at::for_blob(static_cast<char*>(buffer_.data_ptr()) + offset * buffer_.element_size(), sizes)
        .strides(strides)
        .context(owner, [](void* o) { c10::raw::intrusive_ptr::decref(static_cast<c10::StorageImpl*>(o)); })
        .options(buffer_.options())
        .target_device(buffer_.device())
        .make_tensor();
  }
  // A (0,)-shaped tensor with a storage of its own and no allocation.
  static Tensor empty(const at::TensorOptions& o) {
    return at::for_blob(nullptr, {0}).options(o).target_device(o.device()).make_tensor();
  }

 private:
  Tensor buffer_;
};

// A list's members solved by one engine call per part: each shape group (list_shape_groups, core.h)
// as a uniform batch, and the rest as one list. part[i] / slot[i]: member i's part and its place in
// that part's pb; part -1 where min(m, n) == 0 (nothing to decompose). The work is queued, not
// waited for: the callers build their outputs first, then check().
struct ListSolve {
  struct Part {
    PackedBatch pb;
    Tensor packed;
    CoreResult r;
  };
  std::vector<int64_t> part, slot;
  std::vector<Part> parts;
  // Raises like svd_impl if any member's info < 0 (one host read for all parts).
  void check(const char* op, const SvdOptions& opt) const {
    if (parts.empty()) return;
    if (std::all_of(parts.begin(), parts.end(), [](const Part& pt) { return pt.r.info_read; })) return;
    std::vector<Tensor> infos;
    for (const Part& pt : parts) infos.push_back(pt.r.info);
    check_info(infos.size() == 1 ? infos[0] : at::cat(infos), op, opt);
  }
};

ListSolve solve_list(const std::vector<Piece>& members, const SvdOptions& opt, EngineFn engine,
                     BatchedCopyFn batched_copy) {
  ListSolve ls;
  const auto nmat = static_cast<int64_t>(members.size());
  ls.part.assign(nmat, -1);
  ls.slot.assign(nmat, -1);
  std::vector<int64_t> nz, rows, cols;  // the members with something to decompose, tall orientation
  for (int64_t i = 0; i < nmat; ++i) {
    const int64_t m = members[i].rows, n = members[i].cols;
    if (std::min(m, n) == 0) continue;
    nz.push_back(i);
    rows.push_back(std::max(m, n));
    cols.push_back(std::min(m, n));
  }
  if (nz.empty()) return ls;
  int32_t ngroups = 0;
  const std::vector<int32_t> group = list_shape_groups(rows, cols, &ngroups);
  std::vector<std::vector<int64_t>> prows(ngroups + 1), pcols(ngroups + 1);  // part ngroups: the rest
  for (size_t t = 0; t < nz.size(); ++t) {
    const int32_t g = group[t] >= 0 ? group[t] : ngroups;
    ls.part[nz[t]] = g;
    ls.slot[nz[t]] = static_cast<int64_t>(prows[g].size());
    prows[g].push_back(rows[t]);
    pcols[g].push_back(cols[t]);
  }
  if (prows[ngroups].empty()) prows.pop_back();  // (no rest)
  const Tensor& base = *members[0].base;
  const auto popts = base.options().dtype(compute_dtype(base.scalar_type()));
  ls.parts.resize(prows.size());  // (not resized again: the pieces below point at the parts' buffers)
  // (a shape group's options for its shape, for_shape; the rest's as given)
  const auto part_opt = [&](size_t g) {
    return static_cast<int32_t>(g) < ngroups ? for_shape(opt, prows[g][0], pcols[g][0]) : opt;
  };
  for (size_t g = 0; g < prows.size(); ++g) {
    auto& pt = ls.parts[g];
    pt.pb = static_cast<int32_t>(g) < ngroups
                ? PackedBatch::uniform_of(static_cast<int64_t>(prows[g].size()), prows[g][0], pcols[g][0],
                                          part_opt(g).full_matrices)
                : PackedBatch::make(prows[g], pcols[g], opt.full_matrices);
    pt.packed = at::empty({pt.pb.a_numel}, popts);
  }
  // A tall A goes in as A^T (column-major), a wide one as itself (see svd_ex_common); every part's
  // packing in one batched copy.
  std::vector<std::pair<Piece, Piece>> in;
  in.reserve(nz.size());
  for (const int64_t i : nz) {
    const auto& pt = ls.parts[ls.part[i]];
    const int64_t s = ls.slot[i];
    const Piece& a = members[i];
    in.emplace_back(a.rows >= a.cols ? transposed(a) : a,
                    Piece{&pt.packed, pt.pb.a_at(s), pt.pb.q(s), pt.pb.p(s), pt.pb.p(s), 1});
  }
  copy_all(in, batched_copy);
  for (size_t g = 0; g < ls.parts.size(); ++g) ls.parts[g].r = engine(ls.parts[g].packed, ls.parts[g].pb, part_opt(g));
  return ls;
}

// A result in the input's dtype (one cast for float16/bfloat16).
Tensor in_dtype(const Tensor& t, at::ScalarType dt) { return t.scalar_type() == dt ? t : t.to(dt); }

}  // namespace

std::tuple<std::vector<Tensor>, std::vector<Tensor>, std::vector<Tensor>> svd_varlen_impl(
    at::TensorList As, bool full_matrices, bool compute_uv, std::optional<double> tol,
    std::optional<int64_t> max_sweeps, EngineFn engine, BatchedCopyFn batched_copy) {
  constexpr const char* op = "jsvd.svd_varlen";
  TORCH_CHECK(!As.empty(), op, ": expected a non-empty list of matrices, but got an empty list");
  const auto nmat = static_cast<int64_t>(As.size());
  std::vector<Piece> members;
  members.reserve(nmat);
  for (int64_t i = 0; i < nmat; ++i) {
    check_matrix(As[i], op, "As", i, 2);
    TORCH_CHECK(As[i].scalar_type() == As[0].scalar_type(), op, ": all matrices must have the same dtype, but As[",
                i, "] has dtype ", As[i].scalar_type(), " and As[0] has dtype ", As[0].scalar_type());
    TORCH_CHECK(As[i].device() == As[0].device(), op, ": all matrices must be on the same device, but As[", i,
                "] is on ", As[i].device(), " and As[0] is on ", As[0].device());
    members.push_back(whole(As[i]));
  }
  // svd_varlen synchronises anyway (to raise on info < 0).
  const SvdOptions opt = make_options(full_matrices, compute_uv, tol, max_sweeps, /*may_sync=*/true, op);
  const auto opts = As[0].options();
  const ListSolve ls = solve_list(members, opt, engine, batched_copy);

  std::vector<Tensor> Us(nmat), Ss(nmat), Vhs(nmat);
  // Each matrix's results are pieces of its part's packed results with the strides svd gives them:
  // U F-contiguous, S and Vh C-contiguous.
  const auto dt = opts.dtype().toScalarType();
  std::vector<PieceOf> S_of, U_of, V_of;
  for (const auto& pt : ls.parts) {
    S_of.emplace_back(in_dtype(pt.r.S, dt));
    U_of.emplace_back(compute_uv ? in_dtype(pt.r.U, dt) : Tensor());
    V_of.emplace_back(compute_uv ? in_dtype(pt.r.V, dt) : Tensor());
  }
  for (int64_t i = 0; i < nmat; ++i) {
    const int64_t g = ls.part[i], s = ls.slot[i], m = As[i].size(0), n = As[i].size(1);
    if (g < 0) {
      Ss[i] = at::empty({0}, opts);
      if (compute_uv) std::tie(Us[i], Vhs[i]) = empty_factors({}, m, n, full_matrices, opts);
      continue;
    }
    const PackedBatch& pb = ls.parts[g].pb;
    const int64_t p = pb.p(s), q = pb.q(s), wu = pb.uc(s);
    Ss[i] = S_of[g](pb.s_at(s), {q}, {1});
    if (!compute_uv) continue;
    // Packed, U_w^T is wu x p and V_w^T q x q, row-major. Tall A = U_w S V_w^T: U = U_w, Vh = V_w^T;
    // wide A = V_w S U_w^T: U = V_w, Vh = U_w^T.
    if (m >= n) {
      Us[i] = U_of[g](pb.u_at(s), {p, wu}, {1, p});
      Vhs[i] = V_of[g](pb.v_at(s), {q, q}, {q, 1});
    } else {
      Us[i] = V_of[g](pb.v_at(s), {q, q}, {1, q});
      Vhs[i] = U_of[g](pb.u_at(s), {wu, p}, {p, 1});
    }
  }
  ls.check(op, opt);
  if (!compute_uv) {
    for (int64_t i = 0; i < nmat; ++i) {
      Us[i] = PieceOf::empty(opts);
      Vhs[i] = PieceOf::empty(opts);
    }
  }
  return {Us, Ss, Vhs};
}

std::tuple<Tensor, Tensor, Tensor> svd_varlen_packed_impl(const Tensor& values_in, const Tensor& members,
                                                          bool full_matrices, bool compute_uv,
                                                          std::optional<double> tol,
                                                          std::optional<int64_t> max_sweeps, EngineFn engine,
                                                          BatchedCopyFn batched_copy) {
  constexpr const char* op = "jsvd.svd_varlen_packed";
  TORCH_CHECK(values_in.dim() == 1, op, ": expected values to be a 1-D tensor, but got a ", values_in.dim(),
              "-D tensor");
  check_float_dtype(values_in.scalar_type(), op, "values");
  TORCH_CHECK(members.dim() == 2 && members.size(1) == 5 && members.scalar_type() == at::kLong &&
                  members.device().is_cpu(),
              op, ": expected members to be an int64 CPU tensor of shape (count, 5) (rows, cols, offset, row "
              "stride, column stride of each matrix), but got a ", members.scalar_type(), " tensor of shape ",
              members.sizes(), " on ", members.device());
  const int64_t nmat = members.size(0);
  TORCH_CHECK(nmat > 0, op, ": expected at least one matrix, but members has 0 rows");
  const Tensor values = values_in.contiguous();
  const Tensor table = members.contiguous();
  const int64_t* t = table.const_data_ptr<int64_t>();
  const int64_t numel = values.numel();
  std::vector<Piece> in(nmat);
  for (int64_t i = 0; i < nmat; ++i) {
    const int64_t* row = t + 5 * i;
    const int64_t m = row[0], n = row[1], off = row[2], rs = row[3], cs = row[4];
    TORCH_CHECK(m >= 0 && n >= 0 && off >= 0 && rs >= 0 && cs >= 0, op, ": members[", i,
                "] = (", m, ", ", n, ", ", off, ", ", rs, ", ", cs, ") has a negative entry");
    // the last element a matrix reads must lie inside values (never read past a buffer)
    TORCH_CHECK(m == 0 || n == 0 || off + (m - 1) * rs + (n - 1) * cs < numel, op, ": members[", i,
                "] = (", m, ", ", n, ", ", off, ", ", rs, ", ", cs, ") reaches past the end of values (",
                numel, " elements)");
    in[i] = Piece{&values, off, m, n, rs, cs};
  }
  const SvdOptions opt = make_options(full_matrices, compute_uv, tol, max_sweeps, /*may_sync=*/true, op);
  const ListSolve ls = solve_list(in, opt, engine, batched_copy);
  const auto opts = values.options();

  // The results, each matrix's C-contiguous in member order, copied out of the parts' packed factors
  // by one batched copy.
  int64_t u_numel = 0, s_numel = 0, v_numel = 0;
  for (const Piece& a : in) {
    const int64_t k = std::min(a.rows, a.cols);
    u_numel += a.rows * (full_matrices ? a.rows : k);
    s_numel += k;
    v_numel += (full_matrices ? a.cols : k) * a.cols;
  }
  Tensor S = at::empty({s_numel}, opts);
  Tensor U = at::empty({compute_uv ? u_numel : 0}, opts), Vh = at::empty({compute_uv ? v_numel : 0}, opts);
  std::vector<std::pair<Piece, Piece>> out;
  out.reserve(3 * in.size());
  int64_t uo = 0, so = 0, vo = 0;
  for (int64_t i = 0; i < nmat; ++i) {
    const int64_t m = in[i].rows, n = in[i].cols, k = std::min(m, n);
    const int64_t uc = full_matrices ? m : k, vr = full_matrices ? n : k;
    const int64_t g = ls.part[i], s = ls.slot[i];
    if (g < 0) {
      if (compute_uv && full_matrices) {  // the bases of the empty side: identities (empty_factors)
        if (m > 0) U.narrow(0, uo, m * m).view({m, m}).zero_().diagonal().fill_(1);
        if (n > 0) Vh.narrow(0, vo, n * n).view({n, n}).zero_().diagonal().fill_(1);
      }
    } else {
      const auto& pt = ls.parts[g];
      const PackedBatch& pb = pt.pb;
      const int64_t p = pb.p(s), q = pb.q(s), wu = pb.uc(s);
      out.emplace_back(Piece{&pt.r.S, pb.s_at(s), q, 1, 1, 1}, Piece{&S, so, q, 1, 1, 1});
      // As in svd_varlen_impl: tall A: U = U_w, Vh = V_w^T; wide A: U = V_w, Vh = U_w^T.
      if (compute_uv && m >= n) {
        out.emplace_back(Piece{&pt.r.U, pb.u_at(s), p, wu, 1, p}, Piece{&U, uo, m, uc, uc, 1});
        out.emplace_back(Piece{&pt.r.V, pb.v_at(s), q, q, q, 1}, Piece{&Vh, vo, vr, n, n, 1});
      } else if (compute_uv) {
        out.emplace_back(Piece{&pt.r.V, pb.v_at(s), q, q, 1, q}, Piece{&U, uo, m, uc, uc, 1});
        out.emplace_back(Piece{&pt.r.U, pb.u_at(s), wu, p, p, 1}, Piece{&Vh, vo, vr, n, n, 1});
      }
    }
    uo += m * uc;
    so += k;
    vo += vr * n;
  }
  copy_all(out, batched_copy);
  ls.check(op, opt);
  return {U, S, Vh};
}

}  // namespace jsvd
