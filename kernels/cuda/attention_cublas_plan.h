// The attention's batched products (attention_body.h's AttnGemm) as cuBLAS
// calls: pure host code, no CUDA, so the mapping is tested on every CI
// machine (tests/unit/cuda_attention_cublas_test.cpp runs the attention's
// steps with these calls interpreted by a column-major loop, against the
// float64 references).
//
// An AttnGemm's item z = b*H + h reads its operands at b*sb + h*sh. The
// q/k/v slices of qkv (and dout) are hd columns apart within a row of
// T*3C-apart batch elements, so no single item stride exists: one strided
// batched product per batch element b, over its H heads (stride sh), its
// operands b*sb further on. Each operand has a unit stride along rows or
// columns (the heads' slices, or a transpose of them), i.e. it is a
// row-major matrix or the transpose of one: gemm::Problem's trans flags and
// leading dimensions, which gemm_plan.h turns into cuBLAS's column-major
// call. Unlike the tiled kernel, the product is computed whole when
// lower_only is set: the entries above the diagonal are finite values that
// nothing reads (the softmax and its backward overwrite them with zeros).
#pragma once

#include <cstdint>

#include "../cpu/gemm_engines.h"
#include "attention_body.h"

namespace ds::kernels::cu {

// Elements from an operand's pointer to one past the last one it reads (or
// writes) over every item: what a bf16 copy of it must hold.
inline int64_t attn_operand_span(int64_t rows, int64_t cols, int64_t rs, int64_t cs, int64_t sb, int64_t sh,
                                 int64_t H, int64_t items) {
    if (rows == 0 || cols == 0 || items == 0 || H == 0) return 0;
    return (items / H - 1) * sb + (H - 1) * sh + (rows - 1) * rs + (cols - 1) * cs + 1;
}
inline int64_t attn_span_a(const AttnGemm& g) {
    return attn_operand_span(g.M, g.K, g.a_rs, g.a_cs, g.a_sb, g.a_sh, g.H, g.items);
}
inline int64_t attn_span_b(const AttnGemm& g) {
    return attn_operand_span(g.K, g.N, g.b_rs, g.b_cs, g.b_sb, g.b_sh, g.H, g.items);
}
inline int64_t attn_span_c(const AttnGemm& g) {
    return attn_operand_span(g.M, g.N, g.c_rs, 1, g.c_sb, g.c_sh, g.H, g.items);
}

// An operand X(r, c) = x[r*rs + c*cs], R x C, as gemm::Problem takes it: a
// row-major [R, C] with ld rs (c unit-strided), or the transpose of a
// row-major [C, R] with ld cs (r unit-strided); the ld at least the stored
// row's length, as cuBLAS requires. False: neither.
inline bool attn_operand_layout(int64_t R, int64_t C, int64_t rs, int64_t cs, bool* trans, int64_t* ld) {
    if (cs == 1 && rs >= (C > 1 ? C : 1)) {
        *trans = false, *ld = rs;
        return true;
    }
    if (rs == 1 && cs >= (R > 1 ? R : 1)) {
        *trans = true, *ld = cs;
        return true;
    }
    return false;
}

// `calls` strided batched products: call i is `p` (row-major, nn_gemm.h's
// conventions, batch = H heads sh apart) with its A, B and C at i * a_step,
// b_step, c_step elements from the AttnGemm's pointers. p.a, p.b and p.c are
// left null: the caller places them (on bf16 copies for bf16 products).
struct AttnCublasCalls {
    gemm::Problem p;
    int64_t calls = 0;
    int64_t a_step = 0, b_step = 0, c_step = 0;
};

// False when g does not map (an operand with no unit stride, C's rows
// shorter than N, items not whole batch elements): the six products of
// attention_plan.h always map; anything else keeps the tiled kernel.
inline bool attn_cublas_calls(const AttnGemm& g, AttnCublasCalls* r) {
    gemm::Problem& p = r->p;
    if (g.H <= 0 || g.items % g.H != 0 || g.c_rs < (g.N > 1 ? g.N : 1)) return false;
    if (!attn_operand_layout(g.M, g.K, g.a_rs, g.a_cs, &p.trans_a, &p.lda)) return false;
    if (!attn_operand_layout(g.K, g.N, g.b_rs, g.b_cs, &p.trans_b, &p.ldb)) return false;
    p.m = g.M, p.n = g.N, p.k = g.K;
    p.alpha = g.alpha, p.beta = 0.0f;
    p.ldc = g.c_rs;
    p.batch = g.H;
    p.stride_a = g.a_sh, p.stride_b = g.b_sh, p.stride_c = g.c_sh;
    r->calls = g.items / g.H;
    r->a_step = g.a_sb, r->b_step = g.b_sb, r->c_step = g.c_sb;
    return true;
}

}  // namespace ds::kernels::cu
