// AVX-512 instantiation of the conversion kernel (convert_body.h).
#include "simd_avx512.h"
#include "convert_body.h"

namespace ds::kernels::avx512 {

void convert(const void* src, int src_dtype, void* dst, int dst_dtype, size_t n) {
    convert_run<Avx512Ops>(src, src_dtype, dst, dst_dtype, n);
}

}  // namespace ds::kernels::avx512
