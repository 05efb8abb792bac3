// SGD entry point: argument checks, constants, ISA dispatch. The scalar path
// instantiates sgd_body.h with ScalarOps.
#include "dispatch_check.h"
#include "isa_entry.h"
#include "sgd_body.h"

namespace ds::kernels::scalar {
void sgd_step(const SgdArgs& a, const SgdConsts& c) { sgd_run<ScalarOps>(a, c); }
}  // namespace ds::kernels::scalar

extern "C" void dsk_sgd_step(float* p, const void* g, int g_dtype, float* buf, void* w16, int w_dtype,
                             size_t n, const dsk_sgd_hparams* h) {
    const char* k = "dsk_sgd_step";
    check_hparams(k, h);
    check_dtype(k, "g_dtype", g_dtype);
    check_w16(k, w16, w_dtype);
    check_ptr(k, "p", p, n);
    check_ptr(k, "g", g, n);
    if (h->momentum != 0.0f) check_ptr(k, "buf (momentum != 0)", buf, n);
    if (n == 0) return;

    ds::kernels::SgdConsts c;
    c.momentum = h->momentum;
    c.one_minus_dampening = 1.0f - h->dampening;
    c.wd = h->weight_decay;
    c.neg_lr = -h->lr;
    c.grad_scale = h->grad_scale;
    c.has_wd = h->weight_decay != 0.0f;
    c.has_momentum = h->momentum != 0.0f;
    c.nesterov = h->nesterov != 0;
    c.first_step = h->first_step != 0;
    const ds::kernels::SgdArgs a{p, g, g_dtype, buf, w16, w_dtype, n};
    switch (dsk_cpu_isa()) {
        case DSK_ISA_AVX512:
            ds::kernels::avx512::sgd_step(a, c);
            break;
        case DSK_ISA_AVX2:
            ds::kernels::avx2::sgd_step(a, c);
            break;
        default:
            ds::kernels::scalar::sgd_step(a, c);
            break;
    }
}
