// The GEMM attention kernel (attention_impl.h). The work is cut into items
// of (a chunk of up to kChunk batch elements, one head), each done by one
// thread; inside an item the products (S = Q Kᵀ, O = D V; backward
// dD = dO Vᵀ, dV = Dᵀ dO, dQ = dS K, dK = dSᵀ Q) are single-threaded batched
// GEMMs over the chunk (nn_gemm.h: inside the parallel region oneDNN runs on
// the calling thread) on the head's strided slices of qkv, and the row-wise
// work (mask, softmax, dropout, softmax backward) runs on [T, T] blocks in
// per-thread scratch. Batching a chunk matters for short sequences: the
// main job's heads are 11 x 16, and one GEMM call per head cost more in
// oneDNN's per-call overhead than the row loops did in arithmetic.
// The chunking depends on B and T only, never on the thread count, so the
// bits do not either; the probabilities of a head are always computed by
// chunk_probs(), in forward and in backward's recomputation alike, so a
// recomputed A is bit-identical to the saved one.
#include <omp.h>

#include <algorithm>
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

// Batch elements per item: as many as keep a chunk's [T, T] blocks within
// 2^16 floats, 1 to 16 (a function of T alone).
int64_t chunk_for(int64_t T) {
    const int64_t n = (int64_t{1} << 16) / (T * T);
    return n < 1 ? 1 : (n > 16 ? 16 : n);
}

// One item's geometry: batch elements [b0, b0 + n) of head h.
struct Item {
    int64_t b0, n, h;
};

// Row-wise softmax over the visible keys (j <= i when causal) of the n
// [T, T] blocks of scores at P (blocks sP apart), in place; zero beyond them.
void softmax_blocks(float* P, int64_t sP, int64_t n, int64_t T, bool causal) {
    for (int64_t b = 0; b < n; ++b)
        for (int64_t i = 0; i < T; ++i) {
            float* row = P + b * sP + i * T;
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
}

// C_i = alpha op(A_i) op(B_i) for the item's n batch elements: one batched
// fp32 GEMM, or with bf16 one dsk_cpu_gemm_bf16 per element (bf16-rounded
// operands, fp32 accumulation; nn_gemm.h has no batched bf16 product).
int product(bool bf16, int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
            const float* b, int64_t ldb, float* c, int64_t ldc, int64_t count, int64_t sa, int64_t sb, int64_t sc) {
    if (!bf16) return dsk_cpu_gemm_batched(ta, tb, m, n, k, alpha, a, lda, b, ldb, 0.0f, c, ldc, count, sa, sb, sc);
    for (int64_t i = 0; i < count; ++i)
        if (int st = dsk_cpu_gemm_bf16(ta, tb, m, n, k, alpha, a + i * sa, lda, b + i * sb, ldb, 0.0f, c + i * sc, ldc))
            return st;
    return DSK_OK;
}

// A of the item's heads into P (blocks sP apart): S = scale Q Kᵀ by one
// batched GEMM (q0: the first element's Q rows, `stride` apart; elements
// sq apart), then the softmax.
int chunk_probs(bool bf16, const float* q0, const float* k0, int64_t stride, int64_t sq, int64_t n, int64_t T,
                int64_t hd, float scale, bool causal, float* P, int64_t sP) {
    if (int st = product(bf16, 0, 1, T, T, hd, scale, q0, stride, k0, stride, P, T, n, sq, sq, sP)) return st;
    softmax_blocks(P, sP, n, T, causal);
    return DSK_OK;
}

// D = A * F for the item's n blocks (A blocks sP apart; D and F [n, T, T]
// dense). Element (b, h, i, j)'s multiplier comes from stream index
// offset + ((b*H + h)*T + i)*T + j.
void apply_dropout(const RowDropout& rd, uint64_t offset, const Item& it, int64_t H, int64_t T, bool causal,
                   const float* P, int64_t sP, float* D, float* F) {
    for (int64_t b = 0; b < it.n; ++b) {
        const int64_t bh = (it.b0 + b) * H + it.h;
        for (int64_t i = 0; i < T; ++i) {
            const int64_t jn = causal ? i + 1 : T;
            float* f = F + (b * T + i) * T;
            const float* p = P + b * sP + i * T;
            float* d = D + (b * T + i) * T;
            rd.fill(offset + static_cast<uint64_t>((bh * T + i) * T), jn, f);
            for (int64_t j = 0; j < jn; ++j) d[j] = p[j] * f[j];
            for (int64_t j = jn; j < T; ++j) d[j] = 0.0f;
        }
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

// Per-thread scratch: three [chunk, T, T] blocks (A, D or dD, F).
size_t scratch_per_thread(int64_t T) {
    return static_cast<size_t>(3 * chunk_for(T)) * static_cast<size_t>(T) * static_cast<size_t>(T);
}

}  // namespace

int gemm_forward(const char* kn, const Dims& d, const float* qkv, float* out, float* probs,
                 const dsk_attention_args& a) {
    Scratch scratch;
    if (int st = make_scratch(kn, scratch_per_thread(d.T), d.T, &scratch)) return st;
    const int threads = scratch.threads;
    const int64_t B = d.B, T = d.T, C = d.C, H = d.H, hd = d.hd, stride = 3 * C, sq = T * stride;
    const int64_t nb = chunk_for(T), chunks = (B + nb - 1) / nb, TT = T * T;
    const float scale = d.scale();
    const bool dropout = a.dropout_p > 0.0f, causal = a.causal != 0, bf16 = a.bf16_products != 0;
    const RowDropout rd(a);
    FirstError err;
    // Always a parallel region when threads > 1 (also for one item): the
    // GEMMs then run on one thread each, so the bits never depend on the count.
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int64_t ih = 0; ih < chunks * H; ++ih) {
        const Item it{(ih / H) * nb, std::min(nb, B - (ih / H) * nb), ih % H};
        float* tmp = scratch.mine();
        const float* base = qkv + it.b0 * sq + it.h * hd;
        float* P = probs != nullptr ? probs + (it.b0 * H + it.h) * TT : tmp;
        const int64_t sP = probs != nullptr ? H * TT : TT;
        int st = chunk_probs(bf16, base, base + C, stride, sq, it.n, T, hd, scale, causal, P, sP);
        const float* D = P;
        int64_t sD = sP;
        if (st == DSK_OK && dropout) {
            apply_dropout(rd, a.dropout_key.offset, it, H, T, causal, P, sP, tmp + nb * TT, tmp + 2 * nb * TT);
            D = tmp + nb * TT;
            sD = TT;
        }
        if (st == DSK_OK)  // O = D V, into the heads' columns of out
            st = product(bf16, 0, 0, T, hd, T, 1.0f, D, T, base + 2 * C, stride, out + it.b0 * T * C + it.h * hd, C,
                         it.n, sD, sq, T * C);
        err.record(st);
    }
    return err.report(kn);
}

int gemm_backward(const char* kn, const Dims& d, const float* qkv, const float* probs, const float* dout,
                  float* dqkv, const dsk_attention_args& a) {
    Scratch scratch;
    if (int st = make_scratch(kn, scratch_per_thread(d.T), d.T, &scratch)) return st;
    const int threads = scratch.threads;
    const int64_t B = d.B, T = d.T, C = d.C, H = d.H, hd = d.hd, stride = 3 * C, sq = T * stride;
    const int64_t nb = chunk_for(T), chunks = (B + nb - 1) / nb, TT = T * T;
    const float scale = d.scale();
    const bool dropout = a.dropout_p > 0.0f, causal = a.causal != 0, bf16 = a.bf16_products != 0;
    const RowDropout rd(a);
    FirstError err;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int64_t ih = 0; ih < chunks * H; ++ih) {
        const Item it{(ih / H) * nb, std::min(nb, B - (ih / H) * nb), ih % H};
        float* tmp = scratch.mine();
        float *dA = tmp + nb * TT, *F = tmp + 2 * nb * TT;
        const float* base = qkv + it.b0 * sq + it.h * hd;
        const float* dO = dout + it.b0 * T * C + it.h * hd;
        float* dbase = dqkv + it.b0 * sq + it.h * hd;
        const float* P = probs != nullptr ? probs + (it.b0 * H + it.h) * TT : tmp;
        const int64_t sP = probs != nullptr ? H * TT : TT;
        int st = probs != nullptr ? DSK_OK
                                  : chunk_probs(bf16, base, base + C, stride, sq, it.n, T, hd, scale, causal, tmp, TT);
        // D = A * F (F: the dropout multipliers, kept for dA below); D goes
        // into dA's blocks until dV is done, then dA overwrites them.
        const float* D = P;
        int64_t sD = sP;
        if (st == DSK_OK && dropout) {
            apply_dropout(rd, a.dropout_key.offset, it, H, T, causal, P, sP, dA, F);
            D = dA;
            sD = TT;
        }
        // dV = Dᵀ dO
        if (st == DSK_OK)
            st = product(bf16, 1, 0, T, hd, T, 1.0f, D, T, dO, C, dbase + 2 * C, stride, it.n, sD, T * C, sq);
        // dD = dO Vᵀ; dA = dD * F
        if (st == DSK_OK)
            st = product(bf16, 0, 1, T, T, hd, 1.0f, dO, C, base + 2 * C, stride, dA, T, it.n, T * C, sq, TT);
        if (st == DSK_OK) {
            // Softmax backward per row, in place: dS = scale A (dA - Σ dA·A).
            for (int64_t b = 0; b < it.n; ++b)
                for (int64_t i = 0; i < T; ++i) {
                    const int64_t jn = causal ? i + 1 : T;
                    float* r = dA + (b * T + i) * T;
                    const float* pr = P + b * sP + i * T;
                    if (dropout)
                        for (int64_t j = 0; j < jn; ++j) r[j] *= F[(b * T + i) * T + j];
                    float rowdot = 0.0f;
                    for (int64_t j = 0; j < jn; ++j) rowdot += r[j] * pr[j];
                    for (int64_t j = 0; j < jn; ++j) r[j] = scale * pr[j] * (r[j] - rowdot);
                    for (int64_t j = jn; j < T; ++j) r[j] = 0.0f;
                }
            // dQ = dS K, dK = dSᵀ Q: this item owns these slices of dqkv.
            st = product(bf16, 0, 0, T, hd, T, 1.0f, dA, T, base + C, stride, dbase, stride, it.n, TT, sq, sq);
        }
        if (st == DSK_OK)
            st = product(bf16, 1, 0, T, hd, T, 1.0f, dA, T, base, stride, dbase + C, stride, it.n, TT, sq, sq);
        err.record(st);
    }
    return err.report(kn);
}

}  // namespace ds::kernels::attention
