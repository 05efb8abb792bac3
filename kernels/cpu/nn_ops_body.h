// The nn kernels' inner loops (nn_ops_isa.h), written once as plain loops the
// compiler vectorises for the ISA of the including file. Include only from
// nn_ops_isa_<isa>.cpp: everything here is private to that file.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "nn_ops_isa.h"
#include "philox.h"

// The clamps below are compares and selects; with GCC's default
// -ftrapping-math it will not if-convert them (a compare "may trap"), and
// the loops stay scalar on AVX2/SSE. Results are unchanged: only the FP
// exception flags, which nothing reads, may differ.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("no-trapping-math")
#endif

namespace {

#define DSK_NN_INLINE inline __attribute__((always_inline))

// e^x for x in float range, in plain arithmetic so that it vectorises (libm's
// expf does not without -ffast-math): x = k*ln2 + r with |r| <= ln2/2,
// e^r by its degree-7 Taylor polynomial (truncation ~5e-9 relative), 2^k by
// building the exponent bits. Inputs are clamped to [-87, 88], so the result
// is never 0 or Inf (callers only need it where e^x is representable, or
// negligible against a sum >= 1).
DSK_NN_INLINE float vexp(float x) {
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
DSK_NN_INLINE float gelu_exp2u(float v) {
    float t = 2.0f * kGeluC * (v + kGeluA * v * v * v);
    t = t > 40.0f ? 40.0f : t;
    return vexp(t);
}

void gelu_fwd_run(const float* x, float* y, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; ++i) {
        const float v = x[i];
        const float e = gelu_exp2u(v);
        y[i] = v * (e / (e + 1.0f));
    }
}

// d/dx x*s(2u) = s + x * 2*s*(1 - s) * du/dx, du/dx = sqrt(2/pi)(1 + 3a x^2).
void gelu_bwd_run(const float* x, const float* dy, float* dx, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; ++i) {
        const float v = x[i];
        const float e = gelu_exp2u(v);
        const float d = 1.0f / (e + 1.0f);
        const float s = e * d, s1s = s * d;  // s and s*(1 - s)
        const float du = kGeluC * (1.0f + 3.0f * kGeluA * v * v);
        dx[i] = dy[i] * (s + 2.0f * v * s1s * du);
    }
}

void ln_fwd_run(const ds::kernels::LnFwdArgs& a, size_t r0, size_t r1) {
    const size_t dim = a.dim;
    const float inv_dim = 1.0f / static_cast<float>(dim);
    for (size_t r = r0; r < r1; ++r) {
        const float* x = a.x + r * dim;
        float* y = a.y + r * dim;
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (size_t j = 0; j < dim; ++j) s += x[j];
        const float mu = s * inv_dim;
        float ss = 0.0f;  // two passes: no cancellation for rows far from 0
#pragma omp simd reduction(+ : ss)
        for (size_t j = 0; j < dim; ++j) {
            const float d = x[j] - mu;
            ss += d * d;
        }
        const float rs = 1.0f / std::sqrt(ss * inv_dim + a.eps);
        if (a.gamma != nullptr) {
            const float* g = a.gamma;
            const float* b = a.beta;
#pragma omp simd
            for (size_t j = 0; j < dim; ++j) y[j] = (x[j] - mu) * rs * g[j] + b[j];
        } else {
#pragma omp simd
            for (size_t j = 0; j < dim; ++j) y[j] = (x[j] - mu) * rs;
        }
        if (a.mean != nullptr) a.mean[r] = mu;
        if (a.rstd != nullptr) a.rstd[r] = rs;
    }
}

// xhat of element j of a row, from the input or the output.
template <bool kAffine, bool kFromOutput>
struct Xhat {
    const float* src;  // x or y row
    const float* beta;
    const float* inv_gamma;
    float mu, rs;
    DSK_NN_INLINE float operator()(size_t j) const {
        if (kFromOutput) return kAffine ? (src[j] - beta[j]) * inv_gamma[j] : src[j];
        return (src[j] - mu) * rs;
    }
};

template <bool kAffine, bool kFromOutput>
void ln_bwd_rows(const ds::kernels::LnBwdArgs& a, size_t r0, size_t r1, float* dgp, float* dbp) {
    const size_t dim = a.dim;
    const float inv_dim = 1.0f / static_cast<float>(dim);
    const float* gamma = a.gamma;
    for (size_t r = r0; r < r1; ++r) {
        const float* dy = a.dy + r * dim;
        float* dx = a.dx + r * dim;
        Xhat<kAffine, kFromOutput> xh{kFromOutput ? a.y + r * dim : a.x + r * dim, a.beta, a.inv_gamma,
                                      kFromOutput ? 0.0f : a.mean[r], a.rstd[r]};
        float sg = 0.0f, sgx = 0.0f;
        if (dgp != nullptr) {
#pragma omp simd reduction(+ : sg, sgx)
            for (size_t j = 0; j < dim; ++j) {
                const float h = xh(j);
                const float g = kAffine ? dy[j] * gamma[j] : dy[j];
                sg += g;
                sgx += g * h;
                dgp[j] += dy[j] * h;
                dbp[j] += dy[j];
            }
        } else {
#pragma omp simd reduction(+ : sg, sgx)
            for (size_t j = 0; j < dim; ++j) {
                const float h = xh(j);
                const float g = kAffine ? dy[j] * gamma[j] : dy[j];
                sg += g;
                sgx += g * h;
            }
        }
        const float mg = sg * inv_dim, mgx = sgx * inv_dim, rs = a.rstd[r];
#pragma omp simd
        for (size_t j = 0; j < dim; ++j) {
            const float g = kAffine ? dy[j] * gamma[j] : dy[j];
            dx[j] = rs * (g - mg - xh(j) * mgx);
        }
    }
}

void ln_bwd_run(const ds::kernels::LnBwdArgs& a, size_t r0, size_t r1, float* dgp, float* dbp) {
    const bool affine = a.gamma != nullptr;
    if (a.from_output) {
        if (affine) ln_bwd_rows<true, true>(a, r0, r1, dgp, dbp);
        else ln_bwd_rows<false, true>(a, r0, r1, dgp, dbp);
    } else {
        if (affine) ln_bwd_rows<true, false>(a, r0, r1, dgp, dbp);
        else ln_bwd_rows<false, false>(a, r0, r1, dgp, dbp);
    }
}

float logsumexp_run(const float* row, size_t V) {
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (size_t j = 0; j < V; ++j) mx = row[j] > mx ? row[j] : mx;
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (size_t j = 0; j < V; ++j) s += vexp(row[j] - mx);
    return mx + std::log(s);
}

void softmax_scaled_run(const float* row, size_t V, float lse, float scale, float* out) {
#pragma omp simd
    for (size_t j = 0; j < V; ++j) out[j] = scale * vexp(row[j] - lse);
}

void dropout_run(const float* x, float* y, size_t n, uint32_t thr, float scale, const dsk_dropout_key& key) {
    if (n == 0) return;
    const uint32_t k[2] = {static_cast<uint32_t>(key.seed) ^ static_cast<uint32_t>(key.stream >> 32),
                           static_cast<uint32_t>(key.seed >> 32)};
    const uint32_t c2 = key.module_id, c3 = static_cast<uint32_t>(key.stream);
    const uint64_t e0 = key.offset;
    // Head: elements before the first whole block of 4.
    size_t i = 0;
    for (; i < n && ((e0 + i) & 3u) != 0; ++i) {
        const uint64_t e = e0 + i;
        const uint32_t w = ds::kernels::philox_word(e, c2, c3, k);
        y[i] = x[i] * (w >= thr ? scale : 0.0f);
    }
    // Whole blocks: one Philox call gives 4 elements. The words of up to kB
    // blocks go to lane-major arrays first, so both loops vectorise.
    constexpr size_t kB = 64;
    const size_t blocks = (n - i) / 4;
    const uint64_t b0 = (e0 + i) >> 2;
    for (size_t bb = 0; bb < blocks; bb += kB) {
        const size_t nb = blocks - bb < kB ? blocks - bb : kB;
        uint32_t w0[kB], w1[kB], w2[kB], w3[kB];
#pragma omp simd
        for (size_t b = 0; b < nb; ++b) {
            const uint64_t blk = b0 + bb + b;
            ds::kernels::philox4x32_10(static_cast<uint32_t>(blk), static_cast<uint32_t>(blk >> 32), c2, c3, k[0],
                                       k[1], w0[b], w1[b], w2[b], w3[b]);
        }
        const float* xb = x + i + 4 * bb;
        float* yb = y + i + 4 * bb;
#pragma omp simd
        for (size_t b = 0; b < nb; ++b) {
            yb[4 * b + 0] = xb[4 * b + 0] * (w0[b] >= thr ? scale : 0.0f);
            yb[4 * b + 1] = xb[4 * b + 1] * (w1[b] >= thr ? scale : 0.0f);
            yb[4 * b + 2] = xb[4 * b + 2] * (w2[b] >= thr ? scale : 0.0f);
            yb[4 * b + 3] = xb[4 * b + 3] * (w3[b] >= thr ? scale : 0.0f);
        }
    }
    // Tail.
    for (i += blocks * 4; i < n; ++i) {
        const uint32_t w = ds::kernels::philox_word(e0 + i, c2, c3, k);
        y[i] = x[i] * (w >= thr ? scale : 0.0f);
    }
}

void add_run(const float* a, const float* b, float* y, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

void add_inplace_run(float* y, const float* a, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; ++i) y[i] += a[i];
}

double sq_diff_sum_run(const float* a, const float* b, size_t n) {
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (size_t i = 0; i < n; ++i) {
        const double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
        s += d * d;
    }
    return s;
}

void scaled_diff_run(const float* a, const float* b, float scale, float* y, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; ++i) y[i] = scale * (a[i] - b[i]);
}

constexpr ds::kernels::NnIsaOps make_nn_isa_ops() {
    return {&gelu_fwd_run,  &gelu_bwd_run,       &ln_fwd_run,  &ln_bwd_run,
            &logsumexp_run, &softmax_scaled_run, &dropout_run, &add_run,
            &add_inplace_run, &sq_diff_sum_run,  &scaled_diff_run};
}

}  // namespace

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif
