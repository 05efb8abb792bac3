// Width-1 "vector" operations: the scalar path and the scalar tails of the
// SIMD kernels. Same interface as simd_avx2.h / simd_avx512.h, so the kernel
// bodies (*_body.h) are written once and the tails do identical math.
// Anonymous namespace: also compiled into the AVX2/AVX-512 files, whose
// copies must stay private to them.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "../ref/half_bits.h"
#include "hd.h"

// isa_table_scalar.cpp, which instantiates every scalar kernel in one file,
// defines DSK_FORCE_INLINE_SCALAR: GCC's unit-growth limit would otherwise
// keep load_f16/store_f16 and the fp16 bit conversions (../ref/half_bits.h)
// as calls there (measured 7-14 % slower). Elsewhere (the SIMD kernels'
// scalar tails, the references) the compiler decides, as it always did.
// Under nvcc the same operations are the CUDA kernels' per-element math
// (fmaf, sqrtf and division are correctly rounded on the device without
// fast-math, so a device result equals the host one bit for bit).
#if defined(__CUDACC__)
#define DSK_SCALAR_OP static __host__ __device__ __forceinline__
#elif defined(DSK_FORCE_INLINE_SCALAR)
#define DSK_SCALAR_OP static inline __attribute__((always_inline))
#else
#define DSK_SCALAR_OP static
#endif

namespace {

struct ScalarOps {
    using F = float;
    static constexpr size_t W = 1;
    static constexpr const char* name = "scalar";

    DSK_SCALAR_OP F set1(float x) { return x; }
    DSK_SCALAR_OP F load_f32(const float* p) { return *p; }
    DSK_SCALAR_OP void store_f32(float* p, F x) { *p = x; }
    DSK_SCALAR_OP F load_f16(const uint16_t* p) { return dsk_f16_bits_to_f32(*p); }
    DSK_SCALAR_OP void store_f16(uint16_t* p, F x) { *p = dsk_f32_to_f16_bits(x); }
    DSK_SCALAR_OP F load_bf16(const uint16_t* p) { return dsk_bf16_bits_to_f32(*p); }
    DSK_SCALAR_OP void store_bf16(uint16_t* p, F x) { *p = dsk_f32_to_bf16_bits(x); }
    DSK_SCALAR_OP void stream_f16(uint16_t* p, F x) { store_f16(p, x); }
    DSK_SCALAR_OP void stream_bf16(uint16_t* p, F x) { store_bf16(p, x); }
    DSK_SCALAR_OP void stream_f32(float* p, F x) { *p = x; }
    DSK_SCALAR_OP void stream_fence() {}

    DSK_SCALAR_OP F add(F a, F b) { return a + b; }
    DSK_SCALAR_OP F mul(F a, F b) { return a * b; }
    DSK_SCALAR_OP F div(F a, F b) { return a / b; }
    DSK_SCALAR_OP F fma(F a, F b, F c) { return ::fmaf(a, b, c); }
    DSK_SCALAR_OP F sqrt(F a) { return ::sqrtf(a); }
    // +1, -1, +0 for +-0, NaN stays NaN.
    DSK_SCALAR_OP F sign(F c) { return c > 0.0f ? 1.0f : c < 0.0f ? -1.0f : (c == c ? 0.0f : c); }

    // Sum of squares in double (x*x is exact in double, so FMA or not is moot).
    struct DAcc {
        double s;
    };
    DSK_SCALAR_OP DAcc dacc_zero() { return DAcc{0.0}; }
    DSK_SCALAR_OP void dacc_add_sq(DAcc& a, F x) {
        const double d = x;
        a.s += d * d;
    }
    DSK_SCALAR_OP void dacc_merge(DAcc& a, const DAcc& b) { a.s += b.s; }
    DSK_SCALAR_OP double dacc_sum(const DAcc& a) { return a.s; }
};

}  // namespace
