// Scalar reference for dsk_cpu_scale.
#include "kernels.h"

extern "C" void dsk_ref_scale(void* x, int dtype, float s, size_t n) {
    if (dtype == DSK_F32) {
        float* p = static_cast<float*>(x);
        for (size_t i = 0; i < n; ++i) p[i] = p[i] * s;
        return;
    }
    uint16_t* h = static_cast<uint16_t*>(x);
    for (size_t i = 0; i < n; ++i) {
        float v = dtype == DSK_F16 ? dsk_ref_f16_to_f32(h[i]) : dsk_ref_bf16_to_f32(h[i]);
        v = v * s;
        h[i] = dtype == DSK_F16 ? dsk_ref_f32_to_f16(v) : dsk_ref_f32_to_bf16(v);
    }
}
