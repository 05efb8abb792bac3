// Scalar reference conversions fp32 <-> fp16 / bf16 (see half_bits.h for the
// exact rounding and NaN rules).
#include "half_bits.h"
#include "kernels.h"

extern "C" {

uint16_t dsk_ref_f32_to_f16(float x) { return dsk_f32_to_f16_bits(x); }
float dsk_ref_f16_to_f32(uint16_t h) { return dsk_f16_bits_to_f32(h); }
uint16_t dsk_ref_f32_to_bf16(float x) { return dsk_f32_to_bf16_bits(x); }
float dsk_ref_bf16_to_f32(uint16_t h) { return dsk_bf16_bits_to_f32(h); }

}  // extern "C"
