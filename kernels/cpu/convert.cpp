// dtype conversion entry points: argument checks and ISA dispatch; the scalar
// path instantiates convert_body.h with ScalarOps.
#include <cstring>

#include "convert_body.h"
#include "dispatch_check.h"
#include "isa_entry.h"

namespace ds::kernels::scalar {
void convert(const void* src, int src_dtype, void* dst, int dst_dtype, size_t n) {
    convert_run<ScalarOps>(src, src_dtype, dst, dst_dtype, n);
}
}  // namespace ds::kernels::scalar

namespace {

size_t dtype_size(int dtype) { return dtype == DSK_F32 ? 4 : 2; }

void convert_dispatch(const void* src, int src_dtype, void* dst, int dst_dtype, size_t n) {
    switch (dsk_cpu_isa()) {
        case DSK_ISA_AVX512:
            ds::kernels::avx512::convert(src, src_dtype, dst, dst_dtype, n);
            break;
        case DSK_ISA_AVX2:
            ds::kernels::avx2::convert(src, src_dtype, dst, dst_dtype, n);
            break;
        default:
            ds::kernels::scalar::convert(src, src_dtype, dst, dst_dtype, n);
            break;
    }
}

}  // namespace

extern "C" {

void dsk_convert(const void* src, int src_dtype, void* dst, int dst_dtype, size_t n) {
    check_dtype("dsk_convert", "src_dtype", src_dtype);
    check_dtype("dsk_convert", "dst_dtype", dst_dtype);
    check_ptr("dsk_convert", "src", src, n);
    check_ptr("dsk_convert", "dst", dst, n);
    if (n == 0) return;
    if (src_dtype == dst_dtype) {
        if (src != dst) std::memmove(dst, src, n * dtype_size(src_dtype));
        return;
    }
    convert_dispatch(src, src_dtype, dst, dst_dtype, n);
}

void dsk_f32_to_f16(const float* src, uint16_t* dst, size_t n) { dsk_convert(src, DSK_F32, dst, DSK_F16, n); }
void dsk_f16_to_f32(const uint16_t* src, float* dst, size_t n) { dsk_convert(src, DSK_F16, dst, DSK_F32, n); }
void dsk_f32_to_bf16(const float* src, uint16_t* dst, size_t n) {
    dsk_convert(src, DSK_F32, dst, DSK_BF16, n);
}
void dsk_bf16_to_f32(const uint16_t* src, float* dst, size_t n) {
    dsk_convert(src, DSK_BF16, dst, DSK_F32, n);
}

}  // extern "C"
