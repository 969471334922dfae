// Recursive-halving ordering of the pairs of a sweep, for kernels that keep one
// column of each pair in registers (svd_smem_kernel.cuh, register steps).
//
// Level 0 splits the c columns at m0 and pairs every column of [0, m0) with
// every column of [m0, c): owner o of the first half keeps its column x in
// registers, and at step s meets column (o + s) mod W of the second half, so a
// step reads and writes only the partner in shared memory, and no two owners
// meet the same partner. Each level then splits every segment of the one
// before in two and does the same inside it, until segments are single
// columns. Every pair meets once (a sweep), in sum(levels) steps: c - 1 when
// c is a power of two, as the round-robin ordering. It is the block-pair
// structure of the W-cycle paper (§III, cross pairs of [A_i A_j] after the
// pairs inside each block) applied recursively inside a matrix.
//
// Segments at level L >= 1 split each half [0, m0), [m0, c) into 2^(L-1)
// parts at floor(t len / 2^(L-1)), so children nest inside their parents.
// Owners are addressed by slot = t * owners(L) + o: a slot whose o is past its
// segment's first half does nothing.
#pragma once

#include "host_device.h"

namespace jsvd {
namespace cuda {

struct HalvingOrder {
  int c;   // columns
  int m0;  // level 0's split (a block pair: w0; a whole matrix: ceil(c / 2))

  JSVD_HOST_DEVICE static int ceil_div(int a, int b) { return (a + b - 1) / b; }
  JSVD_HOST_DEVICE int half() const { return m0 > c - m0 ? m0 : c - m0; }
  // Levels of a full sweep (a cross-only block-pair task has level 0 only).
  JSVD_HOST_DEVICE int levels() const {
    int n = 1;
    while (ceil_div(half(), 1 << (n - 1)) >= 2) ++n;
    return n;
  }
  // The most owners (first-half columns) of one segment at level L.
  JSVD_HOST_DEVICE int owners(int L) const { return L == 0 ? m0 : ceil_div(half(), 1 << L); }
  // Steps of level L: the most partners (second-half columns) an owner has.
  JSVD_HOST_DEVICE int steps(int L) const { return L == 0 ? half() : owners(L); }
  JSVD_HOST_DEVICE int slots(int L) const { return L == 0 ? m0 : (1 << L) * owners(L); }
  JSVD_HOST_DEVICE int max_slots(int nlevels) const {
    int s = 0;
    for (int L = 0; L < nlevels; ++L) s = slots(L) > s ? slots(L) : s;
    return s;
  }
  // Segment t (< 2^L) of level L: columns [lo, hi), split at mid.
  JSVD_HOST_DEVICE void segment(int L, int t, int& lo, int& mid, int& hi) const {
    if (L == 0) {
      lo = 0;
      mid = m0;
      hi = c;
      return;
    }
    const int n = 1 << (L - 1), h = t >> (L - 1), idx = t & (n - 1);
    const int base = h ? m0 : 0, len = h ? c - m0 : m0;
    lo = base + idx * len / n;
    hi = base + (idx + 1) * len / n;
    mid = base + (2 * idx + 1) * len / (2 * n);
  }
};

}  // namespace cuda
}  // namespace jsvd
