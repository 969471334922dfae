// The op schemas, in one place. Backends add kernels with TORCH_LIBRARY_IMPL
// (csrc/cpu/ops_cpu.cpp, kernels/engine/ops_cuda.cpp); fake kernels and autograd are
// registered from Python (torch_jsvd/_fake.py, torch_jsvd/_autograd.py; for LibTorch programs
// csrc/autograd/svd_autograd.cpp), but for the one Autograd kernel at the end (an error:
// svd_varlen_packed has no derivative).
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/grad_mode.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <torch/library.h>

#include "op_handles.h"

TORCH_LIBRARY(jsvd, m) {
  // svd, svdvals and both svd_varlen ops read results on the host (svd to stop
  // a sweep early and all of them to raise on info < 0), so a CUDA graph cannot hold
  // them: tagged cudagraph_unsafe, torch.compile's CUDA graphs leave them out.
  // svd_ex never synchronises and can be captured.
  const std::vector<at::Tag> syncs = {at::Tag::cudagraph_unsafe};
  m.def("svd(Tensor A, bool full_matrices=True, bool compute_uv=True, float? tol=None, int? max_sweeps=None)"
        " -> (Tensor U, Tensor S, Tensor Vh)",
        syncs);
  m.def("svd_ex(Tensor A, bool full_matrices=True, bool compute_uv=True, float? tol=None, int? max_sweeps=None)"
        " -> (Tensor U, Tensor S, Tensor Vh, Tensor info)");
  m.def("svdvals(Tensor A, float? tol=None, int? max_sweeps=None) -> Tensor", syncs);
  m.def("svd_varlen(Tensor[] As, bool full_matrices=False, bool compute_uv=True, float? tol=None,"
        " int? max_sweeps=None) -> (Tensor[] U, Tensor[] S, Tensor[] Vh)",
        syncs);
  // The matrices of one buffer described by a (count, 5) table, as a nested tensor holds them; the
  // results are one buffer each (csrc/svd_wrapper.h): no tensor a matrix.
  m.def("svd_varlen_packed(Tensor values, Tensor members, bool full_matrices=False, bool compute_uv=True,"
        " float? tol=None, int? max_sweeps=None) -> (Tensor U, Tensor S, Tensor Vh)",
        syncs);
}

// svd_varlen_packed has no derivative: say so when it is called on values that
// need one, instead of a result whose gradient is silently missing.
namespace {
std::tuple<at::Tensor, at::Tensor, at::Tensor> svd_varlen_packed_autograd(
    const at::Tensor& values, const at::Tensor& members, bool full_matrices, bool compute_uv,
    std::optional<double> tol, std::optional<int64_t> max_sweeps) {
  TORCH_CHECK(!(at::GradMode::is_enabled() && values.requires_grad()),
              "jsvd.svd_varlen_packed: values requires grad, but this op is not differentiable; "
              "torch_jsvd.svd_varlen on a list of matrices (or a nested tensor) is");
  // (a forward-mode tangent at the first dual level, torch.autograd.forward_ad's unnested one)
  TORCH_CHECK(!values._fw_grad(/*level=*/0).defined(),
              "jsvd.svd_varlen_packed: values has a forward-mode tangent, but this op is not differentiable; "
              "torch_jsvd.svd_varlen on a list of matrices (or a nested tensor) is");
  static const auto op = jsvd::op_handle<jsvd::SvdVarlenPackedSig>("jsvd::svd_varlen_packed");
  at::AutoDispatchBelowADInplaceOrView guard;
  return op.call(values, members, full_matrices, compute_uv, tol, max_sweeps);
}
}  // namespace

TORCH_LIBRARY_IMPL(jsvd, Autograd, m) {
  m.impl("svd_varlen_packed", svd_varlen_packed_autograd);
}
