// Element access by run-time dtype code (DSK_F32/F16/BF16) for the scalar
// reference kernels. Slow on purpose: plain, obviously correct code.
#pragma once

#include <cstddef>
#include <cstdint>

#include "half_bits.h"
#include "kernels.h"

namespace {

inline float dsk_ref_load(const void* base, int dtype, size_t i) {
    switch (dtype) {
        case DSK_F16:
            return dsk_f16_bits_to_f32(static_cast<const uint16_t*>(base)[i]);
        case DSK_BF16:
            return dsk_bf16_bits_to_f32(static_cast<const uint16_t*>(base)[i]);
        default:
            return static_cast<const float*>(base)[i];
    }
}

inline void dsk_ref_store(void* base, int dtype, size_t i, float x) {
    switch (dtype) {
        case DSK_F16:
            static_cast<uint16_t*>(base)[i] = dsk_f32_to_f16_bits(x);
            break;
        case DSK_BF16:
            static_cast<uint16_t*>(base)[i] = dsk_f32_to_bf16_bits(x);
            break;
        default:
            static_cast<float*>(base)[i] = x;
            break;
    }
}

}  // namespace
