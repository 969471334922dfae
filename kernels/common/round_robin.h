// Round-robin ("circle") ordering of the pairs of a sweep, shared by the host
// (which lists the block pairs of each step) and the kernels.
#pragma once

#include "host_device.h"

namespace jsvd {
namespace cuda {

// For e slots (e even): slot e-1 stays put and the others rotate by one each
// step. Step s (0 <= s < e-1) pairs (s, e-1) and ((s+k) mod (e-1), (s-k) mod
// (e-1)) for k = 1 .. e/2-1. Every slot appears once per step, and the e-1
// steps cover every pair once (a sweep), so the e/2 rotations of a step are
// independent (W-cycle paper §II-B). Returns the pair with i < j.
JSVD_HOST_DEVICE inline void round_robin_pair(int e, int step, int k, int& i, int& j) {
  const int m = e - 1;
  if (k == 0) {
    i = step;
    j = m;
  } else {
    i = (step + k) % m;
    j = (step - k + m) % m;
  }
  if (i > j) {
    const int t = i;
    i = j;
    j = t;
  }
}

// The same circle method on fixed pair slots (the register kernel,
// svd_warp.cu): pair k of every step is slots (2k, 2k+1), and after each step
// the columns move: slot 0 stays, the others go one place along the ring
// 1 -> 2 -> 4 -> ... -> 2P-2 -> 2P-1 -> 2P-3 -> ... -> 3 -> 1. Returns the slot
// whose column moves into `slot`. The same permutation every step, so a kernel
// can apply it with compile-time indices; after 2P-1 steps every pair has met
// once and every column is back in its slot (cpp_tests/planner_test.cpp).
JSVD_HOST_DEVICE constexpr int circle_source(int slot, int P) {
  return slot == 0           ? 0
         : slot == 2         ? 1
         : slot % 2 == 0     ? slot - 2
         : slot == 2 * P - 1 ? 2 * P - 2
                             : slot + 2;
}

}  // namespace cuda
}  // namespace jsvd
