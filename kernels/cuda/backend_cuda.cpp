// dsk_backend_cuda(stream): the kernel table of the CUDA kernels, one per
// stream (created at first request, kept for the life of the process as
// backend.h requires). Each entry passes the table's stream to its
// dsk_cuda_* kernel. Every entry of backend.h has one today; an entry added
// later without a CUDA kernel stays NULL, which ds::Kernels reports as
// DS_ERR_UNSUPPORTED naming the entry.
#include <map>
#include <memory>
#include <mutex>

#include "backend.h"
#include "cuda_kernels.h"

namespace {

int convert(const dsk_backend* b, const void* src, int sd, void* dst, int dd, size_t n) {
    return dsk_cuda_convert(src, sd, dst, dd, n, b->stream);
}
int scale(const dsk_backend* b, void* x, int dtype, float s, size_t n) { return dsk_cuda_scale(x, dtype, s, n, b->stream); }
int sumsq(const dsk_backend* b, const void* x, int dtype, size_t n, double* s, int* nonfinite) {
    return dsk_cuda_sumsq(x, dtype, n, s, nonfinite, b->stream);
}
int axpy(const dsk_backend* b, void* dst, int dd, const void* src, int sd, float s, size_t n) {
    return dsk_cuda_axpy(dst, dd, src, sd, s, n, b->stream);
}
int axpy_sumsq(const dsk_backend* b, void* dst, int dd, const void* src, int sd, float s, int overwrite, size_t n,
               double* sumsq, int* nonfinite) {
    return dsk_cuda_axpy_sumsq(dst, dd, src, sd, s, overwrite, n, sumsq, nonfinite, b->stream);
}
int adam_step(const dsk_backend* b, float* p, const void* g, int gd, void* m, void* v, int sd, void* w16, int wd,
              size_t n, const dsk_adam_hparams* h) {
    const dsk_opt_tensor t{p, g, m, v, w16, n};
    return dsk_cuda_adam_multi(&t, 1, gd, sd, wd, h, b->stream);
}
int lamb_step(const dsk_backend* b, float* p, const void* g, int gd, float* m, float* v, void* w16, int wd, size_t n,
              const dsk_lamb_hparams* h, float* trust) {
    return dsk_cuda_lamb_step(p, g, gd, m, v, w16, wd, n, h, trust, b->stream);
}
int sgd_step(const dsk_backend* b, float* p, const void* g, int gd, float* buf, void* w16, int wd, size_t n,
             const dsk_sgd_hparams* h) {
    const dsk_opt_tensor t{p, g, buf, nullptr, w16, n};
    return dsk_cuda_sgd_multi(&t, 1, gd, wd, h, b->stream);
}
int lion_step(const dsk_backend* b, float* p, const void* g, int gd, float* m, void* w16, int wd, size_t n,
              const dsk_lion_hparams* h) {
    const dsk_opt_tensor t{p, g, m, nullptr, w16, n};
    return dsk_cuda_lion_multi(&t, 1, gd, wd, h, b->stream);
}
int bias_grad(const dsk_backend* b, const float* dy, float* db, int64_t rows, int64_t out) {
    return dsk_cuda_bias_grad(dy, db, rows, out, b->stream);
}
int layernorm_fwd(const dsk_backend* b, const float* x, const float* gamma, const float* beta, float* y, float* mean,
                  float* rstd, size_t rows, size_t dim, float eps) {
    return dsk_cuda_layernorm_fwd(x, gamma, beta, y, mean, rstd, rows, dim, eps, b->stream);
}
int layernorm_bwd(const dsk_backend* b, const float* dy, const float* x, const float* mean, const float* rstd,
                  const float* gamma, float* dx, float* dgamma, float* dbeta, size_t rows, size_t dim) {
    return dsk_cuda_layernorm_bwd(dy, x, mean, rstd, gamma, dx, dgamma, dbeta, rows, dim, b->stream);
}
int gelu_fwd(const dsk_backend* b, const float* x, float* y, size_t n) { return dsk_cuda_gelu_fwd(x, y, n, b->stream); }
int gelu_bwd(const dsk_backend* b, const float* x, const float* dy, float* dx, size_t n) {
    return dsk_cuda_gelu_bwd(x, dy, dx, n, b->stream);
}
int dropout_fwd(const dsk_backend* b, const float* x, float* y, size_t n, float p, const dsk_dropout_key* key) {
    return dsk_cuda_dropout_fwd(x, y, n, p, key, b->stream);
}
int dropout_bwd(const dsk_backend* b, const float* dy, float* dx, size_t n, float p, const dsk_dropout_key* key) {
    return dsk_cuda_dropout_bwd(dy, dx, n, p, key, b->stream);
}
int dropout_apply(const dsk_backend* b, float* x, size_t n, float p, const dsk_dropout_key* key) {
    return dsk_cuda_dropout_apply(x, n, p, key, b->stream);
}
int xent_fwd(const dsk_backend* b, const float* logits, const void* targets, int tdt, size_t rows, size_t V,
             int64_t ignore, float* row_loss, float* row_lse, double* loss_sum, int64_t* count) {
    return dsk_cuda_softmax_xent_fwd(logits, targets, tdt, rows, V, ignore, row_loss, row_lse, loss_sum, count,
                                     b->stream);
}
int xent_bwd(const dsk_backend* b, const float* logits, const void* targets, int tdt, const float* row_lse,
             size_t rows, size_t V, int64_t ignore, float scale, float* dlogits) {
    return dsk_cuda_softmax_xent_bwd(logits, targets, tdt, row_lse, rows, V, ignore, scale, dlogits, b->stream);
}
int add(const dsk_backend* b, const float* a, const float* bb, float* y, size_t n) {
    return dsk_cuda_add(a, bb, y, n, b->stream);
}
int add_inplace(const dsk_backend* b, float* y, const float* a, size_t n) { return dsk_cuda_add_inplace(y, a, n, b->stream); }
int attention_forward(const dsk_backend* b, const float* qkv, float* out, float* probs, const dsk_attention_args* a) {
    return dsk_cuda_attention_forward(qkv, out, probs, a, b->stream);
}
int attention_backward(const dsk_backend* b, const float* qkv, const float* probs, const float* dout, float* dqkv,
                       const dsk_attention_args* a) {
    return dsk_cuda_attention_backward(qkv, probs, dout, dqkv, a, b->stream);
}

int gemm(const dsk_backend* b, int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
         int64_t lda, const float* bm, int64_t ldb, float beta, float* c, int64_t ldc) {
    return dsk_cuda_gemm(ta, tb, m, n, k, alpha, a, lda, bm, ldb, beta, c, ldc, b->stream);
}
int gemm_batched(const dsk_backend* b, int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                 int64_t lda, const float* bm, int64_t ldb, float beta, float* c, int64_t ldc, int64_t batch,
                 int64_t sa, int64_t sb, int64_t sc) {
    return dsk_cuda_gemm_batched(ta, tb, m, n, k, alpha, a, lda, bm, ldb, beta, c, ldc, batch, sa, sb, sc, b->stream);
}
int linear_fwd(const dsk_backend* b, const float* x, const float* w, const float* bias, float* y, int64_t rows,
               int64_t in, int64_t out) {
    return dsk_cuda_linear_fwd(x, w, bias, y, rows, in, out, b->stream);
}
int gemm_bf16(const dsk_backend* b, int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
              int64_t lda, const float* bm, int64_t ldb, float beta, float* c, int64_t ldc) {
    return dsk_cuda_gemm_bf16(ta, tb, m, n, k, alpha, a, lda, bm, ldb, beta, c, ldc, b->stream);
}
int linear_fwd_bf16(const dsk_backend* b, const float* x, const float* w, const float* bias, float* y, int64_t rows,
                    int64_t in, int64_t out) {
    return dsk_cuda_linear_fwd_bf16(x, w, bias, y, rows, in, out, b->stream);
}
int linear_bwd_bf16(const dsk_backend* b, const float* dy, const float* x, const float* w, float* dx, float* dw,
                    float* db, int64_t rows, int64_t in, int64_t out) {
    return dsk_cuda_linear_bwd_bf16(dy, x, w, dx, dw, db, rows, in, out, b->stream);
}
int linear_fwd_bf16w(const dsk_backend* b, const float* x, const uint16_t* w16, const float* bias, float* y,
                     int64_t rows, int64_t in, int64_t out) {
    return dsk_cuda_linear_fwd_bf16w(x, w16, bias, y, rows, in, out, b->stream);
}
int linear_bwd_bf16w(const dsk_backend* b, const float* dy, const float* x, const uint16_t* w16, float* dx, float* dw,
                     float* db, int64_t rows, int64_t in, int64_t out) {
    return dsk_cuda_linear_bwd_bf16w(dy, x, w16, dx, dw, db, rows, in, out, b->stream);
}

// Embedding, LayerNorm backward from the output, MSE.
int embedding_fwd(const dsk_backend* b, const float* weight, int64_t num, int64_t dim, const void* ids, int idt,
                  int64_t n, float* out, int64_t* bad_index) {
    return dsk_cuda_embedding_fwd(weight, num, dim, ids, idt, n, out, bad_index, b->stream);
}
int embedding_bwd(const dsk_backend* b, const float* dy, const void* ids, int idt, int64_t n, int64_t num,
                  int64_t dim, float* dweight, int64_t* bad_index) {
    return dsk_cuda_embedding_bwd(dy, ids, idt, n, num, dim, dweight, bad_index, b->stream);
}
int layernorm_bwd_from_output(const dsk_backend* b, const float* dy, const float* y, const float* rstd,
                              const float* gamma, const float* beta, float* dx, float* dgamma, float* dbeta,
                              size_t rows, size_t dim) {
    return dsk_cuda_layernorm_bwd_from_output(dy, y, rstd, gamma, beta, dx, dgamma, dbeta, rows, dim, b->stream);
}
int mse_fwd(const dsk_backend* b, const float* pred, const float* target, size_t n, double* sum_sq) {
    return dsk_cuda_mse_fwd(pred, target, n, sum_sq, b->stream);
}
int mse_bwd(const dsk_backend* b, const float* pred, const float* target, size_t n, float scale, float* dpred) {
    return dsk_cuda_mse_bwd(pred, target, n, scale, dpred, b->stream);
}

// The MoE layer's dispatch and combine.
int moe_rows_gather(const dsk_backend* b, const float* src, int64_t S, int64_t C, const int32_t* idx,
                    const float* scale, int64_t n, float* dst) {
    return dsk_cuda_moe_rows_gather(src, S, C, idx, scale, n, dst, b->stream);
}
int moe_rows_scatter_add(const dsk_backend* b, const float* src, int64_t n, int64_t C, const int32_t* idx,
                         const float* scale, int64_t S, float* dst) {
    return dsk_cuda_moe_rows_scatter_add(src, n, C, idx, scale, S, dst, b->stream);
}
int moe_rows_dot(const dsk_backend* b, const float* a, int64_t S, int64_t C, const int32_t* idx, const float* bm,
                 int64_t n, float* out) {
    return dsk_cuda_moe_rows_dot(a, S, C, idx, bm, n, out, b->stream);
}
int moe_jitter(const dsk_backend* b, const float* src, int64_t n, const dsk_dropout_key* key, uint64_t first,
               int accumulate, float* dst) {
    return dsk_cuda_moe_jitter(src, n, key, first, accumulate, dst, b->stream);
}

dsk_backend make_table(void* stream) {
    dsk_backend t{};  // entries not set here stay NULL
    t.struct_size = sizeof(dsk_backend);
    t.version = DSK_BACKEND_VERSION;
    t.name = "cuda";
    t.stream = stream;
    t.convert = convert;
    t.scale = scale;
    t.sumsq = sumsq;
    t.axpy = axpy;
    t.axpy_sumsq = axpy_sumsq;
    t.adam_step = adam_step;
    t.lamb_step = lamb_step;
    t.sgd_step = sgd_step;
    t.lion_step = lion_step;
    t.bias_grad = bias_grad;
    t.layernorm_fwd = layernorm_fwd;
    t.layernorm_bwd = layernorm_bwd;
    t.gelu_fwd = gelu_fwd;
    t.gelu_bwd = gelu_bwd;
    t.dropout_fwd = dropout_fwd;
    t.dropout_bwd = dropout_bwd;
    t.dropout_apply = dropout_apply;
    t.softmax_xent_fwd = xent_fwd;
    t.softmax_xent_bwd = xent_bwd;
    t.add = add;
    t.add_inplace = add_inplace;
    t.gemm = gemm;
    t.gemm_batched = gemm_batched;
    t.linear_fwd = linear_fwd;
    t.gemm_bf16 = gemm_bf16;
    t.linear_fwd_bf16 = linear_fwd_bf16;
    t.linear_bwd_bf16 = linear_bwd_bf16;
    t.linear_fwd_bf16w = linear_fwd_bf16w;
    t.linear_bwd_bf16w = linear_bwd_bf16w;
    // embedding, LayerNorm backward from the output, MSE
    t.embedding_fwd = embedding_fwd;
    t.embedding_bwd = embedding_bwd;
    t.layernorm_bwd_from_output = layernorm_bwd_from_output;
    t.mse_fwd = mse_fwd;
    t.mse_bwd = mse_bwd;
    t.attention_forward = attention_forward;
    t.attention_backward = attention_backward;
    t.moe_rows_gather = moe_rows_gather;
    t.moe_rows_scatter_add = moe_rows_scatter_add;
    t.moe_rows_dot = moe_rows_dot;
    t.moe_jitter = moe_jitter;
    return t;
}

}  // namespace

extern "C" const dsk_backend* dsk_backend_cuda(void* stream) noexcept {
    static std::mutex mu;
    static auto* tables = new std::map<void*, std::unique_ptr<dsk_backend>>();  // never freed: tables outlive callers
    try {
        std::lock_guard<std::mutex> lock(mu);
        auto& slot = (*tables)[stream];
        if (!slot) slot = std::make_unique<dsk_backend>(make_table(stream));
        return slot.get();
    } catch (...) {  // allocation failure: no table, no throw across the C boundary
        return nullptr;
    }
}
