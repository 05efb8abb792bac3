/*
 * backend.h — the per-device kernel table. The library reaches every compute
 * kernel through one of these (C++: ds::Kernels in src/core/kernel_backend.h),
 * so a device backend is one more table (dsk_backend_cuda(stream), later), not
 * an #ifdef at the call sites.
 *
 * Every entry takes the table itself first (a device backend finds its stream
 * there), returns a dsk status (kernels.h) and reports results through
 * out-parameters; the other arguments and their meaning are those of the
 * dsk_cpu_* entry points in kernels.h. An entry a backend lacks is NULL.
 * The table is read-only and lives as long as the process.
 */
#ifndef DS_KERNELS_BACKEND_H
#define DS_KERNELS_BACKEND_H

#include "kernels.h"
#include "nn_embedding.h"
#include "nn_gemm.h"
#include "nn_ops.h"
#include "nn_attention.h"
#include "nn_moe.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DSK_BACKEND_VERSION 1

typedef struct dsk_backend dsk_backend;

struct dsk_backend {
    uint32_t struct_size; /* sizeof(dsk_backend) as built: entries past it are absent */
    uint32_t version;     /* DSK_BACKEND_VERSION */
    const char* name;     /* "cpu" */
    void* stream;         /* device stream / context; NULL for the CPU */

    int (*convert)(const dsk_backend* b, const void* src, int src_dtype, void* dst, int dst_dtype, size_t n);
    int (*scale)(const dsk_backend* b, void* x, int dtype, float s, size_t n);
    int (*sumsq)(const dsk_backend* b, const void* x, int dtype, size_t n, double* sumsq, int* nonfinite);
    int (*axpy)(const dsk_backend* b, void* dst, int dst_dtype, const void* src, int src_dtype, float scale,
                size_t n);
    int (*axpy_sumsq)(const dsk_backend* b, void* dst, int dst_dtype, const void* src, int src_dtype,
                      float scale, int overwrite, size_t n, double* sumsq, int* nonfinite);
    int (*adam_step)(const dsk_backend* b, float* p, const void* g, int g_dtype, void* m, void* v,
                     int state_dtype, void* w16, int w_dtype, size_t n, const dsk_adam_hparams* h);
    int (*lamb_step)(const dsk_backend* b, float* p, const void* g, int g_dtype, float* m, float* v, void* w16,
                     int w_dtype, size_t n, const dsk_lamb_hparams* h, float* trust);
    int (*sgd_step)(const dsk_backend* b, float* p, const void* g, int g_dtype, float* buf, void* w16,
                    int w_dtype, size_t n, const dsk_sgd_hparams* h);
    int (*lion_step)(const dsk_backend* b, float* p, const void* g, int g_dtype, float* m, void* w16,
                     int w_dtype, size_t n, const dsk_lion_hparams* h);
    /* dense layers (nn_gemm.h, nn_embedding.h) */
    int (*gemm)(const dsk_backend* b, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                const float* a, int64_t lda, const float* bm, int64_t ldb, float beta, float* c, int64_t ldc);
    int (*gemm_batched)(const dsk_backend* b, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
                        float alpha, const float* a, int64_t lda, const float* bm, int64_t ldb, float beta,
                        float* c, int64_t ldc, int64_t batch, int64_t stride_a, int64_t stride_b,
                        int64_t stride_c);
    int (*linear_fwd)(const dsk_backend* b, const float* x, const float* w, const float* bias, float* y,
                      int64_t rows, int64_t in, int64_t out);
    int (*bias_grad)(const dsk_backend* b, const float* dy, float* db, int64_t rows, int64_t out);
    int (*embedding_fwd)(const dsk_backend* b, const float* weight, int64_t num, int64_t dim, const void* ids,
                         int id_dtype, int64_t n, float* out, int64_t* bad_index);
    int (*embedding_bwd)(const dsk_backend* b, const float* dy, const void* ids, int id_dtype, int64_t n,
                         int64_t num, int64_t dim, float* dweight, int64_t* bad_index);
    /* nn layers' pointwise and row-wise kernels (nn_ops.h) */
    int (*layernorm_fwd)(const dsk_backend* b, const float* x, const float* gamma, const float* beta, float* y,
                         float* mean, float* rstd, size_t rows, size_t dim, float eps);
    int (*layernorm_bwd)(const dsk_backend* b, const float* dy, const float* x, const float* mean,
                         const float* rstd, const float* gamma, float* dx, float* dgamma, float* dbeta,
                         size_t rows, size_t dim);
    int (*layernorm_bwd_from_output)(const dsk_backend* b, const float* dy, const float* y, const float* rstd,
                                     const float* gamma, const float* beta, float* dx, float* dgamma,
                                     float* dbeta, size_t rows, size_t dim);
    int (*gelu_fwd)(const dsk_backend* b, const float* x, float* y, size_t n);
    int (*gelu_bwd)(const dsk_backend* b, const float* x, const float* dy, float* dx, size_t n);
    int (*dropout_fwd)(const dsk_backend* b, const float* x, float* y, size_t n, float p,
                       const dsk_dropout_key* key);
    int (*dropout_bwd)(const dsk_backend* b, const float* dy, float* dx, size_t n, float p,
                       const dsk_dropout_key* key);
    int (*dropout_apply)(const dsk_backend* b, float* x, size_t n, float p, const dsk_dropout_key* key);
    int (*softmax_xent_fwd)(const dsk_backend* b, const float* logits, const void* targets, int target_dtype,
                            size_t rows, size_t V, int64_t ignore_index, float* row_loss, float* row_lse,
                            double* loss_sum, int64_t* count);
    int (*softmax_xent_bwd)(const dsk_backend* b, const float* logits, const void* targets, int target_dtype,
                            const float* row_lse, size_t rows, size_t V, int64_t ignore_index, float scale,
                            float* dlogits);
    int (*mse_fwd)(const dsk_backend* b, const float* pred, const float* target, size_t n, double* sum_sq);
    int (*mse_bwd)(const dsk_backend* b, const float* pred, const float* target, size_t n, float scale,
                   float* dpred);
    int (*add)(const dsk_backend* b, const float* a, const float* bb, float* y, size_t n);
    int (*add_inplace)(const dsk_backend* b, float* y, const float* a, size_t n);
    /* nn_attention.h */
    int (*attention_forward)(const dsk_backend* b, const float* qkv, float* out, float* probs,
                             const dsk_attention_args* a);
    int (*attention_backward)(const dsk_backend* b, const float* qkv, const float* probs, const float* dout,
                              float* dqkv, const dsk_attention_args* a);
    /* bf16 products, fp32 accumulation (nn_gemm.h): Linear's matmuls when the engine is bf16 */
    int (*gemm_bf16)(const dsk_backend* b, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
                     float alpha, const float* a, int64_t lda, const float* bm, int64_t ldb, float beta, float* c,
                     int64_t ldc);
    int (*linear_fwd_bf16)(const dsk_backend* b, const float* x, const float* w, const float* bias, float* y,
                           int64_t rows, int64_t in, int64_t out);
    int (*linear_bwd_bf16)(const dsk_backend* b, const float* dy, const float* x, const float* w, float* dx,
                           float* dw, float* db, int64_t rows, int64_t in, int64_t out);
    /* the same two reading bf16 weights in place (nn_gemm.h); null: the backend has none */
    int (*linear_fwd_bf16w)(const dsk_backend* b, const float* x, const uint16_t* w16, const float* bias, float* y,
                            int64_t rows, int64_t in, int64_t out);
    int (*linear_bwd_bf16w)(const dsk_backend* b, const float* dy, const float* x, const uint16_t* w16, float* dx,
                            float* dw, float* db, int64_t rows, int64_t in, int64_t out);
    /* the MoE layer's dispatch and combine (nn_moe.h) */
    int (*moe_rows_gather)(const dsk_backend* b, const float* src, int64_t S, int64_t C, const int32_t* idx,
                           const float* scale, int64_t n, float* dst);
    int (*moe_rows_scatter_add)(const dsk_backend* b, const float* src, int64_t n, int64_t C, const int32_t* idx,
                                const float* scale, int64_t S, float* dst);
    int (*moe_rows_dot)(const dsk_backend* b, const float* a, int64_t S, int64_t C, const int32_t* idx,
                        const float* bm, int64_t n, float* out);
    /* the MoE gate's Jitter factors, drawn where the data is (nn_moe.h) */
    int (*moe_jitter)(const dsk_backend* b, const float* src, int64_t n, const dsk_dropout_key* key, uint64_t first,
                      int accumulate, float* dst);
};

/** The host table: the dsk_cpu_* kernels, on the ISA dsk_cpu_isa() picks
 *  (detected once, at first use; DS_CPU_ISA or dsk_cpu_set_isa override it). */
const dsk_backend* dsk_backend_cpu(void) DSK_NOEXCEPT;

#ifdef __cplusplus
}
#endif

#endif /* DS_KERNELS_BACKEND_H */
