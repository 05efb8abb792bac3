// The per-thread work of the CUDA attention kernels (attention.cu), written
// as DSK_HD functions so that tests/unit/cuda_attention_test.cpp runs the very
// same code on the host for every (block, thread), shared memory emulated as
// plain arrays and each barrier as the end of a loop over the threads.
//
//  * attn_gemm_*: one product C = alpha op(A) op(B) per (batch, head) item,
//    on kAttnTile x kAttnTile output tiles (one element per thread); per
//    k-step the block loads an A and a B tile into shared memory (bf16-rounded
//    when the product takes bf16 operands), then each thread adds its row x
//    column in k order: a fixed fp32 summation order, k = 0, 1, ..., K-1.
//  * attn_row_*, attn_sbwd_*: the softmax of a row of scores and its
//    backward, one block of kAttnRowThreads per row; thread t takes columns
//    t, t + nt, ... in order, then a shared-memory tree (attn_tree_step)
//    combines the partials in a fixed order.
// No atomics anywhere: every output element has one writer, and the bits
// depend on the shape only (the host emulation predicts them exactly).
//
// The exp is vexp (../elem/exp_gelu.h, the nn kernels' exp): plain fp32
// arithmetic, so the host and the device compute the same bits; its ~1e-7
// relative error is far inside the tolerances, and its clamp at -87 only
// turns an e^x below 1.7e-38 into e^-87 (negligible against a sum >= 1).
#pragma once

#include <cmath>
#include <cstdint>

#include "../elem/exp_gelu.h"
#include "../elem/hd.h"
#include "../ref/half_bits.h"

namespace ds::kernels {

constexpr int kAttnTile = 16;         // GEMM tile edge: blocks of 16 x 16 threads
constexpr int kAttnRowThreads = 128;  // threads of a row block (a power of two)

// One batched product: for every item z = b*H + h (b < items / H),
//   C(m, n) = alpha * sum_k A(m, k) B(k, n),   m < M, n < N, k < K, with
//   A(m, k) = a[b*a_sb + h*a_sh + m*a_rs + k*a_cs], B likewise,
//   C(m, n) = c[b*c_sb + h*c_sh + m*c_rs + n].
// Strides express the transposes and the heads' slices of qkv. Plain data:
// it is a kernel parameter (a named namespace for nvcc's launch stubs).
struct AttnGemm {
    const float* a;
    int64_t a_rs, a_cs, a_sb, a_sh;
    const float* b;
    int64_t b_rs, b_cs, b_sb, b_sh;
    float* c;
    int64_t c_rs, c_sb, c_sh;
    int64_t M, N, K, H, items;
    float alpha;
    int32_t bf16;        // 1: A and B elements rounded to bf16 (fp32 accumulation)
    int32_t lower_only;  // 1: only n <= m is computed (causal scores, dD); the rest is never read
};

// The shared-memory tiles of one block. The +1 column keeps the transposed
// loads (a thread per k, see attn_gemm_load) free of bank conflicts.
struct AttnTiles {
    float a[kAttnTile][kAttnTile + 1];  // a[ty][kk] = A(m0 + ty, k0 + kk)
    float b[kAttnTile][kAttnTile + 1];  // b[kk][tx] = B(k0 + kk, n0 + tx)
};

}  // namespace ds::kernels

namespace {

using ds::kernels::AttnGemm;
using ds::kernels::AttnTiles;
using ds::kernels::kAttnRowThreads;
using ds::kernels::kAttnTile;

// An operand as the product uses it: fp32, or rounded to bf16 and widened
// back (exact), the conversion of ../ref/half_bits.h.
DSK_HD inline float attn_operand(float x, int32_t bf16) {
    return bf16 ? dsk_bf16_bits_to_f32(dsk_f32_to_bf16_bits(x)) : x;
}

// Number of tiles along an extent.
DSK_HD inline int64_t attn_tiles(int64_t n) { return (n + kAttnTile - 1) / kAttnTile; }

// Whether tile (m0, n0) has an element to compute (all of them unless
// lower_only, where a tile entirely above the diagonal is skipped whole:
// block-uniform, so the kernel may skip it before any barrier).
DSK_HD inline bool attn_gemm_tile_live(const AttnGemm& g, int64_t m0, int64_t n0) {
    return !g.lower_only || n0 <= m0 + kAttnTile - 1;
}

DSK_HD inline const float* attn_item_a(const AttnGemm& g, int64_t z) { return g.a + (z / g.H) * g.a_sb + (z % g.H) * g.a_sh; }
DSK_HD inline const float* attn_item_b(const AttnGemm& g, int64_t z) { return g.b + (z / g.H) * g.b_sb + (z % g.H) * g.b_sh; }

// Phase 1 of k-step k0, thread (ty, tx): one element of each tile (0 outside
// the matrices). Where an operand is contiguous along k (a_cs or b_rs == 1,
// e.g. Kᵀ in S = Q Kᵀ) the threads of a row take consecutive k instead, so
// the global reads are coalesced; which thread loads what never changes a value.
DSK_HD inline void attn_gemm_load(const AttnGemm& g, int64_t z, int64_t m0, int64_t n0, int64_t k0, int ty, int tx,
                                  AttnTiles* s) {
    const float* a = attn_item_a(g, z);
    const float* b = attn_item_b(g, z);
    {   // A: thread (ty, tx) loads (row r, k kk) of the tile
        const bool along_k = g.a_cs == 1;
        const int r = along_k ? ty : tx, kk = along_k ? tx : ty;
        const int64_t m = m0 + r, k = k0 + kk;
        s->a[r][kk] = (m < g.M && k < g.K) ? attn_operand(a[m * g.a_rs + k * g.a_cs], g.bf16) : 0.0f;
    }
    {   // B: (k kk, column cc)
        const bool along_k = g.b_rs == 1 && g.b_cs != 1;
        const int kk = along_k ? tx : ty, cc = along_k ? ty : tx;
        const int64_t k = k0 + kk, n = n0 + cc;
        s->b[kk][cc] = (k < g.K && n < g.N) ? attn_operand(b[k * g.b_rs + n * g.b_cs], g.bf16) : 0.0f;
    }
}

// Phase 2: thread (ty, tx) adds its row of the A tile times its column of
// the B tile to acc, k in order (only the k < K of this step).
DSK_HD inline float attn_gemm_accumulate(const AttnGemm& g, int64_t k0, int ty, int tx, const AttnTiles* s,
                                         float acc) {
    const int64_t left = g.K - k0;
    const int kn = left < kAttnTile ? static_cast<int>(left) : kAttnTile;
    for (int kk = 0; kk < kn; ++kk) acc += s->a[ty][kk] * s->b[kk][tx];
    return acc;
}

// After the last k-step: C(m0 + ty, n0 + tx) = alpha * acc (inside C, and
// on or below the diagonal when lower_only).
DSK_HD inline void attn_gemm_store(const AttnGemm& g, int64_t z, int64_t m0, int64_t n0, int ty, int tx, float acc) {
    const int64_t m = m0 + ty, n = n0 + tx;
    if (m >= g.M || n >= g.N || (g.lower_only && n > m)) return;
    g.c[(z / g.H) * g.c_sb + (z % g.H) * g.c_sh + m * g.c_rs + n] = g.alpha * acc;
}

// One step of the block's tree reduction over red[0, 2s): red[t] op= red[t + s]
// for t < s (the kernel runs s = nt/2, nt/4, ..., 1 with a barrier after each).
struct AttnMax {
    DSK_HD float operator()(float a, float b) const { return b > a ? b : a; }  // the CPU's max (a NaN is skipped)
};
struct AttnSum {
    DSK_HD float operator()(float a, float b) const { return a + b; }
};
template <class Op>
DSK_HD inline void attn_tree_step(float* red, int t, int s, Op op) {
    if (t < s) red[t] = op(red[t], red[t + s]);
}

// The visible keys of query row i: j < jn.
DSK_HD inline int64_t attn_visible(int64_t i, int64_t T, int32_t causal) { return causal ? i + 1 : T; }

// Softmax of a row (scores in, probabilities out, in place), thread t of nt:
//   phase 1: partial max of the visible scores -> red_max[t]; tree (AttnMax);
//   phase 2: e = exp(s - max) written back, partial sum -> red_sum[t]; tree (AttnSum);
//   phase 3: row[j] = e * (1 / sum) for j < jn, 0 beyond (the CPU's formula).
DSK_HD inline float attn_row_max_part(const float* row, int64_t jn, int t, int nt) {
    float mx = -INFINITY;
    for (int64_t j = t; j < jn; j += nt) mx = row[j] > mx ? row[j] : mx;
    return mx;
}
DSK_HD inline float attn_row_exp_part(float* row, int64_t jn, float mx, int t, int nt) {
    float sum = 0.0f;
    for (int64_t j = t; j < jn; j += nt) {
        const float e = vexp(row[j] - mx);
        row[j] = e;
        sum += e;
    }
    return sum;
}
DSK_HD inline void attn_row_normalize(float* row, int64_t jn, int64_t T, float sum, int t, int nt) {
    const float inv = 1.0f / sum;
    for (int64_t j = t; j < T; j += nt) row[j] = j < jn ? row[j] * inv : 0.0f;
}

// Softmax backward of a row, in place on dA (the gradient of the
// probabilities after dropout's backward), thread t of nt:
//   phase 1: partial sum of dA[j] * A[j] over the visible j -> red[t]; tree (AttnSum);
//   phase 2: dS[j] = scale * A[j] * (dA[j] - rowdot) for j < jn, 0 beyond
//            (scale = 1/sqrt(hd) folded in here, as the CPU GEMM kernel does).
DSK_HD inline float attn_sbwd_dot_part(const float* da, const float* a, int64_t jn, int t, int nt) {
    float s = 0.0f;
    for (int64_t j = t; j < jn; j += nt) s += da[j] * a[j];
    return s;
}
DSK_HD inline void attn_sbwd_write(float* da, const float* a, int64_t jn, int64_t T, float rowdot, float scale, int t,
                                   int nt) {
    for (int64_t j = t; j < T; j += nt) da[j] = j < jn ? scale * a[j] * (da[j] - rowdot) : 0.0f;
}

}  // namespace
