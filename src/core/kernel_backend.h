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
// DS_ERR_INVALID_ARGUMENT, DSK_ERR_UNSUPPORTED -> DS_ERR_UNSUPPORTED, with
// dsk_last_error()'s message; any other status -> DS_ERR_INTERNAL.
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
// The kernels for a device's memory: the CPU table, or DS_ERR_UNSUPPORTED
// for a device this build has no kernels for (CUDA today).
Kernels kernels_for(Device d);

}  // namespace ds
