// LAMB entry point: argument checks, pass 1 (norms) on the chosen ISA, the
// trust ratio (here, in baseline code, exactly as the reference), pass 2.
// The scalar path instantiates lamb_body.h with ScalarOps.
#include <cmath>

#include "dispatch_check.h"
#include "isa_entry.h"
#include "lamb_body.h"

namespace ds::kernels::scalar {
void lamb_norms(const LambArgs& a, const LambConsts& c, double* p_sq, double* u_sq) {
    lamb_norms_run<ScalarOps>(a, c, p_sq, u_sq);
}
void lamb_apply(const LambArgs& a, const LambConsts& c, float coef) { lamb_apply_run<ScalarOps>(a, c, coef); }
}  // namespace ds::kernels::scalar

extern "C" float dsk_lamb_step(float* p, const void* g, int g_dtype, float* m, float* v, void* w16,
                               int w_dtype, size_t n, const dsk_lamb_hparams* h) {
    const char* k = "dsk_lamb_step";
    check_hparams(k, h);
    check_dtype(k, "g_dtype", g_dtype);
    check_w16(k, w16, w_dtype);
    check_ptr(k, "p", p, n);
    check_ptr(k, "g", g, n);
    check_ptr(k, "m", m, n);
    check_ptr(k, "v", v, n);

    ds::kernels::LambConsts c;
    c.beta1 = h->beta1;
    c.one_minus_beta1 = 1.0f - h->beta1;
    c.beta2 = h->beta2;
    c.one_minus_beta2 = 1.0f - h->beta2;
    c.eps = h->eps;
    c.wd = h->weight_decay;
    c.grad_scale = h->grad_scale;
    c.eps_inside_sqrt = h->eps_inside_sqrt != 0;
    const ds::kernels::LambArgs a{p, g, g_dtype, m, v, w16, w_dtype, n};
    const int isa = dsk_cpu_isa();

    double p_sq = 0.0, u_sq = 0.0;
    if (n > 0) {
        switch (isa) {
            case DSK_ISA_AVX512:
                ds::kernels::avx512::lamb_norms(a, c, &p_sq, &u_sq);
                break;
            case DSK_ISA_AVX2:
                ds::kernels::avx2::lamb_norms(a, c, &p_sq, &u_sq);
                break;
            default:
                ds::kernels::scalar::lamb_norms(a, c, &p_sq, &u_sq);
                break;
        }
    }
    // trust = |p|/|u| clamped to [min_coeff, max_coeff]; 1 when either norm is
    // 0. A NaN ratio stays NaN (the comparisons are false), so it shows.
    float trust = 1.0f;
    if (p_sq != 0.0 && u_sq != 0.0) {
        trust = static_cast<float>(std::sqrt(p_sq) / std::sqrt(u_sq));
        if (trust > h->max_coeff) trust = h->max_coeff;
        if (trust < h->min_coeff) trust = h->min_coeff;
    }
    const float step_size = h->lr * std::sqrt(h->bias_correction2) / h->bias_correction1;
    const float coef = -(step_size * trust);
    if (n > 0) {
        switch (isa) {
            case DSK_ISA_AVX512:
                ds::kernels::avx512::lamb_apply(a, c, coef);
                break;
            case DSK_ISA_AVX2:
                ds::kernels::avx2::lamb_apply(a, c, coef);
                break;
            default:
                ds::kernels::scalar::lamb_apply(a, c, coef);
                break;
        }
    }
    return trust;
}
