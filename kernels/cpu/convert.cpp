// dtype conversion entry points: argument checks; the body runs on the
// chosen ISA (isa_table.h).
#include <cstring>

#include "arg_check.h"
#include "isa_table.h"

using namespace ds::kernels;

extern "C" {

int dsk_cpu_convert(const void* src, int src_dtype, void* dst, int dst_dtype, size_t n) noexcept {
    ArgCheck k("dsk_convert");
    if (k.dtype("src_dtype", src_dtype).dtype("dst_dtype", dst_dtype).ptr("src", src, n).ptr("dst", dst, n).failed())
        return k.status();
    if (n == 0) return DSK_OK;
    if (src_dtype == dst_dtype) {
        if (src != dst) std::memmove(dst, src, n * (src_dtype == DSK_F32 ? 4 : 2));
        return DSK_OK;
    }
    isa_kernels().convert(src, src_dtype, dst, dst_dtype, n);
    return DSK_OK;
}

int dsk_f32_to_f16(const float* src, uint16_t* dst, size_t n) noexcept {
    return dsk_cpu_convert(src, DSK_F32, dst, DSK_F16, n);
}
int dsk_f16_to_f32(const uint16_t* src, float* dst, size_t n) noexcept {
    return dsk_cpu_convert(src, DSK_F16, dst, DSK_F32, n);
}
int dsk_f32_to_bf16(const float* src, uint16_t* dst, size_t n) noexcept {
    return dsk_cpu_convert(src, DSK_F32, dst, DSK_BF16, n);
}
int dsk_bf16_to_f32(const uint16_t* src, float* dst, size_t n) noexcept {
    return dsk_cpu_convert(src, DSK_BF16, dst, DSK_F32, n);
}

}  // extern "C"
