// The GEMM attention kernel (attention_impl.h): one (batch, head) pair per
// OpenMP iteration; inside it the products (S = Q Kᵀ, O = D V; backward
// dD = dO Vᵀ, dV = Dᵀ dO, dQ = dS K, dK = dSᵀ Q) are single-threaded GEMMs
// (nn_gemm.h: inside the parallel region oneDNN runs on the calling thread)
// on the head's strided slices of qkv, and the row-wise work (mask, softmax,
// dropout, softmax backward) runs on [T, T] blocks in per-thread scratch.
// The probabilities of a head are always computed by head_probs(), in
// forward and in backward's recomputation alike, so a recomputed A is
// bit-identical to the saved one.
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <new>
#include <vector>

#include "arg_check.h"
#include "attention_impl.h"
#include "nn_gemm.h"

namespace ds::kernels::attention {

namespace {

// A of head (b, h) into P [T, T]: S = scale Q Kᵀ by one GEMM (q0, k0: the
// head's Q and K rows, `stride` apart), then per row the softmax over the
// visible keys (j <= i when causal), zero beyond them.
int head_probs(const float* q0, const float* k0, int64_t stride, int64_t T, int64_t hd, float scale, bool causal,
               float* P) {
    if (int st = dsk_cpu_gemm(0, 1, T, T, hd, scale, q0, stride, k0, stride, 0.0f, P, T)) return st;
    for (int64_t i = 0; i < T; ++i) {
        float* row = P + i * T;
        const int64_t jn = causal ? i + 1 : T;
        float mx = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j < jn; ++j) mx = row[j] > mx ? row[j] : mx;
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
    return DSK_OK;
}

// D = A * F into D [T, T] (row i's multipliers from the dropout stream of
// head bh; F's rows kept in F [T, T] when F is not NULL, for backward).
void apply_dropout(const RowDropout& rd, uint64_t offset, int64_t bh, int64_t T, bool causal, const float* P,
                   float* D, float* f_row, float* F) {
    for (int64_t i = 0; i < T; ++i) {
        const int64_t jn = causal ? i + 1 : T;
        float* f = F != nullptr ? F + i * T : f_row;
        rd.fill(offset + static_cast<uint64_t>((bh * T + i) * T), jn, f);
        for (int64_t j = 0; j < jn; ++j) D[i * T + j] = P[i * T + j] * f[j];
        for (int64_t j = jn; j < T; ++j) D[i * T + j] = 0.0f;
    }
}

// The first failure inside a parallel region, with its message (the
// message is thread-local: it is carried out of the region here).
struct FirstError {
    int status = DSK_OK;
    char msg[512] = "";
    void record(int st) {
        if (st == DSK_OK) return;
#pragma omp critical(dsk_attention_error)
        if (status == DSK_OK) {
            status = st;
            std::snprintf(msg, sizeof msg, "%s", dsk_last_error());
        }
    }
    int report(const char* kn) const {
        return status == DSK_OK ? DSK_OK : set_last_error(status, "%s: %s", kn, msg);
    }
};

// Per-thread scratch of three [T, T] blocks (A, D or dD, F) and one row.
size_t scratch_per_thread(int64_t T) { return static_cast<size_t>(T) * static_cast<size_t>(3 * T + 1); }

int scratch_for_threads(const char* kn, std::vector<float>& s, int64_t T, int threads) {
    try {
        s.assign(scratch_per_thread(T) * static_cast<size_t>(threads), 0.0f);
        return DSK_OK;
    } catch (const std::bad_alloc&) {
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: out of memory for scratch (seq=%lld)", kn,
                              static_cast<long long>(T));
    }
}

}  // namespace

int gemm_forward(const char* kn, const Dims& d, const float* qkv, float* out, float* probs,
                 const dsk_attention_args& a) {
    const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
    std::vector<float> scratch;
    if (int st = scratch_for_threads(kn, scratch, d.T, threads)) return st;
    const int64_t B = d.B, T = d.T, C = d.C, H = d.H, hd = d.hd, stride = 3 * C;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const bool dropout = a.dropout_p > 0.0f, causal = a.causal != 0;
    const RowDropout rd(a);
    FirstError err;
    // Always a parallel region when threads > 1 (also for one pair): the
    // GEMMs then run on one thread each, so the bits never depend on the count.
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int64_t bh = 0; bh < B * H; ++bh) {
        const int64_t b = bh / H, h = bh % H;
        float* tmp = scratch.data() + static_cast<size_t>(omp_get_thread_num()) * scratch_per_thread(T);
        const float* base = qkv + b * T * stride + h * hd;
        float* P = probs != nullptr ? probs + bh * T * T : tmp;
        int st = head_probs(base, base + C, stride, T, hd, scale, causal, P);
        const float* D = P;
        if (st == DSK_OK && dropout) {
            apply_dropout(rd, a.dropout_key.offset, bh, T, causal, P, tmp + T * T, tmp + 3 * T * T, nullptr);
            D = tmp + T * T;
        }
        if (st == DSK_OK)  // O = D V, into the head's columns of out
            st = dsk_cpu_gemm(0, 0, T, hd, T, 1.0f, D, T, base + 2 * C, stride, 0.0f, out + b * T * C + h * hd, C);
        err.record(st);
    }
    return err.report(kn);
}

int gemm_backward(const char* kn, const Dims& d, const float* qkv, const float* probs, const float* dout,
                  float* dqkv, const dsk_attention_args& a) {
    const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
    std::vector<float> scratch;
    if (int st = scratch_for_threads(kn, scratch, d.T, threads)) return st;
    const int64_t B = d.B, T = d.T, C = d.C, H = d.H, hd = d.hd, stride = 3 * C;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const bool dropout = a.dropout_p > 0.0f, causal = a.causal != 0;
    const RowDropout rd(a);
    FirstError err;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int64_t bh = 0; bh < B * H; ++bh) {
        const int64_t b = bh / H, h = bh % H;
        float* tmp = scratch.data() + static_cast<size_t>(omp_get_thread_num()) * scratch_per_thread(T);
        float *dA = tmp + T * T, *F = tmp + 2 * T * T;
        const float* base = qkv + b * T * stride + h * hd;
        const float* dO = dout + b * T * C + h * hd;
        float* dbase = dqkv + b * T * stride + h * hd;
        const float* P = probs != nullptr ? probs + bh * T * T : tmp;
        int st = probs != nullptr ? DSK_OK : head_probs(base, base + C, stride, T, hd, scale, causal, tmp);
        // D = A * F (F: the dropout multipliers, kept for dA below); D goes
        // into dA's block until dV is done, then dA overwrites it.
        const float* D = P;
        if (st == DSK_OK && dropout) {
            apply_dropout(rd, a.dropout_key.offset, bh, T, causal, P, dA, nullptr, F);
            D = dA;
        }
        // dV = Dᵀ dO
        if (st == DSK_OK) st = dsk_cpu_gemm(1, 0, T, hd, T, 1.0f, D, T, dO, C, 0.0f, dbase + 2 * C, stride);
        // dD = dO Vᵀ; dA = dD * F
        if (st == DSK_OK) st = dsk_cpu_gemm(0, 1, T, T, hd, 1.0f, dO, C, base + 2 * C, stride, 0.0f, dA, T);
        if (st == DSK_OK) {
            // Softmax backward per row, in place: dS = scale A (dA - Σ dA·A).
            for (int64_t i = 0; i < T; ++i) {
                const int64_t jn = causal ? i + 1 : T;
                float* r = dA + i * T;
                const float* pr = P + i * T;
                if (dropout)
                    for (int64_t j = 0; j < jn; ++j) r[j] *= F[i * T + j];
                float rowdot = 0.0f;
                for (int64_t j = 0; j < jn; ++j) rowdot += r[j] * pr[j];
                for (int64_t j = 0; j < jn; ++j) r[j] = scale * pr[j] * (r[j] - rowdot);
                for (int64_t j = jn; j < T; ++j) r[j] = 0.0f;
            }
            // dQ = dS K, dK = dSᵀ Q: this pair owns these slices of dqkv.
            st = dsk_cpu_gemm(0, 0, T, hd, T, 1.0f, dA, T, base + C, stride, 0.0f, dbase, stride);
        }
        if (st == DSK_OK) st = dsk_cpu_gemm(1, 0, T, hd, T, 1.0f, dA, T, base, stride, 0.0f, dbase + C, stride);
        err.record(st);
    }
    return err.report(kn);
}

}  // namespace ds::kernels::attention
