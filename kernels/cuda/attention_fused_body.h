// The attention's fused bf16 steps (attention.cu with the products on cuBLAS
// and bf16_products): where the unfused steps write an fp32 [B, H, T, T]
// buffer only for it to be rounded to bf16 for the next products (D =
// dropout(P) for out and dV; dS for dQ and dK), these write the bf16 copy
// directly, and never the fp32 buffer:
//   softmax + dropout + bf16 store     P (fp32, the probabilities) and bf16(D)
//   dropout + bf16 store               bf16(D) from P (the backward)
//   dropout backward + softmax backward + bf16 store   bf16(dS) from dD and P
// Per-thread functions as attention_body.h's, with its thread-to-column
// assignment and reduction trees, and the unfused steps' per-element
// expressions (dropout_elem with the same stream words, the same softmax
// formulas, dsk_f32_to_bf16_bits as dsk_cuda_convert rounds), so the bf16
// values equal the unfused steps' rounded ones bit for bit; the host tests
// (tests/unit/cuda_attention_cublas_test.cpp) run them for every (block, thread).
#pragma once

#include <cstdint>

#include "../cpu/philox.h"
#include "../elem/dropout.h"
#include "../elem/hd.h"
#include "../ref/half_bits.h"
#include "attention_body.h"
#include "nn_attention.h"

// Named (plain data): a kernel parameter.
namespace ds::kernels {
// Dropout over a [B, H, T, T] buffer: element e draws stream element e0 + e.
struct AttnDrop {
    DropoutStream st;
    uint64_t e0;
    uint32_t thr;
    float scale;
    int32_t on;  // 0: no dropout (dropout_p 0)
};
}  // namespace ds::kernels

namespace {

using ds::kernels::AttnDrop;

// The dropout of a call's [B, H, T, T] buffers (host code).
inline AttnDrop attn_drop_of(const dsk_attention_args& a) {
    return AttnDrop{dropout_stream(a.dropout_key), a.dropout_key.offset,
                    static_cast<uint32_t>(dsk_dropout_threshold(a.dropout_p)), 1.0f / (1.0f - a.dropout_p),
                    a.dropout_p > 0.0f ? 1 : 0};
}

// Element e of the buffer after dropout, as dropout_block computes it.
DSK_HD inline float attn_drop(const AttnDrop& d, uint64_t e, float x) {
    if (!d.on) return x;
    return dropout_elem(x, ds::kernels::philox_word(d.e0 + e, d.st.c2, d.st.c3, d.st.k), d.thr, d.scale);
}

// Softmax phase 3 (after attention_body.h's phases 1 and 2) of row r, thread
// t of nt: row[j] = the probability (0 beyond jn), d16[j] = bf16 of its
// dropout, for every j < T.
DSK_HD inline void attn_row_normalize_d16(float* row, uint16_t* d16, int64_t r, int64_t jn, int64_t T, float sum,
                                          const AttnDrop& d, int t, int nt) {
    const float inv = 1.0f / sum;
    for (int64_t j = t; j < T; j += nt) {
        const float p = j < jn ? row[j] * inv : 0.0f;
        row[j] = p;
        d16[j] = dsk_f32_to_bf16_bits(attn_drop(d, static_cast<uint64_t>(r * T + j), p));
    }
}

// Element i of the backward's bf16(D) from P.
DSK_HD inline void attn_drop_d16(const float* p, uint16_t* d16, uint64_t i, const AttnDrop& d) {
    d16[i] = dsk_f32_to_bf16_bits(attn_drop(d, i, p[i]));
}

// Softmax backward of row r with dropout's backward folded in, thread t of nt:
//   phase 1: partial sum of dropout(dD)[j] * P[j] over the visible j -> red[t]; tree (AttnSum);
//   phase 2: g16[j] = bf16(scale * P[j] * (dropout(dD)[j] - rowdot)) for j < jn, 0 beyond.
DSK_HD inline float attn_sbwd_dot_part_drop(const float* g, const float* p, int64_t r, int64_t jn, int64_t T,
                                            const AttnDrop& d, int t, int nt) {
    float s = 0.0f;
    for (int64_t j = t; j < jn; j += nt) s += attn_drop(d, static_cast<uint64_t>(r * T + j), g[j]) * p[j];
    return s;
}
DSK_HD inline void attn_sbwd_write_d16(const float* g, const float* p, uint16_t* g16, int64_t r, int64_t jn, int64_t T,
                                       float rowdot, float scale, const AttnDrop& d, int t, int nt) {
    for (int64_t j = t; j < T; j += nt) {
        const float ds = j < jn ? scale * p[j] * (attn_drop(d, static_cast<uint64_t>(r * T + j), g[j]) - rowdot) : 0.0f;
        g16[j] = dsk_f32_to_bf16_bits(ds);
    }
}

}  // namespace
