// The C++ signatures of the ops that ops.cpp declares (TORCH_LIBRARY(jsvd, m)), and their typed dispatcher
// handles: for code that calls an op through the dispatcher (the Python module's direct call, the LibTorch
// Autograd kernels, the C++ tests).
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <optional>
#include <tuple>
#include <vector>

namespace jsvd {

using SvdSig = std::tuple<at::Tensor, at::Tensor, at::Tensor>(const at::Tensor&, bool, bool, std::optional<double>,
                                                              std::optional<int64_t>);
using SvdExSig = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>(
    const at::Tensor&, bool, bool, std::optional<double>, std::optional<int64_t>);
using SvdvalsSig = at::Tensor(const at::Tensor&, std::optional<double>, std::optional<int64_t>);
using SvdVarlenSig = std::tuple<std::vector<at::Tensor>, std::vector<at::Tensor>, std::vector<at::Tensor>>(
    at::TensorList, bool, bool, std::optional<double>, std::optional<int64_t>);
using SvdVarlenPackedSig = std::tuple<at::Tensor, at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, bool,
                                                                          bool, std::optional<double>,
                                                                          std::optional<int64_t>);

// jsvd::<name>'s handle, e.g. op_handle<SvdSig>("jsvd::svd") (a lookup: keep it in a static).
template <typename Sig>
c10::TypedOperatorHandle<Sig> op_handle(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Sig>();
}

}  // namespace jsvd
