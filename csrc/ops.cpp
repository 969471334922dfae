// The op schemas, in one place. Backends add kernels with TORCH_LIBRARY_IMPL
// (csrc/cpu/ops_cpu.cpp, kernels/engine/ops_cuda.cpp); fake kernels and autograd are
// registered from Python (torch_jsvd/_fake.py, torch_jsvd/_autograd.py).
#include <torch/library.h>

#ifdef JSVD_PYTHON_MODULE
#include <Python.h>

// An empty module: `import torch_jsvd._C` only has to load this library so the
// registrations below run (as in pytorch/extension-cpp). Only setup.py defines
// JSVD_PYTHON_MODULE; the CMake build is a plain shared library.
extern "C" {
PyObject* PyInit__C(void) {
  static struct PyModuleDef module_def = {
      PyModuleDef_HEAD_INIT,
      "_C",  // name
      nullptr,
      -1,
      nullptr,
  };
  return PyModule_Create(&module_def);
}
}
#endif

TORCH_LIBRARY(jsvd, m) {
  // svd, svdvals and svd_varlen read results on the host (svd to stop a sweep
  // early and all three to raise on info < 0), so a CUDA graph cannot hold
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
}
