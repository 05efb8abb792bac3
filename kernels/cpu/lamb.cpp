// LAMB entry point: argument checks, pass 1 (norms) on the chosen ISA, the
// trust ratio (here, in baseline code, exactly as the reference), pass 2.
#include <cmath>

#include "arg_check.h"
#include "isa_table.h"

using namespace ds::kernels;

extern "C" int dsk_cpu_lamb_step(float* p, const void* g, int g_dtype, float* m, float* v, void* w16,
                                 int w_dtype, size_t n, const dsk_lamb_hparams* h, float* trust_out) noexcept {
    ArgCheck k("dsk_lamb_step");
    if (k.hparams(h)
            .dtype("g_dtype", g_dtype)
            .w16(w16, w_dtype)
            .ptr("p", p, n)
            .ptr("g", g, n)
            .ptr("m", m, n)
            .ptr("v", v, n)
            .failed())
        return k.status();

    LambConsts c;
    set_betas(c, h->beta1, h->beta2);
    c.eps = h->eps;
    c.wd = h->weight_decay;
    c.grad_scale = h->grad_scale;
    c.eps_inside_sqrt = h->eps_inside_sqrt != 0;
    const LambArgs a{{p, g, g_dtype, w16, w_dtype, n}, m, v};
    const IsaKernels& isa = isa_kernels();

    double p_sq = 0.0, u_sq = 0.0;
    if (n > 0) isa.lamb_norms(a, c, &p_sq, &u_sq);
    // trust = |p|/|u| clamped to [min_coeff, max_coeff]; 1 when either norm is
    // 0. A NaN ratio stays NaN (the comparisons are false), so it shows.
    float trust = 1.0f;
    if (p_sq != 0.0 && u_sq != 0.0) {
        trust = static_cast<float>(std::sqrt(p_sq) / std::sqrt(u_sq));
        if (trust > h->max_coeff) trust = h->max_coeff;
        if (trust < h->min_coeff) trust = h->min_coeff;
    }
    const float step_size = h->lr * std::sqrt(h->bias_correction2) / h->bias_correction1;
    if (n > 0) isa.lamb_apply(a, c, -(step_size * trust));
    if (trust_out) *trust_out = trust;
    return DSK_OK;
}
