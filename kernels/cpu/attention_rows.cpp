// The row-loop attention kernel (attention_impl.h): one (batch, head) pair
// per OpenMP iteration; per query row the scores are dot products and the
// outputs axpy updates over the head dimension, contiguous in qkv, so they
// vectorize. A row of probabilities is always computed by attention_row(),
// in forward and in backward's recomputation alike, so a recomputed A is
// bit-identical to the one forward saves.
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <vector>

#include "arg_check.h"
#include "attention_impl.h"

namespace ds::kernels::attention {

namespace {

inline float dot(const float* x, const float* y, int64_t n) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t k = 0; k < n; ++k) s += x[k] * y[k];
    return s;
}

inline void axpy(float* y, float alpha, const float* x, int64_t n) {
#pragma omp simd
    for (int64_t k = 0; k < n; ++k) y[k] += alpha * x[k];
}

// The softmax row i of head (b, h): row[j] = A[i][j] for j < jn (the visible
// keys), zero for j in [jn, T).
void attention_row(const float* q_i, const float* k0, int64_t stride, int64_t hd, float scale, int64_t jn, int64_t T,
                   float* row) {
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < jn; ++j) {
        const float s = scale * dot(q_i, k0 + j * stride, hd);
        row[j] = s;
        mx = s > mx ? s : mx;
    }
    float sum = 0.0f;
    for (int64_t j = 0; j < jn; ++j) {
        const float e = std::exp(row[j] - mx);
        row[j] = e;
        sum += e;
    }
    const float inv = 1.0f / sum;
    for (int64_t j = 0; j < jn; ++j) row[j] *= inv;
    for (int64_t j = jn; j < T; ++j) row[j] = 0.0f;
}

// Per-thread scratch: three rows of T floats (A, dA, the dropout multipliers).
size_t scratch_per_thread(int64_t T) { return 3 * static_cast<size_t>(T); }

}  // namespace

int rows_forward(const char* kn, const Dims& d, const float* qkv, float* out, float* probs,
                 const dsk_attention_args& a) {
    Scratch scratch;
    if (int st = make_scratch(kn, scratch_per_thread(d.T), d.T, &scratch)) return st;
    const int threads = scratch.threads;
    const int64_t B = d.B, T = d.T, C = d.C, H = d.H, hd = d.hd, stride = 3 * C;
    const float scale = d.scale();
    const bool dropout = a.dropout_p > 0.0f;
    const RowDropout rd(a);
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && B * H > 1)
    for (int64_t bh = 0; bh < B * H; ++bh) {
        const int64_t b = bh / H, h = bh % H;
        float* tmp = scratch.mine();
        const float* base = qkv + b * T * stride + h * hd;
        for (int64_t i = 0; i < T; ++i) {
            const int64_t jn = a.causal ? i + 1 : T;
            float* row = probs != nullptr ? probs + (bh * T + i) * T : tmp;
            attention_row(base + i * stride, base + C, stride, hd, scale, jn, T, row);
            float* o = out + (b * T + i) * C + h * hd;
            std::memset(o, 0, static_cast<size_t>(hd) * sizeof(float));
            float* f = tmp + 2 * T;
            if (dropout) rd.fill(a.dropout_key.offset + static_cast<uint64_t>((bh * T + i) * T), jn, f);
            for (int64_t j = 0; j < jn; ++j) {
                const float dj = dropout ? row[j] * f[j] : row[j];
                if (dj != 0.0f) axpy(o, dj, base + 2 * C + j * stride, hd);
            }
        }
    }
    return DSK_OK;
}

int rows_backward(const char* kn, const Dims& d, const float* qkv, const float* probs, const float* dout,
                  float* dqkv, const dsk_attention_args& a) {
    Scratch scratch;
    if (int st = make_scratch(kn, scratch_per_thread(d.T), d.T, &scratch)) return st;
    const int threads = scratch.threads;
    const int64_t B = d.B, T = d.T, C = d.C, H = d.H, hd = d.hd, stride = 3 * C;
    const float scale = d.scale();
    const bool dropout = a.dropout_p > 0.0f;
    const RowDropout rd(a);
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && B * H > 1)
    for (int64_t bh = 0; bh < B * H; ++bh) {
        const int64_t b = bh / H, h = bh % H;
        float* arow_tmp = scratch.mine();
        float* da = arow_tmp + T;
        float* f = arow_tmp + 2 * T;
        const float* base = qkv + b * T * stride + h * hd;
        float* dbase = dqkv + b * T * stride + h * hd;
        // This pair owns exactly these slices of dqkv: clear them first.
        for (int64_t t = 0; t < T; ++t)
            for (int part = 0; part < 3; ++part)
                std::memset(dbase + t * stride + part * C, 0, static_cast<size_t>(hd) * sizeof(float));
        for (int64_t i = 0; i < T; ++i) {
            const int64_t jn = a.causal ? i + 1 : T;
            const float* q_i = base + i * stride;
            const float* row;
            if (probs != nullptr) {
                row = probs + (bh * T + i) * T;
            } else {
                attention_row(q_i, base + C, stride, hd, scale, jn, T, arow_tmp);
                row = arow_tmp;
            }
            const float* do_i = dout + (b * T + i) * C + h * hd;
            if (dropout) rd.fill(a.dropout_key.offset + static_cast<uint64_t>((bh * T + i) * T), jn, f);
            // dD = dO Vᵀ, dA = dD * f, dV += Dᵀ dO with D = A * f.
            float rowdot = 0.0f;
            for (int64_t j = 0; j < jn; ++j) {
                const float fj = dropout ? f[j] : 1.0f;
                const float dA = fj == 0.0f ? 0.0f : fj * dot(do_i, base + 2 * C + j * stride, hd);
                da[j] = dA;
                rowdot += dA * row[j];
                const float dj = row[j] * fj;
                if (dj != 0.0f) axpy(dbase + 2 * C + j * stride, dj, do_i, hd);
            }
            // Softmax backward: dS = A (dA - Σ dA·A); dQ = scale dS K, dK = scale dSᵀ Q.
            float* dq_i = dbase + i * stride;
            for (int64_t j = 0; j < jn; ++j) {
                const float ds = scale * row[j] * (da[j] - rowdot);
                if (ds == 0.0f) continue;
                axpy(dq_i, ds, base + C + j * stride, hd);
                axpy(dbase + C + j * stride, ds, q_i, hd);
            }
        }
    }
    return DSK_OK;
}

}  // namespace ds::kernels::attention
