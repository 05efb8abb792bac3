// AVX2 instantiation of the conversion kernel (convert_body.h).
#include "simd_avx2.h"
#include "convert_body.h"

namespace ds::kernels::avx2 {

void convert(const void* src, int src_dtype, void* dst, int dst_dtype, size_t n) {
    convert_run<Avx2Ops>(src, src_dtype, dst, dst_dtype, n);
}

}  // namespace ds::kernels::avx2
