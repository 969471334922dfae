#include "complement_qr.h"

#include <ATen/ops/eye.h>
#include <ATen/ops/geqrf.h>
#include <ATen/ops/ormqr.h>

namespace jsvd {

void complete_columns_by_qr(const at::Tensor& Ut, int64_t q) {
  const int64_t B = Ut.size(0), uc = Ut.size(1), p = Ut.size(2);
  if (uc <= q) return;
  auto [a, tau] = at::geqrf(Ut.narrow(1, 0, q).transpose(1, 2));  // U_q: (B, p, q)
  // Q's columns q .. uc - 1: Q applied to those of the identity.
  const at::Tensor E = at::eye(p, Ut.options()).narrow(1, q, uc - q).expand({B, p, uc - q});
  Ut.narrow(1, q, uc - q).copy_(at::ormqr(a, tau, E, /*left=*/true, /*transpose=*/false).transpose(1, 2));
}

}  // namespace jsvd
