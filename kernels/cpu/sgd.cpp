// SGD entry point: argument checks and constants; the body runs on the
// chosen ISA (isa_table.h).
#include "arg_check.h"
#include "isa_table.h"

using namespace ds::kernels;

extern "C" int dsk_cpu_sgd_step(float* p, const void* g, int g_dtype, float* buf, void* w16, int w_dtype,
                                size_t n, const dsk_sgd_hparams* h) noexcept {
    ArgCheck k("dsk_sgd_step");
    k.hparams(h).dtype("g_dtype", g_dtype).w16(w16, w_dtype).ptr("p", p, n).ptr("g", g, n);
    if (!k.failed() && h->momentum != 0.0f) k.ptr("buf (momentum != 0)", buf, n);
    if (k.failed()) return k.status();
    if (n == 0) return DSK_OK;

    SgdConsts c;
    c.momentum = h->momentum;
    c.one_minus_dampening = 1.0f - h->dampening;
    c.wd = h->weight_decay;
    c.neg_lr = -h->lr;
    c.grad_scale = h->grad_scale;
    c.has_wd = h->weight_decay != 0.0f;
    c.has_momentum = h->momentum != 0.0f;
    c.nesterov = h->nesterov != 0;
    c.first_step = h->first_step != 0;
    isa_kernels().sgd_step(SgdArgs{{p, g, g_dtype, w16, w_dtype, n}, buf}, c);
    return DSK_OK;
}
