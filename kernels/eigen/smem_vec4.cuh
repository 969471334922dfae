// Four consecutive values of a shared-memory vector in one load or store (ld.shared.v4 / st.shared.v4 for
// float32, two v2 accesses for float64), for the eigen-solver's loops that read a vector broadcast to every
// thread of the CTA (evd_tail.cuh's back-transformation, tridiag_reduce.cuh's symv and rank-2 update): a
// scalar load an entry would keep the shared-memory pipe busy about as long as the back-transformation took in
// all (an estimate: ~246k issue cycles against its ~259k measured in stop 85's probe, 12 warps an SM). H200,
// stop 87, with the bisection's two halvings a pass: the tail kernel 0.722 -> 0.673 ms at float32 200 x 128²;
// the reduction's loads gained nothing (0.204 -> 0.204). p must be 16-byte aligned on the device (and, for
// float64, 32); the host reads the four values one by one.
#pragma once

#include "host_device.h"

namespace jsvd {
namespace cuda {
namespace eigen {

template <typename T>
struct Vec4 {
  T x, y, z, w;
};

template <typename T>
JSVD_HOST_DEVICE_INLINE Vec4<T> load4(const T* p) {
#ifdef __CUDA_ARCH__
  if constexpr (sizeof(T) == 4) {
    const float4 v = *reinterpret_cast<const float4*>(p);
    return {v.x, v.y, v.z, v.w};
  } else {
    const double2 a = reinterpret_cast<const double2*>(p)[0], b = reinterpret_cast<const double2*>(p)[1];
    return {a.x, a.y, b.x, b.y};
  }
#else
  return {p[0], p[1], p[2], p[3]};
#endif
}

template <typename T>
JSVD_HOST_DEVICE_INLINE void store4(T* p, T x, T y, T z, T w) {
#ifdef __CUDA_ARCH__
  if constexpr (sizeof(T) == 4) {
    *reinterpret_cast<float4*>(p) = make_float4(x, y, z, w);
  } else {
    reinterpret_cast<double2*>(p)[0] = make_double2(x, y);
    reinterpret_cast<double2*>(p)[1] = make_double2(z, w);
  }
#else
  p[0] = x;
  p[1] = y;
  p[2] = z;
  p[3] = w;
#endif
}

}  // namespace eigen
}  // namespace cuda
}  // namespace jsvd
