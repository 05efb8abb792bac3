// AVX-512 instantiation of the sum-of-squares and axpy kernels (reduce_body.h).
#include "simd_avx512.h"
#include "reduce_body.h"

namespace ds::kernels::avx512 {

double sumsq(const void* x, int dtype, size_t n) { return sumsq_run<Avx512Ops>(x, dtype, n); }

void axpy(void* dst, int dst_dtype, const void* src, int src_dtype, float scale, size_t n) {
    axpy_run<Avx512Ops>(dst, dst_dtype, src, src_dtype, scale, n);
}

double axpy_sumsq(void* dst, int dst_dtype, const void* src, int src_dtype, float scale, bool overwrite, size_t n) {
    return axpy_sumsq_run<Avx512Ops>(dst, dst_dtype, src, src_dtype, scale, overwrite, n);
}

}  // namespace ds::kernels::avx512
