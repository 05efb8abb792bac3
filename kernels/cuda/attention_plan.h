// The steps of the CUDA attention (attention.cu) as host code templated on a
// launcher, so that the entry points and the host tests
// (tests/unit/cuda_attention_test.cpp) run the same sequence of products,
// softmaxes and dropouts on the same buffers with the same strides: the
// device launcher enqueues kernels, the test's launcher runs the kernels'
// per-thread functions (attention_body.h) for every (block, thread).
//
// A launcher L provides, each returning a dsk status:
//   gemm(const AttnGemm&)                          C = alpha op(A) op(B) per item
//   softmax(float* P, int64_t rows, int64_t T, int32_t causal)      rows of P in place
//   dropout(const float* x, float* y, size_t n, const dsk_attention_args&)
//                                                   y = x * mask (stream index key.offset + e)
//   softmax_bwd(float* G, const float* P, int64_t rows, int64_t T, int32_t causal, float scale)
//   kFuses (static bool): whether it has the fused bf16 steps below, and then
//   fused_bf16(const dsk_attention_args&) -> bool  whether they replace softmax + dropout
//                                                   and dropout + softmax_bwd in this call
// (attention_fused_body.h; the products then read bf16 copies the launcher
// keeps by fp32 address range; D below is only the range a copy is filed
// under, never written):
//   softmax_d16(float* P, int64_t rows, int64_t T, const dsk_attention_args&)
//       P's softmax in place, and bf16(dropout(P)) filed under P
//   dropout_d16(const float* P, const float* D, size_t n, const dsk_attention_args&)
//       bf16(dropout(P)) filed under D
//   softmax_bwd_d16(const float* G, const float* P, int64_t rows, int64_t T, float scale, const dsk_attention_args&)
//       the bf16 copy of dS = softmax_bwd(dropout_bwd(G)) at G's addresses; G not rewritten
// Row r of a [B, H, T, T] buffer is query i = r % T of item r / T = b*H + h.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "attention_body.h"
#include "nn_attention.h"

namespace ds::kernels {

struct AttnDims {
    int64_t B, T, C, H, hd;
    size_t tt() const { return static_cast<size_t>(B * H * T * T); }  // floats of one [B, H, T, T] buffer
    float scale() const { return 1.0f / std::sqrt(static_cast<float>(hd)); }  // the CPU kernels' scale
};

// The six products on the heads' slices (item z = b*H + h; qkv rows s3 = 3C
// apart, an item's rows T*s3 apart; [B, H, T, T] buffers HTT / TT apart).
// Each operand: pointer, row stride, column stride (none for C), batch
// stride, head stride; then M, N, K, H, items, alpha, bf16, lower_only.
// S = scale Q Kᵀ into P (only j <= i when causal).
inline AttnGemm attn_gemm_scores(const AttnDims& d, const dsk_attention_args& a, const float* qkv, float* P) {
    const int64_t s3 = 3 * d.C, T = d.T, TT = T * T, HTT = d.H * T * T;
    return AttnGemm{qkv,       s3, 1,  T * s3, d.hd,  // A = Q (i, c)
                    qkv + d.C, 1,  s3, T * s3, d.hd,  // B = Kᵀ (c, j)
                    P,         T,      HTT,    TT,    // C = S (i, j)
                    T,         T,  d.hd, d.H, d.B * d.H, d.scale(), a.bf16_products, a.causal};
}
// O = D V into out [B, T, C] (head h's columns h*hd ...).
inline AttnGemm attn_gemm_out(const AttnDims& d, const dsk_attention_args& a, const float* D, const float* qkv,
                              float* out) {
    const int64_t s3 = 3 * d.C, T = d.T, TT = T * T, HTT = d.H * T * T;
    return AttnGemm{D,             T,   1, HTT,     TT,    // A = D (i, j)
                    qkv + 2 * d.C, s3,  1, T * s3,  d.hd,  // B = V (j, c)
                    out,           d.C,    T * d.C, d.hd,  // C = O (i, c)
                    T,             d.hd, T, d.H, d.B * d.H, 1.0f, a.bf16_products, 0};
}
// dV = Dᵀ dO into dqkv's v block.
inline AttnGemm attn_gemm_dv(const AttnDims& d, const dsk_attention_args& a, const float* D, const float* dout,
                             float* dqkv) {
    const int64_t s3 = 3 * d.C, T = d.T, TT = T * T, HTT = d.H * T * T;
    return AttnGemm{D,              1,   T, HTT,     TT,    // A = Dᵀ (j, i)
                    dout,           d.C, 1, T * d.C, d.hd,  // B = dO (i, c)
                    dqkv + 2 * d.C, s3,     T * s3,  d.hd,  // C = dV (j, c)
                    T,              d.hd, T, d.H, d.B * d.H, 1.0f, a.bf16_products, 0};
}
// dD = dO Vᵀ into G (only j <= i when causal).
inline AttnGemm attn_gemm_dd(const AttnDims& d, const dsk_attention_args& a, const float* dout, const float* qkv,
                             float* G) {
    const int64_t s3 = 3 * d.C, T = d.T, TT = T * T, HTT = d.H * T * T;
    return AttnGemm{dout,          d.C, 1,  T * d.C, d.hd,  // A = dO (i, c)
                    qkv + 2 * d.C, 1,   s3, T * s3,  d.hd,  // B = Vᵀ (c, j)
                    G,             T,       HTT,     TT,    // C = dD (i, j)
                    T,             T,   d.hd, d.H, d.B * d.H, 1.0f, a.bf16_products, a.causal};
}
// dQ = dS K into dqkv's q block (the scale is already in dS).
inline AttnGemm attn_gemm_dq(const AttnDims& d, const dsk_attention_args& a, const float* G, const float* qkv,
                             float* dqkv) {
    const int64_t s3 = 3 * d.C, T = d.T, TT = T * T, HTT = d.H * T * T;
    return AttnGemm{G,         T,  1, HTT,    TT,    // A = dS (i, j)
                    qkv + d.C, s3, 1, T * s3, d.hd,  // B = K (j, c)
                    dqkv,      s3,    T * s3, d.hd,  // C = dQ (i, c)
                    T,         d.hd, T, d.H, d.B * d.H, 1.0f, a.bf16_products, 0};
}
// dK = dSᵀ Q into dqkv's k block.
inline AttnGemm attn_gemm_dk(const AttnDims& d, const dsk_attention_args& a, const float* G, const float* qkv,
                             float* dqkv) {
    const int64_t s3 = 3 * d.C, T = d.T, TT = T * T, HTT = d.H * T * T;
    return AttnGemm{G,          1,  T, HTT,    TT,    // A = dSᵀ (j, i)
                    qkv,        s3, 1, T * s3, d.hd,  // B = Q (i, c)
                    dqkv + d.C, s3,    T * s3, d.hd,  // C = dK (j, c)
                    T,          d.hd, T, d.H, d.B * d.H, 1.0f, a.bf16_products, 0};
}

// Whether launcher l takes the fused bf16 steps in this call.
template <class L>
bool attn_fused(const L& l, const dsk_attention_args& a) {
    if constexpr (L::kFuses)
        return l.fused_bf16(a);
    else
        return false;
}

// Whether D = dropout(P) needs an fp32 buffer of its own: under dropout,
// unless the fused steps take it. They keep D in bf16 only, its copy filed
// under the address of a buffer whose fp32 values no product reads while the
// copy lives (forward: P; backward: G, which dD's product overwrites only
// after dV's has read D).
template <class L>
bool attn_d_buffer(const L& l, const dsk_attention_args& a) {
    return a.dropout_p > 0.0f && !attn_fused(l, a);
}

// [B, H, T, T] buffers of device scratch a call with launcher l needs: one
// for A when probs is not given, one for D when attn_d_buffer, one for
// dD / dA / dS backward.
template <class L>
size_t attn_scratch_buffers(const L& l, bool backward, bool probs_given, const dsk_attention_args& a) {
    return (probs_given ? 0u : 1u) + (attn_d_buffer(l, a) ? 1u : 0u) + (backward ? 1u : 0u);
}

// The steps between the products, fused where the launcher fuses them.
// P's softmax and D = dropout(P) (D null: no dropout or fused, the products
// read P's address).
template <class L>
int attn_softmax_dropout(L& l, float* P, float* D, int64_t rows, int64_t T, const dsk_attention_args& a) {
    if constexpr (L::kFuses)  // a launcher without the fused steps need not declare them
        if (l.fused_bf16(a)) return l.softmax_d16(P, rows, T, a);
    if (int st = l.softmax(P, rows, T, a.causal)) return st;
    return D != nullptr ? l.dropout(P, D, static_cast<size_t>(rows * T), a) : 0;
}
// The backward's D = dropout(P) for dV.
template <class L>
int attn_dropout_for_dv(L& l, const float* P, float* D, size_t n, const dsk_attention_args& a) {
    if constexpr (L::kFuses)  // a launcher without the fused steps need not declare them
        if (l.fused_bf16(a)) return l.dropout_d16(P, D, n, a);
    return l.dropout(P, D, n, a);
}
// dA = dropout_bwd(dD) (the same mask), dS = softmax_bwd(dA), in G.
template <class L>
int attn_softmax_bwd_dropout(L& l, float* G, const float* P, int64_t rows, int64_t T, float scale,
                             const dsk_attention_args& a) {
    if constexpr (L::kFuses)  // a launcher without the fused steps need not declare them
        if (l.fused_bf16(a)) return l.softmax_bwd_d16(G, P, rows, T, scale, a);
    if (a.dropout_p > 0.0f)
        if (int st = l.dropout(G, G, static_cast<size_t>(rows * T), a)) return st;
    return l.softmax_bwd(G, P, rows, T, a.causal, scale);
}

// Forward: P = softmax(scale Q Kᵀ) (into probs when given), D = dropout(P),
// out = D V (fused: D's bf16 copy filed under P). scratch:
// attn_scratch_buffers(l, false, ...) buffers of d.tt() floats.
template <class L>
int attn_forward_steps(L& l, const AttnDims& d, const dsk_attention_args& a, const float* qkv, float* out,
                       float* probs, float* scratch) {
    const size_t tt = d.tt();
    float* P = probs;
    if (P == nullptr) {
        P = scratch;
        scratch += tt;
    }
    if (int st = l.gemm(attn_gemm_scores(d, a, qkv, P))) return st;
    float* D = attn_d_buffer(l, a) ? scratch : nullptr;
    if (int st = attn_softmax_dropout(l, P, D, d.B * d.H * d.T, d.T, a)) return st;
    return l.gemm(attn_gemm_out(d, a, D != nullptr ? D : P, qkv, out));
}

// Backward: P given or recomputed by forward's two steps (so bit-identical
// to what forward saves), D = dropout(P), dV = Dᵀ dO, G = dO Vᵀ, dA =
// dropout_bwd(G) (the same mask), dS = softmax_bwd, dQ = dS K, dK = dSᵀ Q.
// Every element of dqkv is written once (overwrite). scratch:
// attn_scratch_buffers(l, true, ...) buffers of d.tt() floats (fused: D's
// bf16 copy filed under G until dD's product writes G).
template <class L>
int attn_backward_steps(L& l, const AttnDims& d, const dsk_attention_args& a, const float* qkv, const float* probs,
                        const float* dout, float* dqkv, float* scratch) {
    const size_t tt = d.tt();
    const int64_t rows = d.B * d.H * d.T;
    const float* P = probs;
    if (P == nullptr) {
        float* p = scratch;
        scratch += tt;
        if (int st = l.gemm(attn_gemm_scores(d, a, qkv, p))) return st;
        if (int st = l.softmax(p, rows, d.T, a.causal)) return st;
        P = p;
    }
    const bool d_buffer = attn_d_buffer(l, a);
    float* G = d_buffer ? scratch + tt : scratch;
    const float* D = P;
    if (a.dropout_p > 0.0f) {
        float* dst = d_buffer ? scratch : G;
        if (int st = attn_dropout_for_dv(l, P, dst, tt, a)) return st;
        D = dst;
    }
    if (int st = l.gemm(attn_gemm_dv(d, a, D, dout, dqkv))) return st;
    if (int st = l.gemm(attn_gemm_dd(d, a, dout, qkv, G))) return st;
    if (int st = attn_softmax_bwd_dropout(l, G, P, rows, d.T, d.scale(), a)) return st;
    if (int st = l.gemm(attn_gemm_dq(d, a, G, qkv, dqkv))) return st;
    return l.gemm(attn_gemm_dk(d, a, G, qkv, dqkv));
}

}  // namespace ds::kernels
