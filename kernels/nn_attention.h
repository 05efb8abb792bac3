/*
 * nn_attention.h — multi-head scaled dot-product self-attention over a fused
 * q,k,v activation, as GPT-2 / nanoGPT / llm.c lay it out:
 *
 *   qkv [B, T, 3C]: per token the q block (C), then k (C), then v (C); inside a
 *                   block head h owns the hd = C/H values [h*hd, (h+1)*hd).
 *   out [B, T, C]:  per token the heads' outputs side by side (the same
 *                   [H, hd] order), ready for the output projection.
 *
 * For every batch b and head h:  S = Q Kᵀ / sqrt(hd);  S[i][j] = -inf for j > i
 * when causal;  A = softmax(S) per row;  D = dropout(A);  O = D V.
 * Dropout on the probabilities is the dropout of nn_ops.h applied to the
 * [B, H, T, T] tensor A with the given key: element (b, h, i, j) has stream
 * index key.offset + ((b*H + h)*T + i)*T + j, so D equals
 * dsk_cpu_dropout_apply(A, B*H*T*T, p, key) bit for bit and backward (or a
 * recomputation) regenerates the mask instead of storing it.
 *
 * Forward can save A ([B, H, T, T], the probabilities before dropout; zero
 * above the diagonal when causal) for backward; backward recomputes A from
 * qkv when it is not given (DeepSpeed's attn_dropout_checkpoint trades that
 * recomputation for T² floats per head). Work is split into pieces that
 * depend on the shape only (a (b, h) pair; for the GEMM kernel a chunk of
 * batch elements of one head), each done by one thread, so results do not
 * depend on the thread count.
 */
#ifndef DS_KERNELS_NN_ATTENTION_H
#define DS_KERNELS_NN_ATTENTION_H

#include "kernels.h"
#include "nn_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dsk_attention_args {
    int64_t batch;     /* B >= 1 */
    int64_t seq;       /* T >= 1 */
    int64_t channels;  /* C >= 1, a multiple of heads */
    int64_t heads;     /* H >= 1 */
    int32_t causal;    /* 1: position i attends to j <= i; 0: to every j (BERT-style) */
    float dropout_p;   /* dropout on the probabilities, in [0, 1); 0: none */
    dsk_dropout_key dropout_key; /* nn_ops.h; read only when dropout_p > 0 */
    int32_t bf16_products; /* 1: on the GEMM kernel the six products take bf16-rounded
                              operands with fp32 accumulation (dsk_cpu_gemm_bf16, as
                              nn::Linear under bf16); the row loops (AUTO below seq 32)
                              stay fp32. 0: fp32 products */
} dsk_attention_args;

/** out = attention(qkv). probs (nullable): receives A, [B, H, T, T].
 *  Status DSK_ERR_INVALID_ARGUMENT for NULL pointers/args, sizes < 1, C not a
 *  multiple of H, p outside [0, 1), causal or bf16_products not 0 or 1, or
 *  B*H*T*T overflowing. */
int dsk_cpu_attention_forward(const float* qkv, float* out, float* probs, const dsk_attention_args* a) DSK_NOEXCEPT;

/** dqkv = d(out)/d(qkv)ᵀ dout, overwritten ([B, T, 3C]). probs: the A forward
 *  saved, or NULL to recompute it from qkv. Same argument rules as forward. */
int dsk_cpu_attention_backward(const float* qkv, const float* probs, const float* dout, float* dqkv,
                               const dsk_attention_args* a) DSK_NOEXCEPT;

/* Two CPU implementations compute the same formulas: the products as
 * single-threaded batched GEMMs on a head's strided slices
 * (DSK_ATTENTION_KERNEL_GEMM), or as per-row dot/axpy loops
 * (DSK_ATTENTION_KERNEL_ROWS). The default, DSK_ATTENTION_KERNEL_AUTO, takes
 * the GEMMs for seq >= 32 and the loops below (faster there: small heads
 * cost oneDNN more in per-call overhead than the loops in arithmetic).
 * DS_ATTENTION_KERNEL=gemm|rows|auto at first use, or
 * dsk_cpu_attention_set_kernel(), picks one (tests, benchmarks). */
#define DSK_ATTENTION_KERNEL_GEMM 0
#define DSK_ATTENTION_KERNEL_ROWS 1
#define DSK_ATTENTION_KERNEL_AUTO 2
/** The DSK_ATTENTION_KERNEL_* in use. */
int dsk_cpu_attention_kernel(void) DSK_NOEXCEPT;
/** Use `kernel` from now on: DSK_OK, or DSK_ERR_INVALID_ARGUMENT naming it. */
int dsk_cpu_attention_set_kernel(int kernel) DSK_NOEXCEPT;

/* Scalar double-precision references (no argument checks): the tests' oracle
 * and the float64 model the gradient checks difference. */
void dsk_ref_attention_forward(const double* qkv, double* out, double* probs, const dsk_attention_args* a);
void dsk_ref_attention_backward(const double* qkv, const double* dout, double* dqkv, const dsk_attention_args* a);

#ifdef __cplusplus
}
#endif

#endif /* DS_KERNELS_NN_ATTENTION_H */
