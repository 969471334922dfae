// cuSOLVER's batched symmetric eigen-solver and Cholesky factorisation (syev_batched.h).
#include "precondition/syev_batched.h"

#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/util/Exception.h>
#include <cusolverDn.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "tuning_knobs.h"

namespace jsvd {
namespace cuda {
namespace {

// A handle per thread and device, made once (cusolverDnCreate costs milliseconds) and kept for the
// process. ATen's own (at::cuda::getCurrentCUDASolverDnHandle) lives in libtorch_cuda_linalg, which torch
// loads only at its first linear-algebra call, so an extension cannot link against it.
cusolverDnHandle_t solver_handle() {
  thread_local std::unordered_map<int, cusolverDnHandle_t> handles;
  int device = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  auto it = handles.find(device);
  if (it == handles.end()) {
    cusolverDnHandle_t h = nullptr;
    TORCH_CHECK(cusolverDnCreate(&h) == CUSOLVER_STATUS_SUCCESS, "jsvd: cusolverDnCreate failed");
    it = handles.emplace(device, h).first;
  }
  return it->second;
}

#if CUSOLVER_VERSION >= 12000
// One call's buffers and cuSOLVER's call on them: G (in: the Gram matrices; out: the eigenvectors), W, info,
// and the work buffers, all allocated before the call (a capture allows no allocation).
struct SyevCall {
  at::Tensor G, W, info, work;
  std::vector<char> host;
  size_t device_bytes = 0, host_bytes = 0;
  // (destroyed however the constructor ends: the allocations below may throw)
  std::unique_ptr<std::remove_pointer_t<cusolverDnParams_t>, decltype(&cusolverDnDestroyParams)> params{
      nullptr, &cusolverDnDestroyParams};
  cusolverStatus_t status = CUSOLVER_STATUS_SUCCESS;  // cuSOLVER's, of the size query or the call

  SyevCall(const at::Tensor& g, cusolverDnHandle_t handle) : G(g) {
    const int64_t B = G.size(0), q = G.size(1);
    cusolverDnParams_t p = nullptr;
    TORCH_CHECK(cusolverDnCreateParams(&p) == CUSOLVER_STATUS_SUCCESS, "jsvd: cusolverDnCreateParams failed");
    params.reset(p);
    W = at::empty({B, q}, G.options());
    info = at::zeros({B}, G.options().dtype(at::kInt));
    status = cusolverDnXsyevBatched_bufferSize(handle, p, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, q, type(),
                                               G.data_ptr(), q, type(), W.data_ptr(), type(), &device_bytes,
                                               &host_bytes, B);
    work = at::empty({static_cast<int64_t>(std::max<size_t>(device_bytes, 1))}, G.options().dtype(at::kByte));
    host.resize(std::max<size_t>(host_bytes, 1));
  }

  cudaDataType type() const { return G.scalar_type() == at::kDouble ? CUDA_R_64F : CUDA_R_32F; }
  void run(cusolverDnHandle_t handle, cudaStream_t stream) {
    if (status != CUSOLVER_STATUS_SUCCESS) return;
    TORCH_CHECK(cusolverDnSetStream(handle, stream) == CUSOLVER_STATUS_SUCCESS, "jsvd: cusolverDnSetStream failed");
    const int64_t B = G.size(0), q = G.size(1);
    status = cusolverDnXsyevBatched(handle, params.get(), CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, q, type(),
                                    G.data_ptr(), q, type(), W.data_ptr(), type(), work.data_ptr(), device_bytes,
                                    host.data(), host_bytes, info.data_ptr<int>(), B);
  }
};

// syevBatched replayed as a CUDA graph. Its host side is the bottleneck: a sequence of small kernels a
// column of the tridiagonal reduction, several per matrix (H100, stop 57: 10 x 1024² float64 launched
// 10678 kernels, 49 ms of cudaLaunchKernel, and the device idled 40 of the call's 113 ms). The first call
// of a (device, batch, order, dtype) captures the call on buffers of its own into a graph; every call
// copies its G in, replays the graph on the current stream and copies the results out. Graphs are kept
// up to kGraphCacheBytes of buffers (then all are dropped). Captures use a handle of their own, whose
// internal buffers the graphs may hold (so replays run one at a time: `done`); a capture cuSOLVER
// refuses (it synchronised or allocated inside it) may leave that handle unusable, so it is abandoned, and
// syevBatched runs directly from then on, as it does under JSVD_SYEV_GRAPH=0 or inside a caller's own
// capture. (syevd, the few large matrices' solver, refused its capture: H100, stop 57, cuSOLVER of CUDA 13.)
constexpr size_t kGraphCacheBytes = size_t(1) << 30;

struct SyevGraph {
  std::unique_ptr<SyevCall> call;
  cudaGraphExec_t exec = nullptr;
  size_t bytes = 0;
};

using GraphKey = std::tuple<int, int64_t, int64_t, int>;  // (device, batch, order, float64)

// Everything below is used under graph_mutex. (Never destroyed: CUDA may be gone at exit.)
std::mutex graph_mutex;
struct GraphState {
  std::map<GraphKey, std::shared_ptr<SyevGraph>> cache;  // nullptr: the capture was refused
  std::map<int, cusolverDnHandle_t> handles;              // the capturing handle of each device
  std::map<int, at::cuda::CUDAEvent> done;                // each device's last replay's copies out
  bool refused = false;  // a capture refused: never tried again
};
GraphState& graph_state() {
  static auto* state = new GraphState();
  return *state;
}

// A graph of the call on buffers shaped like G, or nullptr where the capture was refused.
std::shared_ptr<SyevGraph> capture(const at::Tensor& G) {
  const int device = G.device().index();
  cusolverDnHandle_t& handle = graph_state().handles[device];
  if (!handle) TORCH_CHECK(cusolverDnCreate(&handle) == CUSOLVER_STATUS_SUCCESS, "jsvd: cusolverDnCreate failed");
  auto g = std::make_shared<SyevGraph>();
  g->call = std::make_unique<SyevCall>(at::empty_like(G), handle);
  const at::cuda::CUDAStream side = at::cuda::getStreamFromPool(false, device);
  cudaGraph_t graph = nullptr;
  C10_CUDA_CHECK(cudaStreamBeginCapture(side, cudaStreamCaptureModeThreadLocal));
  bool threw = false;
  try {
    g->call->run(handle, side);
  } catch (...) {
    threw = true;
  }
  const cudaError_t ended = cudaStreamEndCapture(side, &graph);
  const bool ok = !threw && ended == cudaSuccess && graph && g->call->status == CUSOLVER_STATUS_SUCCESS &&
                  cudaGraphInstantiate(&g->exec, graph, 0) == cudaSuccess;
  if (graph) (void)cudaGraphDestroy(graph);
  (void)cudaGetLastError();  // (a refused capture's error is not sticky)
  if (!ok) {
    handle = nullptr;  // (abandoned, not destroyed: it may hold the refused capture's state)
    graph_state().refused = true;
    return nullptr;
  }
  const SyevCall& c = *g->call;
  g->bytes = c.G.nbytes() + c.W.nbytes() + c.info.nbytes() + c.work.nbytes();
  return g;
}

// The graph for G's shape (captured on first use), or nullptr: run the call directly.
std::shared_ptr<SyevGraph> graph_for(const at::Tensor& G) {
  if (knobs().syev_graph == 0 ||
      c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None)
    return nullptr;
  const GraphKey key{G.device().index(), G.size(0), G.size(1), G.scalar_type() == at::kDouble};
  GraphState& st = graph_state();
  const auto it = st.cache.find(key);
  if (it != st.cache.end()) return it->second;
  size_t held = 0;
  for (const auto& kv : st.cache) held += kv.second ? kv.second->bytes : 0;
  if (held + 2 * G.nbytes() > kGraphCacheBytes) {
    for (auto& kv : st.done) kv.second.synchronize();  // (no replay still running)
    for (auto& kv : st.cache)
      if (kv.second) C10_CUDA_CHECK(cudaGraphExecDestroy(kv.second->exec));
    st.cache.clear();
  }
  std::shared_ptr<SyevGraph> g = 2 * G.nbytes() <= kGraphCacheBytes && !st.refused ? capture(G) : nullptr;
  st.cache.emplace(key, g);
  return g;
}
#endif

}  // namespace

at::Tensor syev_batched_async(const at::Tensor& G, at::Tensor* failed, at::Tensor* eigenvalues, bool may_graph) {
#if CUSOLVER_VERSION < 12000
  TORCH_CHECK(false, "jsvd internal: syev_batched needs cuSOLVER 12.0 (CUDA 13) or later");
#else
  TORCH_CHECK(G.dim() == 3 && G.size(1) == G.size(2) && G.is_contiguous() && G.is_cuda() &&
                  (G.scalar_type() == at::kDouble || G.scalar_type() == at::kFloat),
              "jsvd internal: syev_batched takes a contiguous (B, q, q) float32/float64 CUDA tensor");
  const at::cuda::CUDAStream stream = at::cuda::getCurrentCUDAStream();
  at::Tensor W, info;
  std::unique_lock<std::mutex> lock(graph_mutex);
  if (const std::shared_ptr<SyevGraph> g = may_graph ? graph_for(G) : nullptr) {
    // (the lock held to the end of the copies out: one replay at a time fills the buffers)
    const SyevCall& c = *g->call;
    at::cuda::CUDAEvent& done = graph_state().done[stream.device_index()];
    done.block(stream);
    c.G.copy_(G);
    c.info.zero_();
    C10_CUDA_CHECK(cudaGraphLaunch(g->exec, stream));
    G.copy_(c.G);
    W = c.W.clone();
    info = c.info.clone();
    done.record(stream);
    lock.unlock();
  } else {
    lock.unlock();
    cusolverDnHandle_t handle = solver_handle();
    SyevCall c(G, handle);
    c.run(handle, stream);
    TORCH_CHECK(c.status == CUSOLVER_STATUS_SUCCESS, "jsvd: cusolverDnXsyevBatched failed with status ",
                static_cast<int>(c.status));
    W = c.W;
    info = c.info;
  }
  *failed = info.ne(0).any();
  if (eigenvalues) *eigenvalues = W;
  // Column-major eigenvectors, by increasing eigenvalue: as a row-major (B, q, q) tensor that is V^T.
  return G.mT().flip(-1);
#endif
}

at::Tensor syev_batched(const at::Tensor& G, bool* failed, at::Tensor* eigenvalues, bool may_graph) {
  at::Tensor failed_on_device;
  const at::Tensor V = syev_batched_async(G, &failed_on_device, eigenvalues, may_graph);
  *failed = failed_on_device.item<bool>();
  return V;
}

at::Tensor potrf_batched(const at::Tensor& G, at::Tensor* info, double shift) {
  TORCH_CHECK(G.dim() == 3 && G.size(1) == G.size(2) && G.is_contiguous() && G.is_cuda() &&
                  G.scalar_type() == at::kDouble,
              "jsvd internal: potrf_batched takes a contiguous (B, q, q) float64 CUDA tensor");
  const int64_t B = G.size(0), q = G.size(1);
  at::Tensor L = G.clone();
  if (shift > 0 && G.numel() > 0)
    L.diagonal(0, -2, -1).add_(G.diagonal(0, -2, -1).amax(-1, /*keepdim=*/true) * shift);
  *info = at::zeros({B}, G.options().dtype(at::kInt));
  if (B == 0 || q == 0) return L;
  // (the array of the matrices' device addresses potrfBatched takes, formed on the device)
  const int64_t base = reinterpret_cast<int64_t>(L.data_ptr<double>());
  const at::Tensor ptrs = at::arange(base, base + B * q * q * 8, q * q * 8, G.options().dtype(at::kLong));
  cusolverDnHandle_t handle = solver_handle();
  TORCH_CHECK(cusolverDnSetStream(handle, at::cuda::getCurrentCUDAStream()) == CUSOLVER_STATUS_SUCCESS,
              "jsvd: cusolverDnSetStream failed");
  const cusolverStatus_t st =
      cusolverDnDpotrfBatched(handle, CUBLAS_FILL_MODE_LOWER, static_cast<int>(q),
                              reinterpret_cast<double**>(ptrs.data_ptr<int64_t>()), static_cast<int>(q),
                              info->data_ptr<int>(), static_cast<int>(B));
  TORCH_CHECK(st == CUSOLVER_STATUS_SUCCESS, "jsvd: cusolverDnDpotrfBatched failed with status ", static_cast<int>(st));
  return L;
}

}  // namespace cuda
}  // namespace jsvd
