// Experiment (not part of the extension): Householder QR of a batch of panels
// (B, L, w), one thread block per panel, the panel in shared memory. Built by
// scripts/blocked_qr_probe.py (--panel jsvd) with torch.utils.cpp_extension.load
// on the GPU machine, to time a batched panel factorisation against
// cublas<t>geqrfBatched and torch.geqrf before a kernel goes into kernels/.
//
// Output as torch.geqrf: the panel column-major, R on and above the diagonal,
// reflector j's v below it (v_j = 1 implied), H_j = I - tau_j v v^T (LAPACK's
// xGEQR2, xLARFG's conventions). Step j: warp 0 builds reflector j from column
// j (its squared tail norm summed in double); then each warp takes columns
// c > j in turn and applies H_j to them (w_c = v^T a_c in double, then
// a_c -= tau_j w_c v). Two barriers a column.
#include <torch/extension.h>

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

namespace {

template <typename T>
__global__ void householder_panels_kernel(T* __restrict__ P, T* __restrict__ tau, int L, int w) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* a = reinterpret_cast<T*>(smem_raw);  // L x w column-major (ld = L)
  T* const Pg = P + static_cast<int64_t>(blockIdx.x) * L * w;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nwarps = blockDim.x >> 5;
  __shared__ double s_tau;  // reflector j's tau, for every warp
  for (int k = tid; k < L * w; k += blockDim.x) a[k] = Pg[k];
  __syncthreads();
  for (int j = 0; j < w && j < L; ++j) {
    T* x = a + j * L;
    if (warp == 0) {
      double tail = 0;
      for (int i = j + 1 + lane; i < L; i += 32) tail += double(x[i]) * double(x[i]);
      for (int o = 16; o > 0; o /= 2) tail += __shfl_xor_sync(0xffffffffu, tail, o);
      const double alpha = double(x[j]);
      double t = 0, scale = 0, beta = alpha;
      if (tail > 0) {
        const double nrm = sqrt(alpha * alpha + tail);
        beta = alpha >= 0 ? -nrm : nrm;
        t = (beta - alpha) / beta;
        scale = 1.0 / (alpha - beta);
      }
      for (int i = j + 1 + lane; i < L; i += 32) x[i] = T(double(x[i]) * scale);
      __syncwarp();  // every lane has read x[j] (alpha) before lane 0 writes beta there
      if (lane == 0) {
        x[j] = T(beta);
        tau[static_cast<int64_t>(blockIdx.x) * w + j] = T(t);
        s_tau = double(T(t));  // (the rounded tau, as the caller sees it)
      }
    }
    __syncthreads();
    const double tj = s_tau;
    if (tj != 0) {
      for (int c = j + 1 + warp; c < w; c += nwarps) {
        T* y = a + c * L;
        double s = 0;
        for (int i = j + 1 + lane; i < L; i += 32) s += double(x[i]) * double(y[i]);
        for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
        const double wc = tj * (double(y[j]) + s);
        __syncwarp();  // every lane has read y[j] before lane 0 writes it
        if (lane == 0) y[j] = T(double(y[j]) - wc);
        for (int i = j + 1 + lane; i < L; i += 32) y[i] = T(double(y[i]) - wc * double(x[i]));
      }
    }
    __syncthreads();
  }
  for (int k = tid; k < L * w; k += blockDim.x) Pg[k] = a[k];
}

// P: (B, L, w) CUDA float32/float64. Returns (a, tau) as torch.geqrf(P).
std::vector<torch::Tensor> householder_panels(torch::Tensor P) {
  TORCH_CHECK(P.is_cuda() && P.dim() == 3, "householder_panels: a (B, L, w) CUDA tensor");
  TORCH_CHECK(P.scalar_type() == at::kFloat || P.scalar_type() == at::kDouble, "float32 or float64");
  TORCH_CHECK(P.size(1) >= P.size(2), "householder_panels: panels of at least as many rows as columns");
  const c10::cuda::CUDAGuard guard(P.device());
  const int64_t B = P.size(0), L = P.size(1), w = P.size(2);
  auto cm = P.mT().contiguous();  // (B, w, L): each panel column-major
  auto tau = torch::empty({B, w}, P.options());
  const size_t smem = static_cast<size_t>(L * w) * P.element_size();
  TORCH_CHECK(smem <= 227 * 1024, "householder_panels: panel of ", smem, " bytes exceeds shared memory");
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(P.scalar_type(), "householder_panels", [&] {
    auto k = householder_panels_kernel<scalar_t>;
    C10_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    k<<<B, 256, smem, stream>>>(cm.data_ptr<scalar_t>(), tau.data_ptr<scalar_t>(), static_cast<int>(L),
                                static_cast<int>(w));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return {cm.mT(), tau};
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("householder_panels", &householder_panels); }
