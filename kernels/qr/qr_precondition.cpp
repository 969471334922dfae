// The Jacobi's QR preconditioning of a uniform batch: one launch where a matrix
// fits one block's shared memory (qr_whole_smem.h), otherwise a blocked
// Householder QR (LAPACK xGEQRT's compact WY form, Schreiber & Van Loan), and the
// application of Q to the Jacobi's vectors. Panels: householder_panel.cu, one
// launch for the batch; trailing updates and Q: cuBLAS strided batched GEMMs,
// three a panel, in full float32/float64 (never TF32), called directly on
// views of the batch (no dispatch, output allocation or copies per GEMM). Matrices too tall for a
// panel in one block, and a single tall matrix: cuSOLVER's geqrf and ormqr.
#include "qr/qr_precondition.h"

#include <ATen/Context.h>
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/Exceptions.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "common/batched_gemm.h"
#include "qr/batched_transpose.h"
#include "engine/finite_check.h"
#include "qr/householder_panel.h"
#include "qr/qr_whole_regs.h"
#include "qr/qr_whole_smem.h"
#include "qr/row_sort.h"
#include "tuning_knobs.h"

namespace jsvd {
namespace cuda {
namespace {

// Mr <- Mr (I - Y Tb Y^T) for the rows Mr (B, c, L) of a batch and a block
// reflector's Yt = Y^T (B, w, L), Tb = T or T^T (B, w, w): three GEMMs.
void apply_block_reflector_(const at::Tensor& Mr, const at::Tensor& Yt, const at::Tensor& Tb) {
  const at::Tensor Z1 = at::empty({Mr.size(0), Mr.size(1), Yt.size(1)}, Mr.options()), Z2 = at::empty_like(Z1);
  AT_DISPATCH_FLOATING_TYPES(Mr.scalar_type(), "apply_block_reflector", [&] {
    bmm_into<scalar_t>(Z1, Mr, Yt.transpose(1, 2), 1, 0);
    bmm_into<scalar_t>(Z2, Z1, Tb, 1, 0);
    bmm_into<scalar_t>(Mr, Z2, Yt, -1, 1);
  });
}

// The Householder blocks of Q = Q_0 Q_1 ..., Q_k = I - Y_k T_k Y_k^T, Y_k
// acting on rows k0.. of each matrix (stored as Yt = Y_k^T).
struct Reflectors {
  std::vector<int64_t> k0;
  std::vector<at::Tensor> Yt, T;
};

// W: (B, q, p), row c of W[k] the column c of the k-th p x q matrix. Factors
// every matrix in place: its leading q x q block becomes R (zeros below the
// diagonal, and below row q).
Reflectors householder_qr_(const at::Tensor& W, int64_t panel, bool keep) {
  const int64_t B = W.size(0), q = W.size(1), p = W.size(2);
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  Reflectors f;
  for (int64_t k0 = 0; k0 < q; k0 += panel) {
    const int64_t w = std::min(panel, q - k0), L = p - k0;
    at::Tensor Yt = at::empty({B, w, L}, W.options());
    at::Tensor T = at::empty({B, w, w}, W.options());
    AT_DISPATCH_FLOATING_TYPES(W.scalar_type(), "householder_panel", [&] {
      launch_householder_panel<scalar_t>(W.data_ptr<scalar_t>() + k0 * p + k0, q * p, p, static_cast<int>(L),
                                         static_cast<int>(w), Yt.data_ptr<scalar_t>(), T.data_ptr<scalar_t>(),
                                         static_cast<int>(B), stream);
    });
    if (k0 + w < q) {
      // C <- Q_k^T C on the columns right of the panel; as rows of W:
      // C^T -= C^T Y T Y^T.
      apply_block_reflector_(W.narrow(1, k0 + w, q - k0 - w).narrow(2, k0, L), Yt, T);
    }
    if (keep) {
      f.k0.push_back(k0);
      f.Yt.push_back(Yt);
      f.T.push_back(T);
    }
  }
  return f;
}

// Mt (B, c, p) <- (Q M)^T for M = Mt^T: the blocks last to first, each
// M <- M - Y T Y^T M, that is Mt -= Mt Y T^T Y^T on rows k0...
void apply_q_(const Reflectors& f, const at::Tensor& Mt) {
  for (size_t i = f.k0.size(); i-- > 0;)
    apply_block_reflector_(Mt.narrow(2, f.k0[i], Mt.size(2) - f.k0[i]), f.Yt[i], f.T[i].transpose(1, 2));
}

// The same factorisation by cuSOLVER (at::geqrf: LAPACK's compact form, a matrix at a time), for
// matrices whose panels do not fit one block and single tall ones (qr_choice): W (B, q, p) as above;
// `a` holds R above its diagonal.
struct LapackQr {
  at::Tensor a, tau;
};

LapackQr lapack_qr(const at::Tensor& W) {
  auto [a, tau] = at::geqrf(W.transpose(1, 2));  // the p x q matrices, column-major
  return {a, tau};
}

// X = R^T packed column-major (W's layout), i.e. R row-major.
at::Tensor r_transpose(const LapackQr& f, int64_t q) { return at::triu(f.a.narrow(1, 0, q)).contiguous(); }

// Mt (B, c, p) <- (Q M)^T for M = Mt^T, as apply_q_.
void apply_lapack_q_(const LapackQr& f, const at::Tensor& Mt) {
  Mt.transpose(1, 2).copy_(at::ormqr(f.a, f.tau, Mt.transpose(1, 2), /*left=*/true, /*transpose=*/false));
}

// X = U_x S V_x^T for the Jacobi's lower triangular X = R^T (X0: (B, q, q), row j X's column j, as
// the engine got it), whose U_x and S are in rx: V_x = X^{-1} (U_x S), one batched triangular solve
// instead of the Jacobi's rotations accumulated (xGEJSV computes V so where R is well conditioned).
// The solve is backward stable, X V_x = Y + componentwise small, so where V_x is orthogonal to
// 10 q eps (issue 20's bound) X = U_x S V_x^T holds to about that much of ||X|| too; V_x is then
// made orthogonal to rounding by one Newton-Schulz step, V_x (3I - V_x^T V_x) / 2, from the check's
// own product. Elsewhere (a singular X: rank-deficient inputs; and a few with strongly graded
// columns; docs/experiments.md, stop 37) the matrix's Jacobi runs again, with V: the matrices are
// found by one read on the host.
// Returns V_x packed, and fills rx's U, S and info of the matrices run again.
at::Tensor solve_v(const at::Tensor& X0, CoreResult& rx, const SvdOptions& xo, const Engine& engine) {
  const int64_t B = X0.size(0), q = X0.size(1);
  const at::Tensor Y = rx.U.view({B, q, q}).mT() * rx.S.view({B, 1, q});
  const at::Tensor Vx = at::linalg_solve_triangular(X0.mT(), Y, /*upper=*/false);
  const double eps = eps_of(X0.scalar_type());
  const at::Tensor F = at::matmul(Vx.mT(), Vx).sub_(at::eye(q, X0.options()));  // V_x^T V_x - I
  const at::Tensor redo = at::logical_not(at::linalg_matrix_norm(F) <= 10.0 * static_cast<double>(q) * eps);  // (NaN too)
  at::Tensor V = at::baddbmm(Vx, Vx, F, /*beta=*/1, /*alpha=*/-0.5).mT().contiguous();  // packed: row j, column j
  const int64_t nredo = redo.sum().item<int64_t>();
  if (nredo > 0) {
    const at::Tensor idx = redo.nonzero().squeeze(1);
    SvdOptions vo = xo;
    vo.want_v = true;
    const CoreResult rs = engine(X0.index_select(0, idx).view({-1}), PackedBatch::uniform_of(nredo, q, q, false), vo);
    rx.U.view({B, q, q}).index_copy_(0, idx, rs.U.view({nredo, q, q}));
    rx.S.view({B, q}).index_copy_(0, idx, rs.S.view({nredo, q}));
    rx.info.index_copy_(0, idx, rs.info);
    V.index_copy_(0, idx, rs.V.view({nredo, q, q}));
  }
  return V.view({-1});
}

}  // namespace

bool qr_twice_on(bool f64) { return knobs().qr_twice < 0 ? f64 : knobs().qr_twice > 0; }

bool qr_row_sort_on(bool f64) { return knobs().qr_row_sort > 0 || (knobs().qr_row_sort < 0 && f64); }

QrChoice qr_choice(int64_t rows, int64_t cols, size_t elem, bool uniform, int64_t batch, const DeviceLimits& lim) {
  QrChoice c;
  if (!knobs().qr || !uniform || rows < cols) return c;
  const bool whole = knobs().qr_whole && qr_whole_fits(rows, cols, elem, lim.smem_per_block);
  // Float32 from 256 columns, and from 32 where rows >= 3 cols (the Jacobi on the q x q R instead of
  // the tall matrix: 300 x 900x100 22.1 -> 8.6 ms, 1000 x 128x32 1.22 -> 0.82, 100 x 512x64 1.73 ->
  // 1.30), and from 16 where rows >= max(256, 16 cols) (1000 x 1024x16 1.03 -> 0.88, 1000 x 256x16
  // 0.48 -> 0.42; 5000 x 64x16 0.31 -> 0.57 stays without; H100, docs/experiments.md); float64 from 32
  // where the matrix fits the one-launch QR, else from 128, and from 16 where rows >= max(512, 8 cols):
  // so that the sweeps on structured matrices stay within 2x a Gaussian's, at a price in time on small
  // Gaussian batches (H100, docs/robustness.md, "Sweeps").
  const int64_t forced = knobs().qr_min_cols;
  const bool wide_enough = forced > 0 ? cols >= forced : cols >= (elem == 8 ? 128 : 256);
  const bool f64_whole = forced == 0 && elem == 8 && cols >= 32 && whole;
  const bool f64_tall = forced == 0 && elem == 8 && cols >= 16 && rows >= std::max<int64_t>(512, 8 * cols);
  const bool f32_tall = forced == 0 && elem == 4 &&
                        ((cols >= 32 && rows >= 3 * cols) || (cols >= 16 && rows >= std::max<int64_t>(256, 16 * cols)));
  if (!wide_enough && !f64_whole && !f64_tall && !f32_tall) return c;
  if (whole) {
    c.whole = true;
    // In registers (qr_whole_regs.h) for float64 of >= 4 rows a column: 1000 x 1024x16 1.68 -> 1.43 ms
    // (with the input read in place), 1000 x 128x32 1.15 -> 1.11; the shared-memory kernel stays ahead
    // on squarer float64 (10000 x 32² 4.72 against 4.94) and on float32 (1000 x 128x32 0.83 against
    // 0.92; H100, docs/experiments.md).
    const int regs = knobs().qr_regs;
    c.regs = regs > 0 && qr_regs_fits(rows, cols, elem) && (regs == 2 || (elem == 8 && rows >= 4 * cols));
    return c;
  }
  for (int64_t w = kMaxPanelWidth; w >= 8; w /= 2)
    if (householder_panel_smem(rows, w, elem) + kPanelStaticSmem <= lim.smem_per_block) {
      c.panel = w;
      break;
    }
  // cuSOLVER's Householder QR where not even a panel of 8 columns fits one block (float32 beyond about
  // 6960 rows, float64 beyond 3480: without a QR, one 11008 x 128 float32 matrix took the Gram EVD
  // level, 160 ms, now 3.1), and for a single matrix of >= 2000 rows and >= 4 rows a column, whose
  // panels would run on one SM (1 x 4096x64 float32 2.02 -> 1.17 ms, 1 x 4096x256
  // float32 9.98 -> 5.38 ms, 1 x 2000x500 float64 48.7 -> 35.5; not for batches: 4 x 3000x128 float64
  // 9.0 -> 13.3, 8 x 1024² float32 62 -> 89; nor for a square 4096² float32, whose U then missed
  // issue 19's 1e-4 orthogonality, 1.08e-4; H100, docs/experiments.md, stop 35).
  const int lapack = knobs().qr_lapack;
  if (lapack > 0 || (lapack < 0 && (c.panel == 0 || (batch == 1 && rows >= 2000 && rows >= 4 * cols)))) {
    c.lapack = true;
    c.panel = 0;
  }
  return c;
}

CoreResult svd_qr_preconditioned(const at::Tensor& A, const PackedBatch& b, const SvdOptions& opt,
                                 const QrChoice& qc, bool v_solve, const Engine& engine) {
  const int64_t B = b.size(), p = b.rows[0], q = b.cols[0];
  // A: the packed batch, or (the planner's read_in_place, one-launch QRs only) the caller's (B, q, p) view.
  const bool in_place = A.dim() == 3;
  TORCH_CHECK(b.uniform && (A.dim() == 1 || qc.whole) && A.numel() == B * p * q,
              "jsvd internal: QR preconditioning needs a uniform packed batch");
  const bool uv = opt.compute_uv;
  // xGEJSV's second, unpivoted QR (float64): X = R^T = Q2 R2, and the Jacobi runs on R2^T. Each
  // QR of the transpose is a step of the QR iteration on W^T W, so R2^T's columns start nearer to
  // orthogonal and graded: fewer sweeps on structured float64 matrices; in float32 it cost sweeps
  // on weighted incidence matrices and time on single matrices (docs/robustness.md, "Sweeps").
  const bool twice = qr_twice_on(A.scalar_type() == at::kDouble);
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  // The GEMMs stay in full precision whatever torch.backends.cuda.matmul.allow_tf32 says.
  const at::NoTF32Guard no_tf32;
  at::Tensor W = in_place ? A : A.view({B, q, p});
  // Both paths: W divided by max|a_ij| first, as the engine's prologue does (jacobi_device.cuh): the
  // reflectors' norms of unscaled columns overflow (entries of 1e300) or underflow (subnormal
  // entries) in float64, where the Jacobi alone would not; NaN or Inf stays non-finite (info -2 from
  // the engine). Then its columns by decreasing norm (W P = Q R): a cheap stand-in for xGEJSV's
  // column pivoting, so that R's rows, the Jacobi's columns, come graded where A's columns are
  // (docs/robustness.md, "Sweeps"); V's rows are put back at the end (V_W = P right).
  at::Tensor X, scale, perm, Sf, Y2, tau2, Yq;
  Reflectors f, f2;
  LapackQr g, g2;
  // And first, in float64, its rows by decreasing max|a_ij| (P_r W; xGEJSV's row pivoting, Cox &
  // Higham's row sorting): Householder QR is backward stable column by column, not row by row, so
  // without it a matrix with graded rows (a wide matrix with graded columns) lost the relative accuracy
  // of its small singular values (140 x 130 graded to 1e-12: 1.6e-5 against 7e-15 on the CPU engine,
  // H100; docs/robustness.md). U's rows are put back at the end (U_W = P_r^T U'). Float32 makes no
  // such promise on its QR path (docs/robustness.md), and keeps its rows.
  const bool row_sort = qr_row_sort_on(A.scalar_type() == at::kDouble);
  at::Tensor row_perm;
  if (qc.whole) {
    // (The one-launch QR sorts its rows itself.) One buffer for X, the scales, S, Y2 and tau2, one
    // after the other (small batches feel every allocation).
    const bool y2 = uv && twice;
    const at::Tensor work = at::empty({B * (q * q + 1 + (uv ? q * q : 0) + (y2 ? q * q + q : 0))}, A.options());
    int64_t used = 0;
    auto take = [&](int64_t n) {
      used += n;
      return work.narrow(0, used - n, n);
    };
    X = take(B * q * q).view({B, q, q});
    scale = take(B);
    if (uv) Sf = take(B * q * q);
    if (y2) {
      Y2 = take(B * q * q);
      tau2 = take(B * q);
    }
    perm = at::empty({B, q}, A.options().dtype(at::kLong));
    if (uv && row_sort) row_perm = at::empty({B, p}, A.options().dtype(at::kInt));
    // Q's reflectors overwrite the packed batch, or go to a buffer of their own when A is the caller's.
    if (uv) Yq = in_place ? at::empty({B, q, p}, A.options()) : W;
    AT_DISPATCH_FLOATING_TYPES(A.scalar_type(), "qr_whole", [&] {
      auto ptr = [](const at::Tensor& t) { return t.defined() ? t.data_ptr<scalar_t>() : nullptr; };
      QrWholeArgs<scalar_t> qa;
      qa.A = W.const_data_ptr<scalar_t>();
      qa.sb = W.stride(0);
      qa.sc = W.stride(1);
      qa.sr = W.stride(2);
      qa.Y = ptr(Yq);
      qa.p = static_cast<int>(p);
      qa.q = static_cast<int>(q);
      qa.sort = knobs().qr_sort;
      qa.row_sort = row_sort;
      qa.twice = twice;
      qa.keep = uv;
      qa.X = X.data_ptr<scalar_t>();
      qa.S = ptr(Sf);
      qa.Y2 = ptr(Y2);
      qa.tau2 = ptr(tau2);
      qa.perm = perm.data_ptr<int64_t>();
      qa.rowperm = row_perm.defined() ? row_perm.data_ptr<int32_t>() : nullptr;
      qa.scale = scale.data_ptr<scalar_t>();
      (qc.regs ? launch_qr_regs<scalar_t> : launch_qr_whole<scalar_t>)(qa, B, stream);
    });
  } else {
    if (row_sort) W = sort_rows(W, row_perm);  // (a new buffer, the QR's to overwrite)
    const at::Tensor amax = W.abs().amax({1, 2}, /*keepdim=*/true);
    scale = at::where(amax > 0, amax, at::ones_like(amax));
    W.div_(scale);
    if (knobs().qr_sort) {
      perm = at::argsort(at::linalg_vector_norm(W, 2, {2}, false, c10::nullopt), /*stable=*/true, /*dim=*/1,
                         /*descending=*/true);
      W.copy_(W.gather(1, perm.unsqueeze(2).expand({B, q, p})));
    }
    if (qc.lapack) {
      g = lapack_qr(W);
      X = r_transpose(g, q);
      if (twice) {
        g2 = lapack_qr(X.view({B, q, q}));
        X = r_transpose(g2, q);
      }
    } else {
      f = householder_qr_(W, qc.panel, uv);
      X = leading_block_transpose(W, q);  // X = R^T, packed column-major: X's column j is R's row j
      if (twice) {
        f2 = householder_qr_(X, qc.panel, uv);
        X = leading_block_transpose(X, q);
      }
    }
  }
  SvdOptions xo = opt;
  xo.full_matrices = false;
  xo.tol = resolve_tol(opt, p, A.scalar_type());  // W's own threshold
  v_solve = v_solve && uv;
  xo.want_v = !v_solve;
  const at::Tensor X0 = v_solve ? X.view({B, q, q}).clone() : at::Tensor();  // (the engine may overwrite X)
  CoreResult rx = engine(X.view({-1}), PackedBatch::uniform_of(B, q, q, false), xo);
  if (v_solve) rx.V = solve_v(X0, rx, xo, engine);
  CoreResult r;
  // Tall matrices' U = Q U_x and V measured as orthogonal as gesvda's (H100, stop 56: 37x300x77 float32
  // ||U^T U - I||_F 1.7e-7, the same), square ones' (the Jacobi on all of R^T) n eps (10x1024²: 6.1e-5
  // against 1.1e-5): only those are polished.
  r.polish = rx.polish && p < 2 * q;
  r.S = rx.S.view({B, q}).mul_(scale.view({B, 1})).view({-1});
  r.info = rx.info;
  const int64_t uc = uv ? b.ucols[0] : 0;
  if (uv) {
    // X = U_x S V_x^T. One QR: W P = Q R = (Q V_x) S U_x^T. Two: R = R2^T Q2^T, so
    // W P = (Q U_x) S (Q2 V_x)^T. Both factors are q x q column-major.
    const at::Tensor left = twice ? rx.U : rx.V;
    at::Tensor right = twice ? rx.V : rx.U;
    if (qc.whole) {
      // V_W = P Q2 right and U_W = P_r^T Q [left 0; 0 I] (I: the extra columns of full_matrices), a
      // launch each.
      r.V = at::empty({B * q * q}, A.options());
      r.U = at::empty({B * uc * p}, A.options());
      AT_DISPATCH_FLOATING_TYPES(A.scalar_type(), "apply_reflectors", [&] {
        const int qi = static_cast<int>(q);
        launch_apply_reflectors<scalar_t>(twice ? Y2.data_ptr<scalar_t>() : nullptr, qi, twice ? qi : 0,
                                          twice ? tau2.data_ptr<scalar_t>() : nullptr, right.data_ptr<scalar_t>(),
                                          r.V.data_ptr<scalar_t>(), perm.data_ptr<int64_t>(), B, stream);
        launch_apply_wy<scalar_t>(Yq.data_ptr<scalar_t>(), Sf.data_ptr<scalar_t>(),
                                  row_perm.defined() ? row_perm.data_ptr<int32_t>() : nullptr,
                                  left.data_ptr<scalar_t>(), r.U.data_ptr<scalar_t>(), static_cast<int>(p), qi,
                                  static_cast<int>(uc), B, stream);
      });
    } else {
      if (twice) qc.lapack ? apply_lapack_q_(g2, right.view({B, q, q})) : apply_q_(f2, right.view({B, q, q}));
      r.V = right;
      if (perm.defined()) {  // V_W = P right: row perm[i] of V_W is row i of right
        const at::Tensor Vt = right.view({B, q, q});  // (matrix, column, row)
        r.V = at::empty_like(Vt).scatter_(2, perm.unsqueeze(1).expand({B, q, q}), Vt).view({-1});
      }
      // U_W packed column-major, i.e. as (B, ucols, p) rows: Mt = M^T.
      at::Tensor Mt;
      if (p == q) {
        Mt = left.view({B, q, q});  // the engine's own buffer, Q applied in place
      } else {
        Mt = at::zeros({B, uc, p}, A.options());
        Mt.narrow(1, 0, q).narrow(2, 0, q).copy_(left.view({B, q, q}));
        if (uc > q) Mt.narrow(1, q, uc - q).narrow(2, q, p - q).diagonal(0, 1, 2).fill_(1);
      }
      qc.lapack ? apply_lapack_q_(g, Mt) : apply_q_(f, Mt);
      r.U = Mt.view({-1});
    }
  }
  if (uv && !qc.whole && row_perm.defined()) {  // row perm[i] of U_W is row i of U'
    r.U = unsort_rows(r.U.view({B, uc, p}), row_perm).view({-1});
  }
  // The engine checked its own S and V_W (its U_x); S times the scale and U = Q U_R are new: finite
  // or flagged (finite_check.h).
  AT_DISPATCH_FLOATING_TYPES(A.scalar_type(), "svd_qr_preconditioned", [&] {
    const MatrixDesc uni{0, p * uc, q, 0, static_cast<int32_t>(p), static_cast<int32_t>(q), static_cast<int32_t>(uc), 0};
    launch_flag_non_finite<scalar_t>(r.S.data_ptr<scalar_t>(), uv ? r.U.data_ptr<scalar_t>() : nullptr, nullptr,
                                     r.info.data_ptr<int32_t>(), nullptr, uni, static_cast<int>(B), stream);
  });
  return r;
}

}  // namespace cuda
}  // namespace jsvd
