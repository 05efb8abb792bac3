// Lion entry point: argument checks, constants, ISA dispatch. The scalar path
// instantiates lion_body.h with ScalarOps.
#include "dispatch_check.h"
#include "isa_entry.h"
#include "lion_body.h"

namespace ds::kernels::scalar {
void lion_step(const LionArgs& a, const LionConsts& c) { lion_run<ScalarOps>(a, c); }
}  // namespace ds::kernels::scalar

extern "C" void dsk_lion_step(float* p, const void* g, int g_dtype, float* m, void* w16, int w_dtype,
                              size_t n, const dsk_lion_hparams* h) {
    const char* k = "dsk_lion_step";
    check_hparams(k, h);
    check_dtype(k, "g_dtype", g_dtype);
    check_w16(k, w16, w_dtype);
    check_ptr(k, "p", p, n);
    check_ptr(k, "g", g, n);
    check_ptr(k, "m", m, n);
    if (n == 0) return;

    ds::kernels::LionConsts c;
    c.beta1 = h->beta1;
    c.one_minus_beta1 = 1.0f - h->beta1;
    c.beta2 = h->beta2;
    c.one_minus_beta2 = 1.0f - h->beta2;
    c.decay = 1.0f - h->lr * h->weight_decay;
    c.neg_lr = -h->lr;
    c.grad_scale = h->grad_scale;
    c.has_wd = h->weight_decay > 0.0f;
    const ds::kernels::LionArgs a{p, g, g_dtype, m, w16, w_dtype, n};
    switch (dsk_cpu_isa()) {
        case DSK_ISA_AVX512:
            ds::kernels::avx512::lion_step(a, c);
            break;
        case DSK_ISA_AVX2:
            ds::kernels::avx2::lion_step(a, c);
            break;
        default:
            ds::kernels::scalar::lion_step(a, c);
            break;
    }
}
