// TRANSITIONAL — delete once engine/ and zero/ call ds::Kernels directly.
// The dsk_* names those modules call today (they were the flat kernel entry
// points, which throw no more and return a status): thin wrappers over the
// CPU table that throw ds::Error as before. Included from core/dtype.h so the
// callers need no edit.
#pragma once

#include "core/kernel_backend.h"

inline void dsk_convert(const void* src, int src_dtype, void* dst, int dst_dtype, size_t n) {
    ds::cpu_kernels().convert(src, src_dtype, dst, dst_dtype, n);
}
inline void dsk_scale(void* x, int dtype, float s, size_t n) { ds::cpu_kernels().scale(x, dtype, s, n); }
inline double dsk_sumsq(const void* x, int dtype, size_t n, int* nonfinite) {
    return ds::cpu_kernels().sumsq(x, dtype, n, nonfinite);
}
inline void dsk_axpy(void* dst, int dst_dtype, const void* src, int src_dtype, float scale, size_t n) {
    ds::cpu_kernels().axpy(dst, dst_dtype, src, src_dtype, scale, n);
}
inline double dsk_axpy_sumsq(void* dst, int dst_dtype, const void* src, int src_dtype, float scale, int overwrite,
                             size_t n, int* nonfinite) {
    return ds::cpu_kernels().axpy_sumsq(dst, dst_dtype, src, src_dtype, scale, overwrite, n, nonfinite);
}
