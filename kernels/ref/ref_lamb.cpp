// Scalar reference for LAMB with DeepSpeed FusedLamb semantics (DEEPSPEED_SEMANTICS.md
// §2.3), one tensor. Norms accumulate sequentially in double.
#include <cmath>

#include "kernels.h"
#include "lamb_trust.h"
#include "ref_dtype.h"

namespace {

// u = m/denom + wd*p, the LAMB update direction before the trust ratio.
inline float lamb_update(float m, float v, float p, float eps, float wd, bool eps_inside) {
    const float denom = eps_inside ? std::sqrt(v + eps) : std::sqrt(v) + eps;
    return std::fmaf(wd, p, m / denom);
}

}  // namespace

extern "C" float dsk_ref_lamb_step(float* p, const void* g, int g_dtype, float* m, float* v, void* w16,
                                   int w_dtype, size_t n, const dsk_lamb_hparams* h) {
    const float b1 = h->beta1, b2 = h->beta2;
    const float one_minus_b1 = 1.0f - b1, one_minus_b2 = 1.0f - b2;
    const bool inside = h->eps_inside_sqrt != 0;
    double p_sq = 0.0, u_sq = 0.0;
    for (size_t i = 0; i < n; ++i) {
        const float gi = dsk_ref_load(g, g_dtype, i) * h->grad_scale;
        const float mi = std::fmaf(gi, one_minus_b1, m[i] * b1);
        const float vi = std::fmaf(gi * gi, one_minus_b2, v[i] * b2);
        m[i] = mi;
        v[i] = vi;
        const double u = lamb_update(mi, vi, p[i], h->eps, h->weight_decay, inside);
        const double pd = p[i];
        p_sq += pd * pd;
        u_sq += u * u;
    }
    const float trust = dsk_lamb_trust(p_sq, u_sq, h);
    const float coef = dsk_lamb_coef(trust, h);
    for (size_t i = 0; i < n; ++i) {
        const float u = lamb_update(m[i], v[i], p[i], h->eps, h->weight_decay, inside);
        p[i] = std::fmaf(coef, u, p[i]);
        if (w16) dsk_ref_store(w16, w_dtype, i, p[i]);
    }
    return trust;
}
