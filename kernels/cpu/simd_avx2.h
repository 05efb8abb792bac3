// AVX2 + FMA + F16C vector operations, 8 floats per vector. Include only from
// *_avx2.cpp files. Same rounding and NaN rules as simd_avx512.h.
#pragma once

#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "simd_avx2.h needs -mavx2 -mfma -mf16c (include it only from *_avx2.cpp)"
#endif

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace {

struct Avx2Ops {
    using F = __m256;
    static constexpr size_t W = 8;
    static constexpr const char* name = "avx2";

    static F set1(float x) { return _mm256_set1_ps(x); }
    static F load_f32(const float* p) { return _mm256_loadu_ps(p); }
    static void store_f32(float* p, F x) { _mm256_storeu_ps(p, x); }
    static F load_f16(const uint16_t* p) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    }
    static void store_f16(uint16_t* p, F x) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                         _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    // Non-temporal 16-bit stores (p 16-byte aligned), as in simd_avx512.h.
    static void stream_f16(uint16_t* p, F x) {
        _mm_stream_si128(reinterpret_cast<__m128i*>(p),
                         _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    static void stream_bf16(uint16_t* p, F x) {
        _mm_stream_si128(reinterpret_cast<__m128i*>(p), bf16_round(x));
    }
    static void stream_f32(float* p, F x) { _mm256_stream_ps(p, x); }  // p 32-byte aligned
    static void stream_fence() { _mm_sfence(); }
    static F load_bf16(const uint16_t* p) {
        const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
    }
    static void store_bf16(uint16_t* p, F x) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(p), bf16_round(x));
    }
    static __m128i bf16_round(F x) {
        const __m256i u = _mm256_castps_si256(x);
        const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
        __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF)));
        r = _mm256_srli_epi32(r, 16);
        const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
        r = _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7FC0), _mm256_castps_si256(nan));
        // Every lane is <= 0xFFFF, so unsigned saturation is just a narrowing.
        return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    }

    static F add(F a, F b) { return _mm256_add_ps(a, b); }
    static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
    static F div(F a, F b) { return _mm256_div_ps(a, b); }
    static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
    static F sqrt(F a) { return _mm256_sqrt_ps(a); }
    static F sign(F c) {
        const F zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f);
        const F pos = _mm256_and_ps(_mm256_cmp_ps(c, zero, _CMP_GT_OQ), one);
        const F neg = _mm256_and_ps(_mm256_cmp_ps(c, zero, _CMP_LT_OQ), one);
        return _mm256_blendv_ps(_mm256_sub_ps(pos, neg), c, _mm256_cmp_ps(c, c, _CMP_UNORD_Q));
    }

    struct DAcc {
        __m256d lo, hi;
    };
    static DAcc dacc_zero() { return DAcc{_mm256_setzero_pd(), _mm256_setzero_pd()}; }
    static void dacc_add_sq(DAcc& a, F x) {
        const __m256d l = _mm256_cvtps_pd(_mm256_castps256_ps128(x));
        const __m256d h = _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1));
        a.lo = _mm256_fmadd_pd(l, l, a.lo);
        a.hi = _mm256_fmadd_pd(h, h, a.hi);
    }
    static void dacc_merge(DAcc& a, const DAcc& b) {
        a.lo = _mm256_add_pd(a.lo, b.lo);
        a.hi = _mm256_add_pd(a.hi, b.hi);
    }
    static double dacc_sum(const DAcc& a) {
        const __m256d s = _mm256_add_pd(a.lo, a.hi);
        const __m128d q = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
        return _mm_cvtsd_f64(_mm_add_sd(q, _mm_unpackhi_pd(q, q)));
    }
};

}  // namespace
