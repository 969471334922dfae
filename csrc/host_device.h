// JSVD_HOST_DEVICE: for small functions that both the host code and the
// kernels call (plain functions where nvcc is not compiling).
#pragma once

#ifdef __CUDACC__
#define JSVD_HOST_DEVICE __host__ __device__
#define JSVD_HOST_DEVICE_INLINE __host__ __device__ __forceinline__
#else
#define JSVD_HOST_DEVICE
#define JSVD_HOST_DEVICE_INLINE inline
#endif
