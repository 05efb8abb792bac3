// The library's way to call the compute kernels: ds::Kernels wraps a
// device's dsk_backend table (kernels/backend.h) and turns a failed status
// into ds::Error with the kernel's status and message. Call sites name no
// device-specific function: kernels_for(device) picks the table.
#pragma once

#include <cstddef>

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
    // Fused-qkv self-attention (nn_attention.h); probs nullable (forward: not
    // saved; backward: recomputed).
    void attention_forward(const float* qkv, float* out, float* probs, const dsk_attention_args& a) const {
        check(entry(b_->attention_forward, "attention_forward")(b_, qkv, out, probs, &a));
    }
    void attention_backward(const float* qkv, const float* probs, const float* dout, float* dqkv,
                            const dsk_attention_args& a) const {
        check(entry(b_->attention_backward, "attention_backward")(b_, qkv, probs, dout, dqkv, &a));
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
