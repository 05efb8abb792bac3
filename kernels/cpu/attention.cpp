// dsk_cpu_attention_forward/backward: fused-qkv multi-head self-attention
// (nn_attention.h). One (batch, head) pair per OpenMP iteration; the row
// loops run over the head dimension, contiguous in qkv, so they vectorize.
// A row of probabilities is always computed by attention_row(), in forward
// and in backward's recomputation alike, so a recomputed A is bit-identical
// to the one forward saves.
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <vector>

#include "arg_check.h"
#include "nn_attention.h"
#include "philox.h"

namespace {

using ds::kernels::set_last_error;

// Element counts of one call, checked for overflow once.
struct Dims {
    int64_t B, T, C, H, hd;
    size_t qkv_elems, out_elems, prob_elems;
};

int check_args(const char* kernel, const dsk_attention_args* a, Dims* d) {
    if (a == nullptr) return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: args is NULL", kernel);
    if (a->batch < 1 || a->seq < 1 || a->channels < 1 || a->heads < 1)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT,
                              "%s: batch=%lld, seq=%lld, channels=%lld, heads=%lld must all be >= 1", kernel,
                              static_cast<long long>(a->batch), static_cast<long long>(a->seq),
                              static_cast<long long>(a->channels), static_cast<long long>(a->heads));
    if (a->channels % a->heads != 0)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: channels=%lld is not a multiple of heads=%lld", kernel,
                              static_cast<long long>(a->channels), static_cast<long long>(a->heads));
    if (!(a->dropout_p >= 0.0f && a->dropout_p < 1.0f))
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: dropout_p=%g is outside [0, 1)", kernel,
                              static_cast<double>(a->dropout_p));
    if (a->causal != 0 && a->causal != 1)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: causal=%d is not 0 or 1", kernel, a->causal);
    // B*T*3C and B*H*T*T must fit (and be addressable).
    const unsigned __int128 lim = static_cast<unsigned __int128>(std::numeric_limits<int64_t>::max()) / 4;
    const unsigned __int128 B = static_cast<unsigned __int128>(a->batch), T = static_cast<unsigned __int128>(a->seq);
    const unsigned __int128 C = static_cast<unsigned __int128>(a->channels),
                            H = static_cast<unsigned __int128>(a->heads);
    // Each factor is < 2^63, so no product of two overflows 128 bits; check stepwise.
    if (B * T > lim || B * T * 3 * C > lim || B * H > lim || B * H * T > lim || B * H * T * T > lim)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT,
                              "%s: batch=%lld x seq=%lld x channels=%lld (heads=%lld) is too large", kernel,
                              static_cast<long long>(a->batch), static_cast<long long>(a->seq),
                              static_cast<long long>(a->channels), static_cast<long long>(a->heads));
    d->B = a->batch;
    d->T = a->seq;
    d->C = a->channels;
    d->H = a->heads;
    d->hd = a->channels / a->heads;
    d->qkv_elems = static_cast<size_t>(B * T * 3 * C);
    d->out_elems = static_cast<size_t>(B * T * C);
    d->prob_elems = static_cast<size_t>(B * H * T * T);
    return DSK_OK;
}

int null_arg(const char* kernel, const char* arg) {
    return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: %s is NULL", kernel, arg);
}

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

// The dropout multipliers of row elements [0, jn) whose stream indices start
// at `base` (nn_ops.h's mask: keep when the Philox word >= threshold).
struct RowDropout {
    uint32_t thr, c2, c3, key[2];
    float scale;
    explicit RowDropout(const dsk_attention_args& a)
        : thr(static_cast<uint32_t>(dsk_dropout_threshold(a.dropout_p))),
          c2(a.dropout_key.module_id),
          c3(static_cast<uint32_t>(a.dropout_key.stream)),
          key{static_cast<uint32_t>(a.dropout_key.seed) ^ static_cast<uint32_t>(a.dropout_key.stream >> 32),
              static_cast<uint32_t>(a.dropout_key.seed >> 32)},
          scale(1.0f / (1.0f - a.dropout_p)) {}
    void fill(uint64_t base, int64_t jn, float* f) const {
        uint32_t w[4];
        uint64_t block = ~uint64_t{0};
        for (int64_t j = 0; j < jn; ++j) {
            const uint64_t e = base + static_cast<uint64_t>(j);
            if ((e >> 2) != block) {
                block = e >> 2;
                ds::kernels::philox_block(block, c2, c3, key, w);
            }
            f[j] = w[e & 3u] >= thr ? scale : 0.0f;
        }
    }
};

// Per-thread scratch: rows of A, dA and the dropout multipliers per thread.
// Per-thread scratch of three rows of T floats for `threads` threads (the
// count the caller's parallel loop uses); a status naming `kn` when it does
// not fit in memory.
int scratch_for_threads(const char* kn, std::vector<float>& s, int64_t T, int threads) {
    try {
        s.assign(static_cast<size_t>(T) * 3 * static_cast<size_t>(threads), 0.0f);
        return DSK_OK;
    } catch (const std::bad_alloc&) {
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: out of memory for scratch (seq=%lld)", kn,
                              static_cast<long long>(T));
    }
}

}  // namespace

extern "C" int dsk_cpu_attention_forward(const float* qkv, float* out, float* probs,
                                         const dsk_attention_args* a) noexcept {
    const char* kn = "dsk_attention_forward";
    Dims d{};
    if (int st = check_args(kn, a, &d)) return st;
    if (qkv == nullptr) return null_arg(kn, "qkv");
    if (out == nullptr) return null_arg(kn, "out");
    const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
    std::vector<float> scratch;
    if (int st = scratch_for_threads(kn, scratch, d.T, threads)) return st;
    const int64_t B = d.B, T = d.T, C = d.C, H = d.H, hd = d.hd, stride = 3 * C;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const bool dropout = a->dropout_p > 0.0f;
    const RowDropout rd(*a);
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && B * H > 1)
    for (int64_t bh = 0; bh < B * H; ++bh) {
        const int64_t b = bh / H, h = bh % H;
        float* tmp = scratch.data() + static_cast<size_t>(omp_get_thread_num()) * 3 * static_cast<size_t>(T);
        const float* base = qkv + b * T * stride + h * hd;
        for (int64_t i = 0; i < T; ++i) {
            const int64_t jn = a->causal ? i + 1 : T;
            float* row = probs != nullptr ? probs + (bh * T + i) * T : tmp;
            attention_row(base + i * stride, base + C, stride, hd, scale, jn, T, row);
            float* o = out + (b * T + i) * C + h * hd;
            std::memset(o, 0, static_cast<size_t>(hd) * sizeof(float));
            float* f = tmp + 2 * T;
            if (dropout) rd.fill(a->dropout_key.offset + static_cast<uint64_t>((bh * T + i) * T), jn, f);
            for (int64_t j = 0; j < jn; ++j) {
                const float d = dropout ? row[j] * f[j] : row[j];
                if (d != 0.0f) axpy(o, d, base + 2 * C + j * stride, hd);
            }
        }
    }
    return DSK_OK;
}

extern "C" int dsk_cpu_attention_backward(const float* qkv, const float* probs, const float* dout, float* dqkv,
                                          const dsk_attention_args* a) noexcept {
    const char* kn = "dsk_attention_backward";
    Dims d{};
    if (int st = check_args(kn, a, &d)) return st;
    if (qkv == nullptr) return null_arg(kn, "qkv");
    if (dout == nullptr) return null_arg(kn, "dout");
    if (dqkv == nullptr) return null_arg(kn, "dqkv");
    const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
    std::vector<float> scratch;
    if (int st = scratch_for_threads(kn, scratch, d.T, threads)) return st;
    const int64_t B = d.B, T = d.T, C = d.C, H = d.H, hd = d.hd, stride = 3 * C;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const bool dropout = a->dropout_p > 0.0f;
    const RowDropout rd(*a);
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && B * H > 1)
    for (int64_t bh = 0; bh < B * H; ++bh) {
        const int64_t b = bh / H, h = bh % H;
        float* arow_tmp = scratch.data() + static_cast<size_t>(omp_get_thread_num()) * 3 * static_cast<size_t>(T);
        float* da = arow_tmp + T;
        float* f = arow_tmp + 2 * T;
        const float* base = qkv + b * T * stride + h * hd;
        float* dbase = dqkv + b * T * stride + h * hd;
        // This pair owns exactly these slices of dqkv: clear them first.
        for (int64_t t = 0; t < T; ++t)
            for (int part = 0; part < 3; ++part)
                std::memset(dbase + t * stride + part * C, 0, static_cast<size_t>(hd) * sizeof(float));
        for (int64_t i = 0; i < T; ++i) {
            const int64_t jn = a->causal ? i + 1 : T;
            const float* q_i = base + i * stride;
            const float* row;
            if (probs != nullptr) {
                row = probs + (bh * T + i) * T;
            } else {
                attention_row(q_i, base + C, stride, hd, scale, jn, T, arow_tmp);
                row = arow_tmp;
            }
            const float* do_i = dout + (b * T + i) * C + h * hd;
            if (dropout) rd.fill(a->dropout_key.offset + static_cast<uint64_t>((bh * T + i) * T), jn, f);
            // dD = dO Vᵀ, dA = dD * f, dV += Dᵀ dO with D = A * f.
            float rowdot = 0.0f;
            for (int64_t j = 0; j < jn; ++j) {
                const float fj = dropout ? f[j] : 1.0f;
                const float dA = fj == 0.0f ? 0.0f : fj * dot(do_i, base + 2 * C + j * stride, hd);
                da[j] = dA;
                rowdot += dA * row[j];
                const float d = row[j] * fj;
                if (d != 0.0f) axpy(dbase + 2 * C + j * stride, d, do_i, hd);
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
