// Adam/AdamW entry point: argument checks, the per-step constants (computed
// here, in baseline code, exactly as the reference forms them), ISA dispatch.
// The scalar path instantiates adam_body.h with ScalarOps.
#include "adam_body.h"
#include "dispatch_check.h"
#include "isa_entry.h"

namespace ds::kernels::scalar {
void adam_step(const AdamArgs& a, const AdamConsts& c) { adam_run<ScalarOps>(a, c); }
}  // namespace ds::kernels::scalar

extern "C" void dsk_adam_step(float* p, const void* g, int g_dtype, void* m, void* v, int state_dtype,
                              void* w16, int w_dtype, size_t n, const dsk_adam_hparams* h) {
    const char* k = "dsk_adam_step";
    check_hparams(k, h);
    check_dtype(k, "g_dtype", g_dtype);
    check_dtype(k, "state_dtype", state_dtype);
    check_w16(k, w16, w_dtype);
    check_ptr(k, "p", p, n);
    check_ptr(k, "g", g, n);
    check_ptr(k, "m", m, n);
    check_ptr(k, "v", v, n);
    if (n == 0) return;

    ds::kernels::AdamConsts c;
    c.beta1 = h->beta1;
    c.one_minus_beta1 = 1.0f - h->beta1;
    c.beta2 = h->beta2;
    c.one_minus_beta2 = 1.0f - h->beta2;
    c.eps = h->eps;
    c.bc2_rsqrt = h->bias_correction2_rsqrt;
    c.step_size = -h->lr / h->bias_correction1;
    c.wd = h->weight_decay;
    c.wd_factor = -h->lr * h->weight_decay;
    c.grad_scale = h->grad_scale;
    c.l2 = h->weight_decay > 0.0f && !h->adamw_mode;
    c.decoupled = h->weight_decay > 0.0f && h->adamw_mode;
    const ds::kernels::AdamArgs a{p, g, g_dtype, m, v, state_dtype, w16, w_dtype, n};
    switch (dsk_cpu_isa()) {
        case DSK_ISA_AVX512:
            ds::kernels::avx512::adam_step(a, c);
            break;
        case DSK_ISA_AVX2:
            ds::kernels::avx2::adam_step(a, c);
            break;
        default:
            ds::kernels::scalar::adam_step(a, c);
            break;
    }
}
