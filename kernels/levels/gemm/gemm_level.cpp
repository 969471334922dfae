// The GEMM level's host side (gemm_level.h): buffers, and each step's three
// launches (cuBLAS batched DGEMMs around the pairs' Gram EVD).
#include "levels/gemm/gemm_level.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cublas_v2.h>

#include <algorithm>

namespace jsvd {
namespace cuda {

namespace {
void cublas_check(cublasStatus_t s, const char* what) {
  TORCH_CHECK(s == CUBLAS_STATUS_SUCCESS, "torch_jsvd: cuBLAS ", what, " failed with status ", static_cast<int>(s));
}
}  // namespace

GemmShape gemm_shape(int64_t m, int64_t n, int64_t w, int64_t batch, int sm_count) {
  GemmShape g;
  g.m = m;
  g.n = n;
  g.w = std::max<int64_t>(1, std::min(w, (n + 1) / 2));
  const int64_t blocks = (n + g.w - 1) / g.w;
  g.pairs = (blocks + 1) / 2;
  g.n_pad = 2 * g.pairs * g.w;
  // Split the Gram GEMMs' rows until a step has two output tiles per SM, but
  // keep chunks of at least 256 rows (each partial is read back by step 2).
  const int64_t tiles = std::max<int64_t>(1, batch * g.pairs);
  g.split = std::max<int64_t>(1, std::min<int64_t>((2 * sm_count + tiles - 1) / tiles, m / 256));
  const int64_t chunk = ((m + g.split - 1) / g.split + 7) / 8 * 8;
  g.m_pad = chunk * g.split;
  return g;
}

template <typename T>
GemmLevel<T>::GemmLevel(const EngineArgs<T>& args, const int32_t* mats, int nmats, const GemmShape& shape,
                        int inner_sweeps, const at::Device& device, cudaStream_t stream)
    : g_(shape), mats_(mats), nmats_(nmats), inner_sweeps_(inner_sweeps), uv_(args.Vw != nullptr) {
  const auto f64 = at::TensorOptions().device(device).dtype(at::kDouble);
  const int64_t c = g_.c(), NG = nmats * g_.pairs * g_.split, NU = 2 * nmats * g_.pairs;
  for (int t = 0; t < 2; ++t) {
    xa_[t] = at::empty({nmats * g_.m_pad * g_.n_pad}, f64);
    if (uv_) xv_[t] = at::empty({nmats * g_.n_pad * g_.n_pad}, f64);
  }
  gram_ = at::empty({NG * c * c}, f64);
  rot_ = at::empty({nmats * g_.pairs * c * c}, f64);
  const int64_t ntables = 3 * NG + 9 * NU;
  tables_ = at::empty({ntables}, f64.dtype(at::kLong));
  void** t = reinterpret_cast<void**>(tables_.data_ptr<int64_t>());
  auto in = [t](int64_t at) { return reinterpret_cast<const double* const*>(t + at); };
  auto out = [t](int64_t at) { return reinterpret_cast<double* const*>(t + at); };
  t_gram_a_[0] = in(0);
  t_gram_a_[1] = in(NG);
  t_gram_c_ = out(2 * NG);
  t_upd_a_[0] = in(3 * NG);
  t_upd_a_[1] = in(3 * NG + NU);
  t_upd_j_ = in(3 * NG + 2 * NU);
  t_upd_c_[0] = out(3 * NG + 3 * NU);
  t_upd_c_[1] = out(3 * NG + 4 * NU);
  t_vupd_a_[0] = in(3 * NG + 5 * NU);
  t_vupd_a_[1] = in(3 * NG + 6 * NU);
  t_vupd_c_[0] = out(3 * NG + 7 * NU);
  t_vupd_c_[1] = out(3 * NG + 8 * NU);
  double* xa[2] = {xa_[0].data_ptr<double>(), xa_[1].data_ptr<double>()};
  double* xv[2] = {uv_ ? xv_[0].data_ptr<double>() : nullptr, uv_ ? xv_[1].data_ptr<double>() : nullptr};
  launch_gemm_tables(g_, nmats, xa, xv, gram_.data_ptr<double>(), rot_.data_ptr<double>(), t, stream);
  launch_gemm_copy(args, mats_, nmats_, g_, xa[0], xv[0], /*in=*/true, stream);
}

template <typename T>
void GemmLevel<T>::sweep(const EngineArgs<T>& args, cudaStream_t stream) {
  const cublasHandle_t h = at::cuda::getCurrentCUDABlasHandle();  // (on the current stream)
  const double one = 1, zero = 0;
  const int c = static_cast<int>(g_.c()), w = static_cast<int>(g_.w), mp = static_cast<int>(g_.m_pad),
            np = static_cast<int>(g_.n_pad), chunk = static_cast<int>(g_.chunk());
  const int NG = static_cast<int>(nmats_ * g_.pairs * g_.split), NU = static_cast<int>(2 * nmats_ * g_.pairs);
  for (int64_t step = 0; step < 2 * g_.pairs - 1; ++step) {
    const int t = cur_;
    cublas_check(cublasDgemmBatched(h, CUBLAS_OP_T, CUBLAS_OP_N, c, c, chunk, &one, t_gram_a_[t], mp, t_gram_a_[t],
                                    mp, &zero, t_gram_c_, c, NG),
                 "Gram DGEMM");
    launch_gemm_pair_evd(args, mats_, nmats_, g_, gram_.data_ptr<double>(), rot_.data_ptr<double>(), inner_sweeps_,
                         stream);
    cublas_check(cublasDgemmBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, mp, w, c, &one, t_upd_a_[t], mp, t_upd_j_, c, &zero,
                                    t_upd_c_[t], mp, NU),
                 "rotation DGEMM (A)");
    if (uv_)
      cublas_check(cublasDgemmBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, np, w, c, &one, t_vupd_a_[t], np, t_upd_j_, c,
                                      &zero, t_vupd_c_[t], np, NU),
                   "rotation DGEMM (V)");
    cur_ ^= 1;
  }
}

template <typename T>
void GemmLevel<T>::finish(const EngineArgs<T>& args, cudaStream_t stream) {
  launch_gemm_copy(args, mats_, nmats_, g_, xa_[cur_].data_ptr<double>(),
                   uv_ ? xv_[cur_].data_ptr<double>() : nullptr, /*in=*/false, stream);
}

template class GemmLevel<float>;
template class GemmLevel<double>;

}  // namespace cuda
}  // namespace jsvd
