// The library's way to call the compute kernels: ds::Kernels wraps a
// device's dsk_backend table (kernels/backend.h) and turns a failed status
// into ds::Error with the kernel's status and message. Call sites name no
// device-specific function: kernels_for(device) picks the table.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend.h"
#include "core/device.h"

namespace ds {

// Throws ds::Error for a failed kernel call: DSK_ERR_INVALID_ARGUMENT ->
// DS_ERR_INVALID_ARGUMENT, DSK_ERR_UNSUPPORTED -> DS_ERR_UNSUPPORTED,
// DSK_ERR_CUDA -> DS_ERR_DEVICE, DSK_ERR_OUT_OF_MEMORY -> DS_ERR_OUT_OF_MEMORY,
// DSK_ERR_ENGINE -> DS_ERR_INTERNAL, with dsk_last_error()'s message; an
// unknown status -> DS_ERR_INTERNAL saying so.
[[noreturn]] void throw_kernel_error(int status);
// An entry the table lacks: DS_ERR_UNSUPPORTED naming the backend and entry.
[[noreturn]] void throw_missing_kernel(const dsk_backend& b, const char* entry);

class Kernels {
public:
    explicit Kernels(const dsk_backend& b) noexcept : b_(&b) {}
    const dsk_backend& table() const noexcept { return *b_; }

    void convert(const void* src, int src_dtype, void* dst, int dst_dtype, size_t n) const {
        check(entry(b_->convert, "convert")(b_, src, src_dtype, dst, dst_dtype, n));
    }
    void scale(void* x, int dtype, float s, size_t n) const { check(entry(b_->scale, "scale")(b_, x, dtype, s, n)); }
    // Sum of squares (double); *nonfinite (nullable) = 1 if any element is Inf/NaN.
    double sumsq(const void* x, int dtype, size_t n, int* nonfinite) const {
        double s = 0.0;
        check(entry(b_->sumsq, "sumsq")(b_, x, dtype, n, &s, nonfinite));
        return s;
    }
    void axpy(void* dst, int dst_dtype, const void* src, int src_dtype, float scale, size_t n) const {
        check(entry(b_->axpy, "axpy")(b_, dst, dst_dtype, src, src_dtype, scale, n));
    }
    double axpy_sumsq(void* dst, int dst_dtype, const void* src, int src_dtype, float scale, int overwrite,
                      size_t n, int* nonfinite) const {
        double s = 0.0;
        check(entry(b_->axpy_sumsq, "axpy_sumsq")(b_, dst, dst_dtype, src, src_dtype, scale, overwrite, n, &s,
                                                  nonfinite));
        return s;
    }
    void adam_step(float* p, const void* g, int g_dtype, void* m, void* v, int state_dtype, void* w16,
                   int w_dtype, size_t n, const dsk_adam_hparams* h) const {
        check(entry(b_->adam_step, "adam_step")(b_, p, g, g_dtype, m, v, state_dtype, w16, w_dtype, n, h));
    }
    // Returns the trust ratio used.
    float lamb_step(float* p, const void* g, int g_dtype, float* m, float* v, void* w16, int w_dtype, size_t n,
                    const dsk_lamb_hparams* h) const {
        float trust = 1.0f;
        check(entry(b_->lamb_step, "lamb_step")(b_, p, g, g_dtype, m, v, w16, w_dtype, n, h, &trust));
        return trust;
    }
    void sgd_step(float* p, const void* g, int g_dtype, float* buf, void* w16, int w_dtype, size_t n,
                  const dsk_sgd_hparams* h) const {
        check(entry(b_->sgd_step, "sgd_step")(b_, p, g, g_dtype, buf, w16, w_dtype, n, h));
    }
    void lion_step(float* p, const void* g, int g_dtype, float* m, void* w16, int w_dtype, size_t n,
                   const dsk_lion_hparams* h) const {
        check(entry(b_->lion_step, "lion_step")(b_, p, g, g_dtype, m, w16, w_dtype, n, h));
    }
    // Fused-qkv self-attention (nn_attention.h); probs nullable (forward: not
    // saved; backward: recomputed).
    void attention_forward(const float* qkv, float* out, float* probs, const dsk_attention_args& a) const {
        check(entry(b_->attention_forward, "attention_forward")(b_, qkv, out, probs, &a));
    }
    void attention_backward(const float* qkv, const float* probs, const float* dout, float* dqkv,
                            const dsk_attention_args& a) const {
        check(entry(b_->attention_backward, "attention_backward")(b_, qkv, probs, dout, dqkv, &a));
    }

    // C = alpha op(A) op(B) + beta C, fp32 row-major (kernels/nn_gemm.h).
    void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
              int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) const {
        check(entry(b_->gemm, "gemm")(b_, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc));
    }
    void gemm_batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                      int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc, int64_t batch,
                      int64_t stride_a, int64_t stride_b, int64_t stride_c) const {
        check(entry(b_->gemm_batched, "gemm_batched")(b_, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c,
                                                      ldc, batch, stride_a, stride_b, stride_c));
    }
    // y[rows, out] = x[rows, in] w^T + bias (w [out, in]; bias nullable).
    void linear_fwd(const float* x, const float* w, const float* bias, float* y, int64_t rows, int64_t in,
                    int64_t out) const {
        check(entry(b_->linear_fwd, "linear_fwd")(b_, x, w, bias, y, rows, in, out));
    }
    // The same two with bf16-rounded inputs and fp32 accumulation (nn_gemm.h).
    void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                   int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) const {
        check(entry(b_->gemm_bf16, "gemm_bf16")(b_, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc));
    }
    void linear_fwd_bf16(const float* x, const float* w, const float* bias, float* y, int64_t rows, int64_t in,
                         int64_t out) const {
        check(entry(b_->linear_fwd_bf16, "linear_fwd_bf16")(b_, x, w, bias, y, rows, in, out));
    }
    // dx = bf16(dy) bf16(w); dw += bf16(dy)^T bf16(x); db (nullable) += column sums of dy.
    void linear_bwd_bf16(const float* dy, const float* x, const float* w, float* dx, float* dw, float* db,
                         int64_t rows, int64_t in, int64_t out) const {
        check(entry(b_->linear_bwd_bf16, "linear_bwd_bf16")(b_, dy, x, w, dx, dw, db, rows, in, out));
    }
    // The two above with w already bf16 (the engine's working weights, read in place).
    void linear_fwd_bf16w(const float* x, const uint16_t* w16, const float* bias, float* y, int64_t rows, int64_t in,
                          int64_t out) const {
        check(entry(b_->linear_fwd_bf16w, "linear_fwd_bf16w")(b_, x, w16, bias, y, rows, in, out));
    }
    void linear_bwd_bf16w(const float* dy, const float* x, const uint16_t* w16, float* dx, float* dw, float* db,
                          int64_t rows, int64_t in, int64_t out) const {
        check(entry(b_->linear_bwd_bf16w, "linear_bwd_bf16w")(b_, dy, x, w16, dx, dw, db, rows, in, out));
    }
    // db[j] += sum over rows of dy[r, j].
    void bias_grad(const float* dy, float* db, int64_t rows, int64_t out) const {
        check(entry(b_->bias_grad, "bias_grad")(b_, dy, db, rows, out));
    }
    // Row gather / scatter-add (kernels/nn_embedding.h). *bad_index as there.
    void embedding_fwd(const float* weight, int64_t num, int64_t dim, const void* ids, int id_dtype, int64_t n,
                       float* out, int64_t* bad_index = nullptr) const {
        check(entry(b_->embedding_fwd, "embedding_fwd")(b_, weight, num, dim, ids, id_dtype, n, out, bad_index));
    }
    void embedding_bwd(const float* dy, const void* ids, int id_dtype, int64_t n, int64_t num, int64_t dim,
                       float* dweight, int64_t* bad_index = nullptr) const {
        check(entry(b_->embedding_bwd, "embedding_bwd")(b_, dy, ids, id_dtype, n, num, dim, dweight, bad_index));
    }

    // ---- nn layers' kernels (nn_ops.h) ----
    void layernorm_fwd(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* rstd,
                       size_t rows, size_t dim, float eps) const {
        check(entry(b_->layernorm_fwd, "layernorm_fwd")(b_, x, gamma, beta, y, mean, rstd, rows, dim, eps));
    }
    void layernorm_bwd(const float* dy, const float* x, const float* mean, const float* rstd, const float* gamma,
                       float* dx, float* dgamma, float* dbeta, size_t rows, size_t dim) const {
        check(entry(b_->layernorm_bwd, "layernorm_bwd")(b_, dy, x, mean, rstd, gamma, dx, dgamma, dbeta, rows,
                                                        dim));
    }
    void layernorm_bwd_from_output(const float* dy, const float* y, const float* rstd, const float* gamma,
                                   const float* beta, float* dx, float* dgamma, float* dbeta, size_t rows,
                                   size_t dim) const {
        check(entry(b_->layernorm_bwd_from_output, "layernorm_bwd_from_output")(b_, dy, y, rstd, gamma, beta, dx,
                                                                                dgamma, dbeta, rows, dim));
    }
    void gelu_fwd(const float* x, float* y, size_t n) const {
        check(entry(b_->gelu_fwd, "gelu_fwd")(b_, x, y, n));
    }
    void gelu_bwd(const float* x, const float* dy, float* dx, size_t n) const {
        check(entry(b_->gelu_bwd, "gelu_bwd")(b_, x, dy, dx, n));
    }
    void dropout_fwd(const float* x, float* y, size_t n, float p, const dsk_dropout_key& key) const {
        check(entry(b_->dropout_fwd, "dropout_fwd")(b_, x, y, n, p, &key));
    }
    void dropout_bwd(const float* dy, float* dx, size_t n, float p, const dsk_dropout_key& key) const {
        check(entry(b_->dropout_bwd, "dropout_bwd")(b_, dy, dx, n, p, &key));
    }
    void dropout_apply(float* x, size_t n, float p, const dsk_dropout_key& key) const {
        check(entry(b_->dropout_apply, "dropout_apply")(b_, x, n, p, &key));
    }
    // Returns the loss sum over counted rows; *count = their number.
    double softmax_xent_fwd(const float* logits, const void* targets, int target_dtype, size_t rows, size_t V,
                            int64_t ignore_index, float* row_loss, float* row_lse, int64_t* count) const {
        double s = 0.0;
        check(entry(b_->softmax_xent_fwd, "softmax_xent_fwd")(b_, logits, targets, target_dtype, rows, V,
                                                              ignore_index, row_loss, row_lse, &s, count));
        return s;
    }
    void softmax_xent_bwd(const float* logits, const void* targets, int target_dtype, const float* row_lse,
                          size_t rows, size_t V, int64_t ignore_index, float scale, float* dlogits) const {
        check(entry(b_->softmax_xent_bwd, "softmax_xent_bwd")(b_, logits, targets, target_dtype, row_lse, rows, V,
                                                              ignore_index, scale, dlogits));
    }
    double mse_fwd(const float* pred, const float* target, size_t n) const {
        double s = 0.0;
        check(entry(b_->mse_fwd, "mse_fwd")(b_, pred, target, n, &s));
        return s;
    }
    void mse_bwd(const float* pred, const float* target, size_t n, float scale, float* dpred) const {
        check(entry(b_->mse_bwd, "mse_bwd")(b_, pred, target, n, scale, dpred));
    }
    void add(const float* a, const float* b, float* y, size_t n) const {
        check(entry(b_->add, "add")(b_, a, b, y, n));
    }
    void add_inplace(float* y, const float* a, size_t n) const {
        check(entry(b_->add_inplace, "add_inplace")(b_, y, a, n));
    }
    // The MoE layer's row gather, scatter-add and row dots (kernels/nn_moe.h).
    void moe_rows_gather(const float* src, int64_t S, int64_t C, const int32_t* idx, const float* scale, int64_t n,
                         float* dst) const {
        check(entry(b_->moe_rows_gather, "moe_rows_gather")(b_, src, S, C, idx, scale, n, dst));
    }
    void moe_rows_scatter_add(const float* src, int64_t n, int64_t C, const int32_t* idx, const float* scale,
                              int64_t S, float* dst) const {
        check(entry(b_->moe_rows_scatter_add, "moe_rows_scatter_add")(b_, src, n, C, idx, scale, S, dst));
    }
    void moe_rows_dot(const float* a, int64_t S, int64_t C, const int32_t* idx, const float* b, int64_t n,
                      float* out) const {
        check(entry(b_->moe_rows_dot, "moe_rows_dot")(b_, a, S, C, idx, b, n, out));
    }
    // dst = (accumulate ? dst : 0) + src * the Jitter factors of stream indices first.. (kernels/nn_moe.h).
    void moe_jitter(const float* src, int64_t n, const dsk_dropout_key& key, uint64_t first, bool accumulate,
                    float* dst) const {
        check(entry(b_->moe_jitter, "moe_jitter")(b_, src, n, &key, first, accumulate ? 1 : 0, dst));
    }

private:
    static void check(int status) {
        if (__builtin_expect(status != DSK_OK, 0)) throw_kernel_error(status);
    }
    template <class Fn>
    Fn entry(Fn fn, const char* name) const {
        if (__builtin_expect(fn == nullptr, 0)) throw_missing_kernel(*b_, name);
        return fn;
    }

    const dsk_backend* b_;
};

// The kernels for host memory.
inline Kernels cpu_kernels() noexcept { return Kernels(*dsk_backend_cpu()); }
// The kernels for a device's memory: the CPU table for host memory; for
// cuda:N the CUDA table on the legacy default stream (the caller makes N the
// current device, device_memory::DeviceScope); DS_ERR_UNSUPPORTED in a build
// without CUDA.
Kernels kernels_for(Device d);
// The CUDA kernels' table on the legacy default stream (dsk_backend_cuda),
// or null in a build without CUDA (core/cuda/cuda_kernel_table.cpp and its
// _nocuda twin).
const dsk_backend* cuda_kernel_table() noexcept;

}  // namespace ds
