// AVX-512 (F/BW/VL/DQ + F16C) vector operations, 16 floats per vector.
// Include only from *_avx512.cpp files. fp16 uses the hardware converts with
// round-to-nearest-even; bf16 loads are a 16-bit shift, stores round to
// nearest even by integer add and map every NaN to 0x7FC0 (as half_bits.h).
#pragma once

#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__F16C__)
#error "simd_avx512.h needs -mavx512f -mavx512bw -mf16c (include it only from *_avx512.cpp)"
#endif

// GCC 12's AVX-512 headers trip a false -Wuninitialized (GCC bug 105593) in
// the intrinsics' own "undefined" placeholder operands; silence it only there.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstddef>
#include <cstdint>

namespace {

struct Avx512Ops {
    using F = __m512;
    static constexpr size_t W = 16;
    static constexpr const char* name = "avx512";

    static F set1(float x) { return _mm512_set1_ps(x); }
    static F load_f32(const float* p) { return _mm512_loadu_ps(p); }
    static void store_f32(float* p, F x) { _mm512_storeu_ps(p, x); }
    static F load_f16(const uint16_t* p) {
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    }
    static void store_f16(uint16_t* p, F x) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                            _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    // Non-temporal 16-bit stores (p 32-byte aligned) for large write-only
    // outputs: they skip the read-for-ownership of the destination line.
    static void stream_f16(uint16_t* p, F x) {
        _mm256_stream_si256(reinterpret_cast<__m256i*>(p),
                            _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    static void stream_bf16(uint16_t* p, F x) {
        _mm256_stream_si256(reinterpret_cast<__m256i*>(p), bf16_round(x));
    }
    static void stream_f32(float* p, F x) { _mm512_stream_ps(p, x); }  // p 64-byte aligned
    static void stream_fence() { _mm_sfence(); }
    static F load_bf16(const uint16_t* p) {
        const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
        return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
    }
    static void store_bf16(uint16_t* p, F x) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), bf16_round(x));
    }
    static __m256i bf16_round(F x) {
        const __m512i u = _mm512_castps_si512(x);
        const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
        __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF)));
        r = _mm512_srli_epi32(r, 16);
        const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
        r = _mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(0x7FC0));
        return _mm512_cvtepi32_epi16(r);
    }

    static F add(F a, F b) { return _mm512_add_ps(a, b); }
    static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
    static F div(F a, F b) { return _mm512_div_ps(a, b); }
    static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
    static F sqrt(F a) { return _mm512_sqrt_ps(a); }
    static F sign(F c) {
        const F zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f);
        const F pos = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(c, zero, _CMP_GT_OQ), one);
        const F neg = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(c, zero, _CMP_LT_OQ), one);
        return _mm512_mask_mov_ps(_mm512_sub_ps(pos, neg), _mm512_cmp_ps_mask(c, c, _CMP_UNORD_Q), c);
    }

    struct DAcc {
        __m512d lo, hi;
    };
    static DAcc dacc_zero() { return DAcc{_mm512_setzero_pd(), _mm512_setzero_pd()}; }
    static void dacc_add_sq(DAcc& a, F x) {
        const __m512d l = _mm512_cvtps_pd(_mm512_castps512_ps256(x));
        const __m512d h = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
        a.lo = _mm512_fmadd_pd(l, l, a.lo);
        a.hi = _mm512_fmadd_pd(h, h, a.hi);
    }
    static void dacc_merge(DAcc& a, const DAcc& b) {
        a.lo = _mm512_add_pd(a.lo, b.lo);
        a.hi = _mm512_add_pd(a.hi, b.hi);
    }
    static double dacc_sum(const DAcc& a) { return _mm512_reduce_add_pd(_mm512_add_pd(a.lo, a.hi)); }
};

}  // namespace
