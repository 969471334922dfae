// The Python module torch_jsvd._C (setup.py's build only: JSVD_PYTHON_MODULE;
// the CMake build is a plain shared library). `import torch_jsvd._C` loads the
// library so the op registrations run (as in pytorch/extension-cpp); the module
// itself has one helper of the Python layer.
#ifdef JSVD_PYTHON_MODULE
#include <Python.h>

#include <ATen/NestedTensorImpl.h>
#include <ATen/ops/empty.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>

namespace {

// _nest_contiguous(buffer, sizes): the nested tensor (strided layout) whose
// components are C-contiguous back to back in the 1-D contiguous `buffer`,
// component i of shape sizes[i] (int64, CPU, (count, d)); a view of buffer.
// torch._nested_view_from_buffer does the same but checks each component by
// tensor ops (about 2 us each on a CPU: a list of thousands of matrices feels
// it); here the shapes are checked against the buffer by one loop.
PyObject* nest_contiguous(PyObject* /*self*/, PyObject* args) {
  HANDLE_TH_ERRORS
  PyObject *buffer_obj = nullptr, *sizes_obj = nullptr;
  if (!PyArg_ParseTuple(args, "OO", &buffer_obj, &sizes_obj)) return nullptr;
  TORCH_CHECK_TYPE(THPVariable_Check(buffer_obj) && THPVariable_Check(sizes_obj),
                   "_nest_contiguous(buffer, sizes): expected two tensors");
  // (a nested tensor addresses its buffer's storage from its start: a buffer that starts further in is copied)
  const at::Tensor& given = THPVariable_Unpack(buffer_obj);
  const at::Tensor buffer = given.storage_offset() == 0 ? given : given.clone();
  const at::Tensor sizes = THPVariable_Unpack(sizes_obj).contiguous();
  TORCH_CHECK(buffer.dim() == 1 && buffer.is_contiguous() && !buffer.is_nested(),
              "_nest_contiguous: expected a 1-D contiguous buffer");
  TORCH_CHECK(sizes.dim() == 2 && sizes.scalar_type() == at::kLong && sizes.device().is_cpu(),
              "_nest_contiguous: expected sizes to be an int64 CPU tensor of shape (count, d)");
  // Each component's C-contiguous strides and its offset, here in one loop (the two-argument
  // NestedTensorImpl derives them by tensor ops, ~25 ns a component).
  const int64_t count = sizes.size(0), d = sizes.size(1);
  const int64_t* sz = sizes.const_data_ptr<int64_t>();
  at::Tensor strides = at::empty({count, d}, sizes.options()), offsets = at::empty({count}, sizes.options());
  int64_t* st = strides.mutable_data_ptr<int64_t>();
  int64_t* off = offsets.mutable_data_ptr<int64_t>();
  int64_t total = 0;
  for (int64_t i = 0; i < count; ++i) {
    int64_t numel = 1;
    for (int64_t j = d - 1; j >= 0; --j) {
      TORCH_CHECK(sz[i * d + j] >= 0, "_nest_contiguous: negative size");
      st[i * d + j] = numel;
      numel *= sz[i * d + j];
    }
    off[i] = total;
    total += numel;
  }
  TORCH_CHECK(total <= buffer.numel(), "_nest_contiguous: the sizes need ", total, " elements, the buffer has ",
              buffer.numel());
  return THPVariable_Wrap(at::detail::make_tensor<at::native::NestedTensorImpl>(buffer, sizes, strides, offsets));
  END_HANDLE_TH_ERRORS
}

PyMethodDef methods[] = {
    {"_nest_contiguous", nest_contiguous, METH_VARARGS, "a strided nested tensor of contiguous components"},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

extern "C" {
PyObject* PyInit__C(void) {
  static struct PyModuleDef module_def = {
      PyModuleDef_HEAD_INIT,
      "_C",  // name
      nullptr,
      -1,
      methods,
  };
  return PyModule_Create(&module_def);
}
}
#endif
