// The Python module torch_jsvd._C (setup.py's build only: JSVD_PYTHON_MODULE;
// the CMake build is a plain shared library). `import torch_jsvd._C` loads the
// library so the op registrations run (as in pytorch/extension-cpp); the module
// itself has the Python layer's helpers for nested tensors.
#ifdef JSVD_PYTHON_MODULE
#include <Python.h>

#include <algorithm>
#include <cstring>

#include <ATen/NestedTensorImpl.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/grad_mode.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <torch/csrc/utils/pybind.h>
#include <ATen/ops/empty.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>

#include "op_handles.h"

namespace {

// The nested tensor (strided layout) whose components are C-contiguous back to back in the 1-D
// contiguous `given`, component i of shape sizes[i] (int64, CPU, (count, d)); a view of it.
// torch._nested_view_from_buffer does the same but checks each component by tensor ops (about 2 us
// each on a CPU: a list of thousands of matrices feels it), and the two-argument NestedTensorImpl
// derives strides and offsets by tensor ops (~25 ns a component): here one loop does both.
at::Tensor nest(const at::Tensor& given, const at::Tensor& sizes_in) {
  // (a nested tensor addresses its buffer's storage from its start: a buffer that starts further in is copied)
  const at::Tensor buffer = given.storage_offset() == 0 ? given : given.clone();
  const at::Tensor sizes = sizes_in.contiguous();
  TORCH_CHECK(buffer.dim() == 1 && buffer.is_contiguous() && !buffer.is_nested(),
              "_nest_contiguous: expected a 1-D contiguous buffer");
  TORCH_CHECK(sizes.dim() == 2 && sizes.scalar_type() == at::kLong && sizes.device().is_cpu(),
              "_nest_contiguous: expected sizes to be an int64 CPU tensor of shape (count, d)");
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
  return at::detail::make_tensor<at::native::NestedTensorImpl>(buffer, sizes, strides, offsets);
}

const at::Tensor& tensor_arg(PyObject* o, const char* what) {
  TORCH_CHECK_TYPE(THPVariable_Check(o), what, ": expected a tensor");
  return THPVariable_Unpack(o);
}

// _nest_contiguous(buffer, sizes): nest() above.
PyObject* nest_contiguous(PyObject* /*self*/, PyObject* args) {
  HANDLE_TH_ERRORS
  PyObject *buffer_obj = nullptr, *sizes_obj = nullptr;
  if (!PyArg_ParseTuple(args, "OO", &buffer_obj, &sizes_obj)) return nullptr;
  return THPVariable_Wrap(nest(tensor_arg(buffer_obj, "_nest_contiguous(buffer, sizes)"),
                               tensor_arg(sizes_obj, "_nest_contiguous(buffer, sizes)")));
  END_HANDLE_TH_ERRORS
}

// _strided_members(nt): (values, members) describing a strided nested tensor of matrices in place for
// jsvd.svd_varlen_packed (members: int64 (count, 5), rows, cols, offset, row stride and column stride of
// each), or None where its components are not 2-D or it has none. One loop over the nested tensor's own
// size, stride and offset tables (four tensor ops and a cat in Python: ~75 us a call on the H100's host).
PyObject* strided_members(PyObject* /*self*/, PyObject* args) {
  HANDLE_TH_ERRORS
  PyObject* nt_obj = nullptr;
  if (!PyArg_ParseTuple(args, "O", &nt_obj)) return nullptr;
  const at::Tensor& nt = tensor_arg(nt_obj, "_strided_members(nt)");
  TORCH_CHECK(nt.is_nested() && nt.layout() == at::kStrided, "_strided_members: expected a strided nested tensor");
  const at::native::NestedTensorImpl* impl = at::native::get_nested_tensor_impl(nt);
  const at::Tensor sizes = impl->get_nested_sizes().contiguous(), strides = impl->get_nested_strides().contiguous();
  const at::Tensor offsets = impl->get_storage_offsets().contiguous();
  if (sizes.dim() != 2 || sizes.size(0) == 0 || sizes.size(1) != 2) Py_RETURN_NONE;
  const int64_t count = sizes.size(0);
  at::Tensor members = at::empty({count, 5}, sizes.options());
  const int64_t *sz = sizes.const_data_ptr<int64_t>(), *st = strides.const_data_ptr<int64_t>(),
                *off = offsets.const_data_ptr<int64_t>();
  int64_t* t = members.mutable_data_ptr<int64_t>();
  for (int64_t i = 0; i < count; ++i) {
    t[5 * i] = sz[2 * i];
    t[5 * i + 1] = sz[2 * i + 1];
    t[5 * i + 2] = off[i];
    t[5 * i + 3] = st[2 * i];
    t[5 * i + 4] = st[2 * i + 1];
  }
  return Py_BuildValue("(NN)", THPVariable_Wrap(impl->get_unsafe_storage_as_tensor()), THPVariable_Wrap(members));
  END_HANDLE_TH_ERRORS
}

// _nest_results(U, S, Vh, members, full_matrices, compute_uv): jsvd.svd_varlen_packed's three buffers as
// the strided nested tensors svd_varlen returns for a strided nested input (matrix i's factors C-contiguous
// back to back: U_i m x (m or k), S_i k, Vh_i (n or k) x n, k = min(m, n); without compute_uv, U and Vh
// nest count empty vectors). One loop for the three size tables (eight tensor ops in Python).
PyObject* nest_results(PyObject* /*self*/, PyObject* args) {
  HANDLE_TH_ERRORS
  PyObject *u_obj = nullptr, *s_obj = nullptr, *vh_obj = nullptr, *members_obj = nullptr;
  int full = 0, uv = 1;
  if (!PyArg_ParseTuple(args, "OOOOpp", &u_obj, &s_obj, &vh_obj, &members_obj, &full, &uv)) return nullptr;
  const char* what = "_nest_results(U, S, Vh, members, full_matrices, compute_uv)";
  const at::Tensor members = tensor_arg(members_obj, what).contiguous();
  TORCH_CHECK(members.dim() == 2 && members.size(1) == 5 && members.scalar_type() == at::kLong &&
                  members.device().is_cpu(),
              "_nest_results: expected members to be an int64 CPU tensor of shape (count, 5)");
  const int64_t count = members.size(0);
  const auto o = members.options();
  at::Tensor us = at::empty({count, uv ? 2 : 1}, o), ss = at::empty({count, 1}, o),
             vs = at::empty({count, uv ? 2 : 1}, o);
  const int64_t* t = members.const_data_ptr<int64_t>();
  int64_t *u = us.mutable_data_ptr<int64_t>(), *s = ss.mutable_data_ptr<int64_t>(), *v = vs.mutable_data_ptr<int64_t>();
  for (int64_t i = 0; i < count; ++i) {
    const int64_t m = t[5 * i], n = t[5 * i + 1], k = std::min(m, n);
    s[i] = k;
    if (uv) {
      u[2 * i] = m;
      u[2 * i + 1] = full ? m : k;
      v[2 * i] = full ? n : k;
      v[2 * i + 1] = n;
    } else {
      u[i] = v[i] = 0;
    }
  }
  return Py_BuildValue("(NNN)", THPVariable_Wrap(nest(tensor_arg(u_obj, what), us)),
                       THPVariable_Wrap(nest(tensor_arg(s_obj, what), ss)),
                       THPVariable_Wrap(nest(tensor_arg(vh_obj, what), vs)));
  END_HANDLE_TH_ERRORS
}

// Arguments as the op's schema takes them from Python: a bool (numpy's too); None or a number for tol;
// None or an integer (numpy's too, not a bool) for max_sweeps.
bool as_bool(PyObject* o, const char* name) {
  const char* type = Py_TYPE(o)->tp_name;
  TORCH_CHECK_TYPE(PyBool_Check(o) || std::strcmp(type, "numpy.bool") == 0 || std::strcmp(type, "numpy.bool_") == 0,
                   "torch_jsvd: ", name, " must be a bool, got ", type);
  return PyObject_IsTrue(o) == 1;
}
std::optional<double> opt_double(PyObject* o) {
  if (o == Py_None) return std::nullopt;
  const double v = PyFloat_AsDouble(o);
  if (v == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    TORCH_CHECK_TYPE(false, "torch_jsvd: tol must be a float or None, got ", Py_TYPE(o)->tp_name);
  }
  return v;
}
std::optional<int64_t> opt_int(PyObject* o) {
  if (o == Py_None) return std::nullopt;
  PyObject* index = PyBool_Check(o) ? nullptr : PyNumber_Index(o);
  const long long v = index ? PyLong_AsLongLong(index) : -1;
  Py_XDECREF(index);
  if (!index || (v == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    TORCH_CHECK_TYPE(false, "torch_jsvd: max_sweeps must be an int or None, got ", Py_TYPE(o)->tp_name);
  }
  return v;
}

// _below_autograd(op, A, full_matrices, compute_uv, tol, max_sweeps): jsvd.svd (op 0), jsvd.svd_ex (1) or
// jsvd.svdvals (2, full_matrices and compute_uv ignored) called below the autograd layer through the
// dispatcher's typed handle: what torch.ops.jsvd.<op>.default does under _AutoDispatchBelowAutograd, without
// the Python op object's argument boxing (the caller, torch_jsvd._ops._call_one, decides when that is allowed).
PyObject* below_autograd(PyObject* /*self*/, PyObject* args) {
  HANDLE_TH_ERRORS
  int op = 0;
  PyObject *a_obj = nullptr, *full_obj = nullptr, *uv_obj = nullptr, *tol_obj = nullptr, *sweeps_obj = nullptr;
  if (!PyArg_ParseTuple(args, "iOOOOO", &op, &a_obj, &full_obj, &uv_obj, &tol_obj, &sweeps_obj)) return nullptr;
  TORCH_CHECK(op >= 0 && op <= 2, "_below_autograd: op must be 0, 1 or 2");
  const at::Tensor& A = tensor_arg(a_obj, "_below_autograd");
  const bool full = as_bool(full_obj, "full_matrices"), uv = as_bool(uv_obj, "compute_uv");
  const std::optional<double> tol = opt_double(tol_obj);
  const std::optional<int64_t> sweeps = opt_int(sweeps_obj);
  static const auto svd = jsvd::op_handle<jsvd::SvdSig>("jsvd::svd");
  static const auto svd_ex = jsvd::op_handle<jsvd::SvdExSig>("jsvd::svd_ex");
  static const auto vals = jsvd::op_handle<jsvd::SvdvalsSig>("jsvd::svdvals");
  PyObject* out = nullptr;
  {
    pybind11::gil_scoped_release no_gil;
    const at::AutoDispatchBelowAutograd below;
    if (op == 0) {
      auto [U, S, Vh] = svd.call(A, full, uv, tol, sweeps);
      pybind11::gil_scoped_acquire gil;
      out = Py_BuildValue("(NNN)", THPVariable_Wrap(U), THPVariable_Wrap(S), THPVariable_Wrap(Vh));
    } else if (op == 1) {
      auto [U, S, Vh, info] = svd_ex.call(A, full, uv, tol, sweeps);
      pybind11::gil_scoped_acquire gil;
      out = Py_BuildValue("(NNNN)", THPVariable_Wrap(U), THPVariable_Wrap(S), THPVariable_Wrap(Vh),
                          THPVariable_Wrap(info));
    } else {
      at::Tensor S = vals.call(A, tol, sweeps);
      pybind11::gil_scoped_acquire gil;
      out = THPVariable_Wrap(S);
    }
  }
  return out;
  END_HANDLE_TH_ERRORS
}

// A Python list of tensors, new references.
PyObject* tensor_list(std::vector<at::Tensor>&& ts) {
  PyObject* list = PyList_New(static_cast<Py_ssize_t>(ts.size()));
  if (list == nullptr) throw python_error();
  for (size_t i = 0; i < ts.size(); ++i)
    PyList_SET_ITEM(list, static_cast<Py_ssize_t>(i), THPVariable_Wrap(std::move(ts[i])));
  return list;
}

// _varlen_below_autograd(As, full_matrices, compute_uv, tol, max_sweeps): jsvd.svd_varlen below the autograd layer
// through its typed handle, as _below_autograd calls svd: without the Python op object's boxing of the list and
// of the three lists of results (about 0.08 us a tensor each way; torch_jsvd._ops.svd_varlen decides when it
// may). A member that is not a tensor is a TypeError naming it; None, and nothing solved, where grad mode is on
// and a member requires grad (the caller then goes through autograd): the check a member costs a few ns here
// against ~0.1 us in a Python loop.
PyObject* varlen_below_autograd(PyObject* /*self*/, PyObject* args) {
  HANDLE_TH_ERRORS
  PyObject *as_obj = nullptr, *full_obj = nullptr, *uv_obj = nullptr, *tol_obj = nullptr, *sweeps_obj = nullptr;
  if (!PyArg_ParseTuple(args, "OOOOO", &as_obj, &full_obj, &uv_obj, &tol_obj, &sweeps_obj)) return nullptr;
  const auto seq = pybind11::reinterpret_steal<pybind11::object>(
      PySequence_Fast(as_obj, "torch_jsvd.svd_varlen: expected As to be a list or tuple of tensors"));
  if (!seq) return nullptr;
  const Py_ssize_t count = PySequence_Fast_GET_SIZE(seq.ptr());
  PyObject** items = PySequence_Fast_ITEMS(seq.ptr());
  std::vector<at::Tensor> As;
  As.reserve(static_cast<size_t>(count));
  const bool grad = at::GradMode::is_enabled();
  bool needs_grad = false;
  for (Py_ssize_t i = 0; i < count; ++i) {
    TORCH_CHECK_TYPE(THPVariable_Check(items[i]), "torch_jsvd.svd_varlen: expected As to be a list of tensors, ",
                     "but As[", i, "] is a ", Py_TYPE(items[i])->tp_name);
    As.push_back(THPVariable_Unpack(items[i]));
    needs_grad = needs_grad || (grad && As.back().requires_grad());
  }
  if (needs_grad) Py_RETURN_NONE;
  const bool full = as_bool(full_obj, "full_matrices"), uv = as_bool(uv_obj, "compute_uv");
  const std::optional<double> tol = opt_double(tol_obj);
  const std::optional<int64_t> sweeps = opt_int(sweeps_obj);
  static const auto varlen = jsvd::op_handle<jsvd::SvdVarlenSig>("jsvd::svd_varlen");
  std::tuple<std::vector<at::Tensor>, std::vector<at::Tensor>, std::vector<at::Tensor>> r;
  {
    pybind11::gil_scoped_release no_gil;
    const at::AutoDispatchBelowAutograd below;
    r = varlen.call(As, full, uv, tol, sweeps);
  }
  auto U = pybind11::reinterpret_steal<pybind11::object>(tensor_list(std::move(std::get<0>(r))));
  auto S = pybind11::reinterpret_steal<pybind11::object>(tensor_list(std::move(std::get<1>(r))));
  auto Vh = pybind11::reinterpret_steal<pybind11::object>(tensor_list(std::move(std::get<2>(r))));
  return PyTuple_Pack(3, U.ptr(), S.ptr(), Vh.ptr());
  END_HANDLE_TH_ERRORS
}

PyMethodDef methods[] = {
    {"_below_autograd", below_autograd, METH_VARARGS, "jsvd.svd, svd_ex or svdvals below autograd"},
    {"_varlen_below_autograd", varlen_below_autograd, METH_VARARGS, "jsvd.svd_varlen below autograd"},
    {"_nest_contiguous", nest_contiguous, METH_VARARGS, "a strided nested tensor of contiguous components"},
    {"_strided_members", strided_members, METH_VARARGS, "a strided nested tensor of matrices as (values, members)"},
    {"_nest_results", nest_results, METH_VARARGS, "svd_varlen_packed's buffers as strided nested tensors"},
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
