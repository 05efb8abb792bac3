// Scalar reference for the sum of squares and axpy kernels.
#include <cmath>

#include "kernels.h"
#include "ref_dtype.h"

extern "C" {

double dsk_ref_sumsq(const void* x, int dtype, size_t n, int* nonfinite) {
    double sum = 0.0;
    int bad = 0;
    for (size_t i = 0; i < n; ++i) {
        const double v = dsk_ref_load(x, dtype, i);
        if (!std::isfinite(v)) bad = 1;
        sum += v * v;
    }
    if (nonfinite) *nonfinite = bad;
    return sum;
}

void dsk_ref_axpy(void* dst, int dst_dtype, const void* src, int src_dtype, float scale, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        const float d = dsk_ref_load(dst, dst_dtype, i);
        const float s = dsk_ref_load(src, src_dtype, i);
        dsk_ref_store(dst, dst_dtype, i, std::fmaf(scale, s, d));
    }
}

double dsk_ref_axpy_sumsq(void* dst, int dst_dtype, const void* src, int src_dtype, float scale, int overwrite,
                          size_t n, int* nonfinite) {
    if (overwrite) {
        for (size_t i = 0; i < n; ++i) dsk_ref_store(dst, dst_dtype, i, scale * dsk_ref_load(src, src_dtype, i));
    } else {
        dsk_ref_axpy(dst, dst_dtype, src, src_dtype, scale, n);
    }
    return dsk_ref_sumsq(dst, dst_dtype, n, nonfinite);
}

}  // extern "C"
