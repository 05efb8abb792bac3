/* DLTensor helpers for the C API tests (C99). */
#ifndef DS_TEST_TENSOR_UTIL_H
#define DS_TEST_TENSOR_UTIL_H

#include <stdint.h>
#include <string.h>

#include "deepspeed_c.h"

/* A contiguous CPU tensor over `data` (shape copied into `shape_store`). */
static inline DLTensor make_tensor(void* data, int32_t ndim, int64_t* shape, uint8_t code, uint8_t bits) {
    DLTensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.device.device_type = kDLCPU;
    t.device.device_id = 0;
    t.ndim = ndim;
    t.dtype.code = code;
    t.dtype.bits = bits;
    t.dtype.lanes = 1;
    t.shape = shape;
    t.strides = NULL;
    t.byte_offset = 0;
    return t;
}

static inline DLTensor f32_tensor(float* data, int32_t ndim, int64_t* shape) {
    return make_tensor(data, ndim, shape, kDLFloat, 32);
}

static inline uint16_t f32_to_f16_bits(float f) { /* exact only for values representable in fp16 */
    uint32_t x;
    uint32_t sign, exp, man;
    memcpy(&x, &f, 4);
    sign = (x >> 16) & 0x8000u;
    exp = (x >> 23) & 0xFFu;
    man = x & 0x7FFFFFu;
    if (exp == 0xFF) return (uint16_t)(sign | 0x7C00u | (man ? 0x200u : 0u));
    if (exp == 0 && man == 0) return (uint16_t)sign;
    return (uint16_t)(sign | ((exp - 112u) << 10) | (man >> 13));
}

#endif
