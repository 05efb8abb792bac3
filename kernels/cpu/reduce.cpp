// Sum-of-squares and axpy entry points: argument checks and ISA dispatch; the
// scalar path instantiates reduce_body.h with ScalarOps.
#include <cmath>

#include "dispatch_check.h"
#include "isa_entry.h"
#include "reduce_body.h"

namespace ds::kernels::scalar {
double sumsq(const void* x, int dtype, size_t n) { return sumsq_run<ScalarOps>(x, dtype, n); }
void axpy(void* dst, int dst_dtype, const void* src, int src_dtype, float scale, size_t n) {
    axpy_run<ScalarOps>(dst, dst_dtype, src, src_dtype, scale, n);
}
double axpy_sumsq(void* dst, int dst_dtype, const void* src, int src_dtype, float scale, bool overwrite, size_t n) {
    return axpy_sumsq_run<ScalarOps>(dst, dst_dtype, src, src_dtype, scale, overwrite, n);
}
}  // namespace ds::kernels::scalar

extern "C" {

double dsk_sumsq(const void* x, int dtype, size_t n, int* nonfinite) {
    check_dtype("dsk_sumsq", "dtype", dtype);
    check_ptr("dsk_sumsq", "x", x, n);
    double s = 0.0;
    if (n > 0) {
        switch (dsk_cpu_isa()) {
            case DSK_ISA_AVX512:
                s = ds::kernels::avx512::sumsq(x, dtype, n);
                break;
            case DSK_ISA_AVX2:
                s = ds::kernels::avx2::sumsq(x, dtype, n);
                break;
            default:
                s = ds::kernels::scalar::sumsq(x, dtype, n);
                break;
        }
    }
    // Every finite fp32 square is < 2^256, so the double sum of finite inputs
    // cannot overflow: the sum is non-finite exactly when an input is Inf/NaN.
    if (nonfinite) *nonfinite = std::isfinite(s) ? 0 : 1;
    return s;
}

void dsk_axpy(void* dst, int dst_dtype, const void* src, int src_dtype, float scale, size_t n) {
    check_dtype("dsk_axpy", "dst_dtype", dst_dtype);
    check_dtype("dsk_axpy", "src_dtype", src_dtype);
    check_ptr("dsk_axpy", "dst", dst, n);
    check_ptr("dsk_axpy", "src", src, n);
    if (n == 0) return;
    switch (dsk_cpu_isa()) {
        case DSK_ISA_AVX512:
            ds::kernels::avx512::axpy(dst, dst_dtype, src, src_dtype, scale, n);
            break;
        case DSK_ISA_AVX2:
            ds::kernels::avx2::axpy(dst, dst_dtype, src, src_dtype, scale, n);
            break;
        default:
            ds::kernels::scalar::axpy(dst, dst_dtype, src, src_dtype, scale, n);
            break;
    }
}

double dsk_axpy_sumsq(void* dst, int dst_dtype, const void* src, int src_dtype, float scale, int overwrite,
                     size_t n, int* nonfinite) {
    check_dtype("dsk_axpy_sumsq", "dst_dtype", dst_dtype);
    check_dtype("dsk_axpy_sumsq", "src_dtype", src_dtype);
    check_ptr("dsk_axpy_sumsq", "dst", dst, n);
    check_ptr("dsk_axpy_sumsq", "src", src, n);
    double s = 0.0;
    if (n > 0) {
        const bool over = overwrite != 0;
        switch (dsk_cpu_isa()) {
            case DSK_ISA_AVX512:
                s = ds::kernels::avx512::axpy_sumsq(dst, dst_dtype, src, src_dtype, scale, over, n);
                break;
            case DSK_ISA_AVX2:
                s = ds::kernels::avx2::axpy_sumsq(dst, dst_dtype, src, src_dtype, scale, over, n);
                break;
            default:
                s = ds::kernels::scalar::axpy_sumsq(dst, dst_dtype, src, src_dtype, scale, over, n);
                break;
        }
    }
    if (nonfinite) *nonfinite = std::isfinite(s) ? 0 : 1;  // as dsk_sumsq
    return s;
}

}  // extern "C"
