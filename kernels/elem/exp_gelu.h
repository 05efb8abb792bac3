// The exp of the nn kernels (softmax, GELU) and the tanh-GELU per-element
// functions, shared by the CPU loops (kernels/cpu/nn_ops_body.h, vectorised
// by the compiler) and the CUDA kernels (kernels/cuda/gelu.cu, softmax_xent.cu).
#pragma once

#include <cstdint>
#include <cstring>

#include "hd.h"

namespace {

// e^x for x in float range, in plain arithmetic so that it vectorises (libm's
// expf does not without -ffast-math): x = k*ln2 + r with |r| <= ln2/2,
// e^r by its degree-7 Taylor polynomial (truncation ~5e-9 relative), 2^k by
// building the exponent bits. Inputs are clamped to [-87, 88], so the result
// is never 0 or Inf (callers only need it where e^x is representable, or
// negligible against a sum >= 1).
DSK_ALWAYS_INLINE float vexp(float x) {
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    // Round x/ln2 to the nearest integer with the 1.5*2^23 trick (no libm call).
    const float kf = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    // ln2 split in two so that k*ln2_hi is exact (Cody-Waite).
    const float r = (x - kf * 0.693359375f) + kf * 2.12194440e-4f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    // Unsigned shift: a NaN input makes kf's conversion INT_MIN, and a signed
    // shift of that would be undefined (the result is NaN either way).
    const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(kf) + 127) << 23;
    float two_k;
    std::memcpy(&two_k, &bits, sizeof two_k);
    return p * two_k;
}

// GELU through the logistic form of tanh: 0.5*(1 + tanh(u)) = s = 1/(1 + e^{-2u})
// = E/(E + 1) with E = e^{2u}, and 1 - tanh(u)^2 = 4*s*(1 - s) = 4*E/(E + 1)^2.
// Written this way nothing cancels: the direct 1 + tanh(u) loses all digits
// for x < -3 and 1 - t*t for |x| > 3 (measured: errors ~1e-3 in dx).
constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kGeluA = 0.044715f;

// e^{2u}, with 2u capped at 40 (s = 1 to float precision there) so that
// 1/(E + 1) stays a normal number.
DSK_ALWAYS_INLINE float gelu_exp2u(float v) {
    float t = 2.0f * kGeluC * (v + kGeluA * v * v * v);
    t = t > 40.0f ? 40.0f : t;
    return vexp(t);
}

DSK_ALWAYS_INLINE float gelu_fwd_elem(float v) {
    const float e = gelu_exp2u(v);
    return v * (e / (e + 1.0f));
}

// d/dx x*s(2u) = s + x * 2*s*(1 - s) * du/dx, du/dx = sqrt(2/pi)(1 + 3a x^2).
DSK_ALWAYS_INLINE float gelu_bwd_elem(float v, float dy) {
    const float e = gelu_exp2u(v);
    const float d = 1.0f / (e + 1.0f);
    const float s = e * d, s1s = s * d;  // s and s*(1 - s)
    const float du = kGeluC * (1.0f + 3.0f * kGeluA * v * v);
    return dy * (s + 2.0f * v * s1s * du);
}

}  // namespace
