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

// After the push: the per-element functions (shared with the CUDA kernels)
// get the same options as the loops they inline into.
#include "../elem/dropout.h"
#include "../elem/exp_gelu.h"

namespace {

#define DSK_NN_INLINE inline __attribute__((always_inline))

void gelu_fwd_run(const float* x, float* y, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; ++i) y[i] = gelu_fwd_elem(x[i]);
}

void gelu_bwd_run(const float* x, const float* dy, float* dx, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; ++i) dx[i] = gelu_bwd_elem(x[i], dy[i]);
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
    const DropoutStream st = dropout_stream(key);
    const uint32_t k[2] = {st.k[0], st.k[1]};
    const uint32_t c2 = st.c2, c3 = st.c3;
    const uint64_t e0 = key.offset;
    // Head: elements before the first whole block of 4.
    size_t i = 0;
    for (; i < n && ((e0 + i) & 3u) != 0; ++i) {
        const uint64_t e = e0 + i;
        const uint32_t w = ds::kernels::philox_word(e, c2, c3, k);
        y[i] = dropout_elem(x[i], w, thr, scale);
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
            yb[4 * b + 0] = dropout_elem(xb[4 * b + 0], w0[b], thr, scale);
            yb[4 * b + 1] = dropout_elem(xb[4 * b + 1], w1[b], thr, scale);
            yb[4 * b + 2] = dropout_elem(xb[4 * b + 2], w2[b], thr, scale);
            yb[4 * b + 3] = dropout_elem(xb[4 * b + 3], w3[b], thr, scale);
        }
    }
    // Tail.
    for (i += blocks * 4; i < n; ++i) {
        const uint32_t w = ds::kernels::philox_word(e0 + i, c2, c3, k);
        y[i] = dropout_elem(x[i], w, thr, scale);
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
