// Bit-exact scalar conversions between fp32 and the 16-bit float formats.
// Shared by the reference kernels and by the scalar tails of the SIMD kernels,
// so both agree bit for bit with each other and with the hardware paths:
//  * fp32 -> fp16: round to nearest even; overflow (|x| >= 65520) -> Inf;
//    fp16 subnormals produced exactly; NaN -> quiet NaN keeping the top 9
//    payload bits and the sign (what F16C's vcvtps2ph does).
//  * fp16 -> fp32: exact; NaN comes back quiet with its payload (as vcvtph2ps).
//  * fp32 -> bf16: round to nearest even by integer add (0x7FFF + lsb); every
//    NaN -> 0x7FC0 (DeepSpeed's bf16 store).
//  * bf16 -> fp32: exact 16-bit shift (a signalling bf16 NaN stays a NaN).
// Everything is in an anonymous namespace: this header is also included from
// files compiled with AVX2/AVX-512 flags, and those copies must never be
// merged with baseline copies by the linker. DSK_HALF_INLINE: see
// DSK_FORCE_INLINE_SCALAR in cpu/simd_scalar.h.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)  // the CUDA kernels' conversions are these same functions
#define DSK_HALF_INLINE __host__ __device__ __forceinline__
#elif defined(DSK_FORCE_INLINE_SCALAR)
#define DSK_HALF_INLINE inline __attribute__((always_inline))
#else
#define DSK_HALF_INLINE inline
#endif

namespace {

DSK_HALF_INLINE uint32_t dsk_float_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

DSK_HALF_INLINE float dsk_bits_float(uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

DSK_HALF_INLINE uint16_t dsk_f32_to_f16_bits(float f) {
    const uint32_t x = dsk_float_bits(f);
    const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
    const uint32_t ax = x & 0x7FFFFFFFu;
    if (ax > 0x7F800000u)  // NaN: quiet bit set, top payload bits kept
        return static_cast<uint16_t>(sign | 0x7E00u | ((ax >> 13) & 0x3FFu));
    if (ax >= 0x477FF000u)  // >= 65520 (half-way above 65504, odd mantissa) or Inf
        return static_cast<uint16_t>(sign | 0x7C00u);
    if (ax >= 0x38800000u) {  // result is a normal fp16 (>= 2^-14 before rounding)
        const uint32_t r = ax + 0xFFFu + ((ax >> 13) & 1u) - (112u << 23);
        return static_cast<uint16_t>(sign | (r >> 13));
    }
    const uint32_t e = ax >> 23;
    if (e < 102) return sign;  // below 2^-25: rounds to zero
    // fp16 subnormal: k * 2^-24 with k = RNE(mantissa24 >> shift).
    const uint32_t m24 = (ax & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126 - e;  // 14 .. 24
    uint32_t k = m24 >> shift;
    const uint32_t rem = m24 & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (k & 1u))) ++k;
    return static_cast<uint16_t>(sign | k);
}

DSK_HALF_INLINE float dsk_f16_bits_to_f32(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1Fu;
    uint32_t m = h & 0x3FFu;
    if (e == 0x1F)  // Inf, or NaN made quiet
        return dsk_bits_float(sign | 0x7F800000u | (m ? (0x400000u | (m << 13)) : 0u));
    if (e == 0) {
        if (m == 0) return dsk_bits_float(sign);
        uint32_t exp = 113;  // normalise the subnormal
        while (!(m & 0x400u)) {
            m <<= 1;
            --exp;
        }
        return dsk_bits_float(sign | (exp << 23) | ((m & 0x3FFu) << 13));
    }
    return dsk_bits_float(sign | ((e + 112u) << 23) | (m << 13));
}

DSK_HALF_INLINE uint16_t dsk_f32_to_bf16_bits(float f) {
    const uint32_t x = dsk_float_bits(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0u;
    return static_cast<uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

DSK_HALF_INLINE float dsk_bf16_bits_to_f32(uint16_t h) { return dsk_bits_float(static_cast<uint32_t>(h) << 16); }

}  // namespace
