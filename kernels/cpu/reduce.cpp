// Sum-of-squares and axpy entry points: argument checks; the bodies run on
// the chosen ISA (isa_table.h).
#include <cmath>

#include "arg_check.h"
#include "isa_table.h"

using namespace ds::kernels;

namespace {

// Every finite fp32 square is < 2^256, so the double sum of finite inputs
// cannot overflow: the sum is non-finite exactly when an input is Inf/NaN.
void report(double s, double* sumsq, int* nonfinite) {
    if (sumsq) *sumsq = s;
    if (nonfinite) *nonfinite = std::isfinite(s) ? 0 : 1;
}

}  // namespace

extern "C" {

int dsk_cpu_sumsq(const void* x, int dtype, size_t n, double* sumsq, int* nonfinite) noexcept {
    ArgCheck k("dsk_sumsq");
    if (k.dtype("dtype", dtype).ptr("x", x, n).failed()) return k.status();
    report(n > 0 ? isa_kernels().sumsq(x, dtype, n) : 0.0, sumsq, nonfinite);
    return DSK_OK;
}

int dsk_cpu_axpy(void* dst, int dst_dtype, const void* src, int src_dtype, float scale, size_t n) noexcept {
    ArgCheck k("dsk_axpy");
    if (k.dtype("dst_dtype", dst_dtype).dtype("src_dtype", src_dtype).ptr("dst", dst, n).ptr("src", src, n).failed())
        return k.status();
    if (n > 0) isa_kernels().axpy(dst, dst_dtype, src, src_dtype, scale, n);
    return DSK_OK;
}

int dsk_cpu_axpy_sumsq(void* dst, int dst_dtype, const void* src, int src_dtype, float scale, int overwrite,
                       size_t n, double* sumsq, int* nonfinite) noexcept {
    ArgCheck k("dsk_axpy_sumsq");
    if (k.dtype("dst_dtype", dst_dtype).dtype("src_dtype", src_dtype).ptr("dst", dst, n).ptr("src", src, n).failed())
        return k.status();
    const double s =
        n > 0 ? isa_kernels().axpy_sumsq(dst, dst_dtype, src, src_dtype, scale, overwrite != 0, n) : 0.0;
    report(s, sumsq, nonfinite);
    return DSK_OK;
}

}  // extern "C"
