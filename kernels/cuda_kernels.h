/*
 * cuda_kernels.h — the CUDA compute kernels (kernels/cuda/, one op per .cu),
 * built only when CUDA is found (ds_build_info()'s "cuda_kernels" lists
 * them). Conventions as kernels.h: a dsk status (DSK_OK, or
 * DSK_ERR_INVALID_ARGUMENT / DSK_ERR_UNSUPPORTED with a message naming the
 * kernel and the argument, read with dsk_last_error()), no exceptions.
 * A failed CUDA runtime call (launch, allocation, copy) returns
 * DSK_ERR_CUDA with the kernel's name and cudaGetErrorString's text.
 *
 * Every buffer is device memory (or managed memory) unless a parameter says
 * "host". `stream` is a cudaStream_t (NULL: the legacy default stream); the
 * kernels are enqueued on it and the call returns without waiting, except
 * where a result comes back through a host pointer (then the call waits for
 * the stream). The per-element math is the CPU kernels' own bodies
 * (kernels/elem/), so a device result equals the CPU kernel's (and the
 * dsk_ref_* reference's) bit for bit, reductions excepted (their summation
 * order differs; both accumulate in double).
 */
#ifndef DS_CUDA_KERNELS_H
#define DS_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels.h"
#include "nn_attention.h"
#include "nn_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Number of CUDA devices (cudaGetDeviceCount); 0 with the reason in
 *  dsk_last_error() when there is none or the driver cannot be used. */
int dsk_cuda_device_count(void) DSK_NOEXCEPT;

/* ---- multi-tensor optimizers (chunked multi-tensor apply, DeepSpeed
 * FusedAdam's launch scheme, DEEPSPEED_SEMANTICS.md §2.2) ---------------
 * One call updates `count` tensors of the same dtypes with the same
 * hyper-parameters; each tensor i is the element-wise problem of the
 * dsk_cpu_*_step of kernels.h on (p, g, state1, state2, w16, n). w16 is
 * NULL for every tensor or for none. */
typedef struct dsk_opt_tensor {
    float* p;       /* fp32 master weights */
    const void* g;  /* gradient, g_dtype */
    void* state1;   /* Adam/Lion: m; SGD: momentum buffer (NULL when momentum == 0) */
    void* state2;   /* Adam: v; unused (NULL) otherwise */
    void* w16;      /* optional 16-bit copy of the updated p, w_dtype */
    size_t n;
} dsk_opt_tensor;

/** Adam/AdamW: the element math of dsk_cpu_adam_step (DeepSpeed CPU-Adam's
 *  order of operations; FusedAdam's formula up to rounding: sqrt(v)*bc2^-1/2
 *  rather than sqrt(v/bc2)). m, v have state_dtype. */
int dsk_cuda_adam_multi(const dsk_opt_tensor* t, size_t count, int g_dtype, int state_dtype, int w_dtype,
                        const dsk_adam_hparams* h, void* stream) DSK_NOEXCEPT;
/** SGD as dsk_cpu_sgd_step; state1 is the fp32 momentum buffer. */
int dsk_cuda_sgd_multi(const dsk_opt_tensor* t, size_t count, int g_dtype, int w_dtype,
                       const dsk_sgd_hparams* h, void* stream) DSK_NOEXCEPT;
/** Lion as dsk_cpu_lion_step; state1 is the fp32 momentum. */
int dsk_cuda_lion_multi(const dsk_opt_tensor* t, size_t count, int g_dtype, int w_dtype,
                        const dsk_lion_hparams* h, void* stream) DSK_NOEXCEPT;

/** LAMB as dsk_cpu_lamb_step, one tensor (the trust ratio is per tensor):
 *  pass 1, a deterministic two-stage reduction of |p|^2 and |u|^2 in double
 *  whose last block also forms the trust ratio on the device, pass 2. *trust
 *  (host, nullable) receives the ratio: the call then waits for the stream. */
int dsk_cuda_lamb_step(float* p, const void* g, int g_dtype, float* m, float* v, void* w16, int w_dtype,
                       size_t n, const dsk_lamb_hparams* h, float* trust, void* stream) DSK_NOEXCEPT;

/* ---- conversions, scaling, reductions ---------------------------------- */
/** As dsk_cpu_convert (any of F32/F16/BF16 to any; no overlap). */
int dsk_cuda_convert(const void* src, int src_dtype, void* dst, int dst_dtype, size_t n,
                     void* stream) DSK_NOEXCEPT;
/** Unscale / scale in place: as dsk_cpu_scale. */
int dsk_cuda_scale(void* x, int dtype, float s, size_t n, void* stream) DSK_NOEXCEPT;
/** As dsk_cpu_axpy. */
int dsk_cuda_axpy(void* dst, int dst_dtype, const void* src, int src_dtype, float scale, size_t n,
                  void* stream) DSK_NOEXCEPT;
/** Sum of squares in double (the global L2 norm's square) by a two-stage
 *  reduction whose order depends only on n (deterministic run to run);
 *  *sumsq and *nonfinite (host, nullable) as dsk_cpu_sumsq. Waits for the stream. */
int dsk_cuda_sumsq(const void* x, int dtype, size_t n, double* sumsq, int* nonfinite,
                   void* stream) DSK_NOEXCEPT;
/** As dsk_cpu_axpy_sumsq: dst = scale*src (overwrite != 0) or dst + scale*src,
 *  stored in dst's dtype, and the sum of squares of the stored values, in
 *  one pass with dsk_cuda_sumsq's reduction order. Waits for the stream. */
int dsk_cuda_axpy_sumsq(void* dst, int dst_dtype, const void* src, int src_dtype, float scale, int overwrite,
                        size_t n, double* sumsq, int* nonfinite, void* stream) DSK_NOEXCEPT;
/** Overflow check: *flag (device int) is set to 1 if any element of x is
 *  Inf or NaN, else left as it is (clear it first; one flag may collect
 *  several tensors, as DeepSpeed's overflow check of all gradients does). */
int dsk_cuda_check_overflow(const void* x, int dtype, size_t n, int* flag, void* stream) DSK_NOEXCEPT;

/* ---- the built-in layers' ops (nn_ops.h semantics, fp32) ---------------
 * Same arguments and results as the dsk_cpu_* twins of nn_ops.h; key, and
 * the results that nn_ops.h returns through double / int64 pointers, are
 * host memory. Reductions over a row run in one block in float (the CPU
 * sums a row in float too, in another order), so results match the float64
 * references within the CPU kernels' tolerances, not bit for bit; GELU and
 * dropout are the CPU's per-element functions (kernels/elem/exp_gelu.h,
 * dropout.h) and dropout draws the very same mask. */
int dsk_cuda_gelu_fwd(const float* x, float* y, size_t n, void* stream) DSK_NOEXCEPT;
int dsk_cuda_gelu_bwd(const float* x, const float* dy, float* dx, size_t n, void* stream) DSK_NOEXCEPT;
int dsk_cuda_dropout_fwd(const float* x, float* y, size_t n, float p, const dsk_dropout_key* key,
                         void* stream) DSK_NOEXCEPT;
int dsk_cuda_dropout_bwd(const float* dy, float* dx, size_t n, float p, const dsk_dropout_key* key,
                         void* stream) DSK_NOEXCEPT;
int dsk_cuda_dropout_apply(float* x, size_t n, float p, const dsk_dropout_key* key, void* stream) DSK_NOEXCEPT;
/** y = a + b; y += a; y[r, j] += bias[j] (the Linear's bias on the device). */
int dsk_cuda_add(const float* a, const float* b, float* y, size_t n, void* stream) DSK_NOEXCEPT;
int dsk_cuda_add_inplace(float* y, const float* a, size_t n, void* stream) DSK_NOEXCEPT;
int dsk_cuda_bias_add(float* y, const float* bias, size_t rows, size_t dim, void* stream) DSK_NOEXCEPT;
/** db[j] += sum over rows of dy[r, j] (as dsk_cpu_bias_grad, nn_gemm.h); column
 *  sums over fixed groups of rows, summed in order (deterministic). */
int dsk_cuda_bias_grad(const float* dy, float* db, int64_t rows, int64_t out, void* stream) DSK_NOEXCEPT;
int dsk_cuda_layernorm_fwd(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                           float* rstd, size_t rows, size_t dim, float eps, void* stream) DSK_NOEXCEPT;
/** dgamma/dbeta: column sums over fixed groups of rows, the groups summed in
 *  order (deterministic), added into the outputs as the CPU kernel does. */
int dsk_cuda_layernorm_bwd(const float* dy, const float* x, const float* mean, const float* rstd,
                           const float* gamma, float* dx, float* dgamma, float* dbeta, size_t rows, size_t dim,
                           void* stream) DSK_NOEXCEPT;
/** *loss_sum, *count (host, nullable): waits for the stream. A bad target
 *  gives DSK_ERR_INVALID_ARGUMENT naming the first bad row and its value. */
int dsk_cuda_softmax_xent_fwd(const float* logits, const void* targets, int target_dtype, size_t rows, size_t V,
                              int64_t ignore_index, float* row_loss, float* row_lse, double* loss_sum,
                              int64_t* count, void* stream) DSK_NOEXCEPT;
int dsk_cuda_softmax_xent_bwd(const float* logits, const void* targets, int target_dtype, const float* row_lse,
                              size_t rows, size_t V, int64_t ignore_index, float scale, float* dlogits,
                              void* stream) DSK_NOEXCEPT;

/* ---- dense matrix products on cuBLAS (nn_gemm.h semantics) ------------
 * Same arguments, checks (the CPU's own, kernels/cpu/gemm_check.h, made
 * before any CUDA call) and results as the dsk_cpu_* twins: row-major,
 * trans flags, leading dimensions, beta == 0 writes C without reading it,
 * k == 0 or alpha == 0 scales C by beta without reading A or B. Each call
 * runs on a cuBLAS handle of a process-wide pool bound to `stream` (on the
 * stream's device; the caller's current device is restored); a cuBLAS
 * failure is DSK_ERR_CUDA with the kernel and cuBLAS's status name.
 * fp32: fp32 math (CUBLAS_COMPUTE_32F, no TF32), within the float64
 * reference's k-scaled tolerance of the CPU, not bit for bit (cuBLAS's
 * summation order; run to run deterministic on one GPU model and cuBLAS
 * version). bf16: operands rounded to bf16 (nearest even) on the device into
 * stream-ordered scratch, bf16 x bf16 products summed in fp32 into fp32
 * results, as dsk_cpu_gemm_bf16; the _bf16w entries read w16 in place. The
 * biases are added, and db summed, by dsk_cuda_bias_add / dsk_cuda_bias_grad. */
int dsk_cuda_gemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                  const float* b, int64_t ldb, float beta, float* c, int64_t ldc, void* stream) DSK_NOEXCEPT;
int dsk_cuda_gemm_batched(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc, int64_t batch,
                          int64_t stride_a, int64_t stride_b, int64_t stride_c, void* stream) DSK_NOEXCEPT;
int dsk_cuda_linear_fwd(const float* x, const float* w, const float* bias, float* y, int64_t rows, int64_t in,
                        int64_t out, void* stream) DSK_NOEXCEPT;
int dsk_cuda_gemm_bf16(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                       int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
                       void* stream) DSK_NOEXCEPT;
int dsk_cuda_linear_fwd_bf16(const float* x, const float* w, const float* bias, float* y, int64_t rows, int64_t in,
                             int64_t out, void* stream) DSK_NOEXCEPT;
int dsk_cuda_linear_bwd_bf16(const float* dy, const float* x, const float* w, float* dx, float* dw, float* db,
                             int64_t rows, int64_t in, int64_t out, void* stream) DSK_NOEXCEPT;
int dsk_cuda_linear_fwd_bf16w(const float* x, const uint16_t* w16, const float* bias, float* y, int64_t rows,
                              int64_t in, int64_t out, void* stream) DSK_NOEXCEPT;
int dsk_cuda_linear_bwd_bf16w(const float* dy, const float* x, const uint16_t* w16, float* dx, float* dw, float* db,
                              int64_t rows, int64_t in, int64_t out, void* stream) DSK_NOEXCEPT;

/* ---- the MoE layer's dispatch and combine (nn_moe.h) ---------------------
 * As the dsk_cpu_* twins; idx and scale in device memory, not checked
 * (the layer makes them). Gather and scatter-add give the CPU kernel's
 * values bit for bit; the row dots sum in another order. */
int dsk_cuda_moe_rows_gather(const float* src, int64_t S, int64_t C, const int32_t* idx, const float* scale,
                             int64_t n, float* dst, void* stream) DSK_NOEXCEPT;
int dsk_cuda_moe_rows_scatter_add(const float* src, int64_t n, int64_t C, const int32_t* idx, const float* scale,
                                  int64_t S, float* dst, void* stream) DSK_NOEXCEPT;
int dsk_cuda_moe_rows_dot(const float* a, int64_t S, int64_t C, const int32_t* idx, const float* b, int64_t n,
                          float* out, void* stream) DSK_NOEXCEPT;
/* The gate's Jitter (dsk_cpu_moe_jitter): the factors drawn on the device
 * from the same Philox stream, the CPU kernel's values bit for bit; key in
 * host memory (passed by value to the kernel). */
int dsk_cuda_moe_jitter(const float* src, int64_t n, const dsk_dropout_key* key, uint64_t first, int accumulate,
                        float* dst, void* stream) DSK_NOEXCEPT;

/* ---- embedding, LayerNorm backward from the output, MSE -----------------
 * As the dsk_cpu_* twins (nn_embedding.h, nn_ops.h); *bad_index and
 * *sum_sq are host memory. Embedding (both directions) checks every id on
 * the device first and WAITS for the stream: a bad id gives
 * DSK_ERR_INVALID_ARGUMENT naming the first bad position and its value,
 * stored in *bad_index, and nothing is written. The backward sorts the
 * tokens by id (CUB's stable radix sort) and adds each id's tokens in token
 * order: the CPU kernel's dweight bit for bit, no float atomics; n above
 * 2^31-1 or num above 2^32 is DSK_ERR_UNSUPPORTED. */
int dsk_cuda_embedding_fwd(const float* weight, int64_t num, int64_t dim, const void* ids, int id_dtype, int64_t n,
                           float* out, int64_t* bad_index, void* stream) DSK_NOEXCEPT;
int dsk_cuda_embedding_bwd(const float* dy, const void* ids, int id_dtype, int64_t n, int64_t num, int64_t dim,
                           float* dweight, int64_t* bad_index, void* stream) DSK_NOEXCEPT;
/** xhat = (y - beta)/gamma; dx one block per row, dgamma/dbeta as
 *  dsk_cuda_layernorm_bwd (fixed groups of rows, deterministic). With gamma,
 *  a zero element is found on the device and the call WAITS for that check
 *  (DSK_ERR_INVALID_ARGUMENT naming the index, nothing written). */
int dsk_cuda_layernorm_bwd_from_output(const float* dy, const float* y, const float* rstd, const float* gamma,
                                       const float* beta, float* dx, float* dgamma, float* dbeta, size_t rows,
                                       size_t dim, void* stream) DSK_NOEXCEPT;
/** *sum_sq (host): sum (pred - target)^2 in double by dsk_cuda_sumsq's
 *  two-stage reduction (order a function of n); waits for the stream. */
int dsk_cuda_mse_fwd(const float* pred, const float* target, size_t n, double* sum_sq, void* stream) DSK_NOEXCEPT;
/** dpred = scale * (pred - target): the CPU kernel's values bit for bit. */
int dsk_cuda_mse_bwd(const float* pred, const float* target, size_t n, float scale, float* dpred,
                     void* stream) DSK_NOEXCEPT;

/* ---- attention (nn_attention.h semantics) -----------------------------
 * As dsk_cpu_attention_forward / _backward: the same arguments (args is host
 * memory), the same argument rules and messages, probs optional in both.
 * The six products (scores, out, and the backward's four) take one of two
 * implementations (below); the softmax and its backward are own kernels, one
 * block per row (vexp, ../elem/exp_gelu.h; fixed reduction trees); dropout on
 * the probabilities draws the CPU's mask (stream index key.offset +
 * ((b*H + h)*T + i)*T + j). Scores, probabilities (unless probs is given),
 * D under dropout and backward's dD take [B, H, T, T] float buffers of
 * device scratch (the kernels' memory pool, on the stream). bf16_products = 1 rounds
 * every product's operands to bf16 with fp32 accumulation at every seq (as
 * the CPU GEMM kernel, DSK_ATTENTION_KERNEL_GEMM; the CPU's AUTO keeps its
 * fp32 row loops below seq 32). Against dsk_ref_attention_* and the CPU
 * kernels: max error / (1 + max |ref|) below 1e-5 with fp32 products. */
int dsk_cuda_attention_forward(const float* qkv, float* out, float* probs, const dsk_attention_args* a,
                               void* stream) DSK_NOEXCEPT;
int dsk_cuda_attention_backward(const float* qkv, const float* probs, const float* dout, float* dqkv,
                                const dsk_attention_args* a, void* stream) DSK_NOEXCEPT;
/** The kernels' scratch pool (kernels/cuda/scratch_pool.h) keeps the memory
 *  it reserved across synchronizations; this hands what is free in it back to
 *  the driver (cudaMemPoolTrimTo 0) on `device`, or on every device for -1.
 *  The engines' allocator calls it before retrying a device allocation that
 *  found no memory, and when it releases its cached blocks. DSK_OK, or
 *  DSK_ERR_CUDA naming the device. */
int dsk_cuda_release_scratch(int device) DSK_NOEXCEPT;

/* The products' implementation:
 *  DSK_CUDA_ATTENTION_CUBLAS (the default): one cuBLAS strided batched GEMM
 *    per batch element over its heads (fp32: CUBLAS_COMPUTE_32F, no TF32;
 *    bf16: bf16 copies of the operands, made once per buffer and call, on the
 *    tensor cores, the softmax, dropout and their backward writing the bf16
 *    copies of D and dS directly); causal products are computed whole and the
 *    masked half zeroed by the softmax. Identical bits run to run on one stream.
 *  DSK_CUDA_ATTENTION_TILED: own kernels on 16 x 16 output tiles with
 *    shared-memory operand tiles, each element summed in k order in fp32,
 *    causal tiles above the diagonal skipped; no atomics, so the bits depend
 *    on the shape only (tests/unit/cuda_attention_host.h predicts them).
 * DS_CUDA_ATTENTION=cublas|tiled at first use, or
 * dsk_cuda_attention_set_products(), picks one (tests, benchmarks). */
#define DSK_CUDA_ATTENTION_CUBLAS 0
#define DSK_CUDA_ATTENTION_TILED 1
/** The DSK_CUDA_ATTENTION_* in use. */
int dsk_cuda_attention_products(void) DSK_NOEXCEPT;
/** Use `products` from now on: DSK_OK, or DSK_ERR_INVALID_ARGUMENT naming it. */
int dsk_cuda_attention_set_products(int products) DSK_NOEXCEPT;

/** The kernel table (backend.h) of the CUDA kernels on `stream` (one table
 *  per stream, kept for the life of the process; NULL only if it cannot be
 *  allocated). Every entry has a CUDA kernel. */
struct dsk_backend;
const struct dsk_backend* dsk_backend_cuda(void* stream) DSK_NOEXCEPT;

/** The kernels compiled in, as a comma-separated list ("adam_multi,...")
 *  and the CUDA architectures they were built for ("80-real,90"). */
const char* dsk_cuda_kernel_list(void) DSK_NOEXCEPT;
const char* dsk_cuda_architectures(void) DSK_NOEXCEPT;

#ifdef __cplusplus
}
#endif

#endif /* DS_CUDA_KERNELS_H */
