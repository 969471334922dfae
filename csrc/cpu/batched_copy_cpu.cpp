// svd_varlen's packing and unpacking on the CPU: every copy of the list in one
// parallel pass over plain loops, instead of a strided view and a copy_ per
// matrix (16000 as_strided and 8000 copy_ calls took 57 ms of a 69 ms list of
// 2000 small matrices; docs/experiments.md, "Stop 34").
#include "batched_copy_cpu.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

namespace jsvd {
namespace {

template <typename S, typename D>
void copy_one(const MatrixCopy& c) {
  const S* src = static_cast<const S*>(c.src);
  D* dst = static_cast<D*>(c.dst);
  // the inner loop along dst's unit-stride dimension
  if (c.dst_cs <= c.dst_rs) {
    for (int64_t r = 0; r < c.rows; ++r)
      for (int64_t k = 0; k < c.cols; ++k) dst[r * c.dst_rs + k * c.dst_cs] = static_cast<D>(src[r * c.src_rs + k * c.src_cs]);
  } else {
    for (int64_t k = 0; k < c.cols; ++k)
      for (int64_t r = 0; r < c.rows; ++r) dst[r * c.dst_rs + k * c.dst_cs] = static_cast<D>(src[r * c.src_rs + k * c.src_cs]);
  }
}

}  // namespace

void batched_copy_cpu(const std::vector<MatrixCopy>& copies, at::ScalarType src, at::ScalarType dst,
                      const at::Device&) {
  if (copies.empty()) return;
  int64_t total = 0;
  for (const auto& c : copies) total += c.rows * c.cols;
  // (about 32k elements a task: small lists run on the calling thread)
  const int64_t grain = std::max<int64_t>(1, static_cast<int64_t>(copies.size()) * 32768 / std::max<int64_t>(total, 1));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, src, "batched_copy_cpu_src", [&] {
    using S = scalar_t;
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dst, "batched_copy_cpu_dst", [&] {
      at::parallel_for(0, static_cast<int64_t>(copies.size()), grain, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) copy_one<S, scalar_t>(copies[i]);
      });
    });
  });
}

}  // namespace jsvd
