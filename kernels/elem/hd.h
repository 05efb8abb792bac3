// DSK_HD marks the per-element kernel code that both backends compile: the
// CPU kernels (host compiler: the macro is empty, so the CPU objects are
// unchanged) and the CUDA kernels (nvcc: __host__ __device__). The same
// header is what the host tests exercise, so a per-element body is written,
// and tested, once (DESIGN.md "The CUDA backend").
#pragma once

#if defined(__CUDACC__)
#define DSK_HD __host__ __device__
// Kernel bodies must inline into their loops on both sides.
#define DSK_ALWAYS_INLINE __host__ __device__ __forceinline__
#else
#define DSK_HD
// GCC gives up inlining the larger dtype combinations otherwise and calls
// step() once per vector.
#define DSK_ALWAYS_INLINE inline __attribute__((always_inline))
#endif
