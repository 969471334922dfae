// The row order of the float64 QR (xGEJSV's row pivoting, Cox & Higham's row sorting): rows by
// decreasing max|a_ij|, ties by index, by a block's bitonic sort in shared memory; and the one-launch
// QRs' column order. Shared by qr_whole_smem.cu and qr_whole_regs.cu (inside the factorisation's
// launch) and row_sort.cu (the rows, before the blocked QR).
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

namespace jsvd {
namespace cuda {
namespace {

// The sort's length: p rounded up to a power of two (the padding sorts last).
__host__ __device__ inline int row_sort_length(int p) {
  int n = 1;
  while (n < p) n *= 2;
  return n;
}

// Shared memory of the keys and their rows' indices (sort_rows_by_key), 16-byte aligned.
__host__ __device__ inline size_t row_keys_smem(int p) {
  return (static_cast<size_t>(row_sort_length(p)) * (sizeof(double) + sizeof(int)) + 15) / 16 * 16;
}

// A row's key from its max|a_ij| and whether it holds a NaN: non-finite rows first (any order of
// them is a valid one), so that every row has a key and the order is always a permutation.
__device__ __forceinline__ double row_key(double max_abs, bool nan) { return nan ? INFINITY : max_abs; }

// Sorts key[0, p) decreasing (ties: smaller idx first) by the whole block, with idx[] the rows'
// indices; key and idx have row_sort_length(p) entries (the padding is filled here). Ends with a
// barrier: idx[r] is then the row at position r.
__device__ void sort_rows_by_key(double* key, int* idx, int p) {
  const int n = row_sort_length(p), tid = threadIdx.x, nt = blockDim.x;
  for (int i = tid; i < n; i += nt) {
    idx[i] = i;
    if (i >= p) key[i] = -1.0;  // (keys are >= 0)
  }
  __syncthreads();
  auto before = [&](int a, int b) { return key[a] > key[b] || (key[a] == key[b] && idx[a] < idx[b]); };
  for (int k = 2; k <= n; k *= 2)
    for (int j = k / 2; j > 0; j /= 2) {
      for (int i = tid; i < n; i += nt) {
        const int l = i ^ j;
        if (l > i && ((i & k) == 0 ? before(l, i) : before(i, l))) {
          const double tk = key[i];
          key[i] = key[l];
          key[l] = tk;
          const int ti = idx[i];
          idx[i] = idx[l];
          idx[l] = ti;
        }
      }
      __syncthreads();
    }
}

// The column order of the one-launch QRs (a cheap stand-in for xGEJSV's column pivoting): column l
// goes to position rank, by decreasing squared norm d[l] (if `sort`; else l), ties and NaN (last) by
// index, so always a permutation. col[rank] = l, and perm[rank] = l for the caller. Threads over l.
__device__ __forceinline__ void order_columns(const double* d, int q, bool sort, int* col, int64_t* perm) {
  for (int l = threadIdx.x; l < q; l += blockDim.x) {
    int rank = l;
    if (sort) {
      const double dl = isnan(d[l]) ? -1.0 : d[l];
      rank = 0;
      for (int c = 0; c < q; ++c) {
        const double dc = isnan(d[c]) ? -1.0 : d[c];
        rank += dc > dl || (dc == dl && c < l);
      }
    }
    col[rank] = l;
    perm[rank] = l;
  }
}

}  // namespace
}  // namespace cuda
}  // namespace jsvd
