// The register level's two exchanges of a round-robin step, through a small
// per-warp shared-memory buffer instead of shuffles (svd_warp.cu):
//  - the pairs' inner products: every lane stages its rows' share of each
//    pair's x^T y, and the pair's two lanes each add half of the group's shares;
//  - the rotations: the lane computing pair k's (s, tau) stores them, and every
//    lane of the group reads all of them back with vector loads (a broadcast).
// A butterfly reduce-scatter in double took 30 shuffles and 60 selects a step
// and the rotations' fetch 32 shuffles: at 10000 x 32 x 32 (float32, H100,
// ncu at da73dbd) those were 160 of the step's ~430 instructions, and the
// kernel is issue-bound (IPC 2.98 of 4).
//
// Layout of the shares: one row per (pair, share) holding the warp's 32
// lanes' values, rows padded by one 16-byte unit: a row's writes are 32
// consecutive values, and the readers of different pairs, who read a 16-byte
// unit at a time, start one unit apart per row and so spread over all banks.
// Every address is a per-lane base plus a constant (an XOR swizzle needed a
// register a row, and spilled at 32 x 32 float32).
#pragma once

#include <cuda_runtime.h>

namespace jsvd {
namespace cuda {

template <typename T, int NC, int R>
struct WarpExchange {
  static constexpr int P = NC / 2;  // pairs of a group
  static constexpr int G = 32 / NC; // groups (matrices) of a warp
  // Shares a lane stages per pair: float32 sums two rows' products in one
  // FFMA, so R = 4 gives two (each then summed in double, as before);
  // float64 sums its rows in double, one share.
  static constexpr int W = (sizeof(T) == sizeof(float) && R == 4) ? 2 : 1;
  static constexpr int kUnit = 16 / sizeof(T);  // values per 16-byte unit
  static constexpr int kHalf = NC / 2;          // shares a reader adds per row
  static constexpr int kPitch = 32 + kUnit;      // a row of shares, padded

  struct alignas(16) Buffer {
    T share[P * W][kPitch];
    T rot[G * P][2];  // (s, tau) of pair k of group g at g * P + k
  };

  __device__ static __forceinline__ void put_share(Buffer& b, int k, int w, int lane, T v) {
    b.share[k * W + w][lane] = v;
  }

  // Half h of pair k's shares of group g, summed in double (after a __syncwarp).
  __device__ static __forceinline__ double half_sum(const Buffer& b, int g, int k, int h) {
    double acc[4] = {0, 0, 0, 0};  // independent sums: the adds overlap
#pragma unroll
    for (int w = 0; w < W; ++w) {
      const int row = k * W + w;
      const int first = g * NC + h * kHalf;  // logical column of the first share
      if constexpr (kHalf >= kUnit) {
#pragma unroll
        for (int u = 0; u < kHalf / kUnit; ++u) {
          const T* p = &b.share[row][first + u * kUnit];
          if constexpr (sizeof(T) == sizeof(float)) {
            // A unit's four shares summed in float first, then in double: one conversion (16 a clock
            // an SM on sm_90, an eighth of FADD's rate) where there were four. The two float levels
            // add at most eps sum |x_i y_i| to x^T y (the products' own rounding: eps / 2 of it),
            // below the default tolerance, sqrt(rows) eps, of every shape that comes here (8 rows on).
            const float4 f = *reinterpret_cast<const float4*>(p);
            acc[u & 3] += static_cast<double>((f.x + f.y) + (f.z + f.w));
          } else {
            const double2 d = *reinterpret_cast<const double2*>(p);
            acc[(2 * u) & 3] += d.x;
            acc[(2 * u + 1) & 3] += d.y;
          }
        }
      } else {
#pragma unroll
        for (int j = 0; j < kHalf; ++j) acc[j & 3] += static_cast<double>(b.share[row][first + j]);
      }
    }
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
  }

  __device__ static __forceinline__ void put_rotation(Buffer& b, int g, int k, T s, T tau) {
    b.rot[g * P + k][0] = s;
    b.rot[g * P + k][1] = tau;
  }

  // (s, tau) of pairs k .. k + kRotLoad - 1 of group g (after a __syncwarp):
  // one 16-byte load. Read where they are applied, so that the rotations of a
  // step are not all live at once (at 32 x 32 float32 that spilled).
  // (NC >= 4, so a group's pairs come in twos: float32's load holds two.)
  static constexpr int kRotLoad = sizeof(T) == sizeof(float) ? 2 : 1;
  static_assert(P % kRotLoad == 0, "the rotations' loads cover the group's pairs");
  __device__ static __forceinline__ void get_rotations(const Buffer& b, int g, int k, T (&s)[kRotLoad],
                                                       T (&tau)[kRotLoad]) {
    if constexpr (kRotLoad == 2) {
      const float4 f = *reinterpret_cast<const float4*>(&b.rot[g * P + k][0]);
      s[0] = f.x;
      tau[0] = f.y;
      s[1] = f.z;
      tau[1] = f.w;
    } else {
      const double2 d = *reinterpret_cast<const double2*>(&b.rot[g * P + k][0]);
      s[0] = d.x;
      tau[0] = d.y;
    }
  }
};

}  // namespace cuda
}  // namespace jsvd
