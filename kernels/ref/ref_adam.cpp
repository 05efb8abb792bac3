// Scalar reference for Adam/AdamW with DeepSpeed CPU-Adam semantics
// (DEEPSPEED_SEMANTICS.md §2.1). fp32 arithmetic in exactly the order, and with FMA in
// exactly the places, the SIMD kernels use, so the two agree bit for bit.
#include <cmath>

#include "kernels.h"
#include "ref_dtype.h"

extern "C" void dsk_ref_adam_step(float* p, const void* g, int g_dtype, void* m, void* v, int state_dtype,
                                  void* w16, int w_dtype, size_t n, const dsk_adam_hparams* h) {
    const float b1 = h->beta1, b2 = h->beta2;
    const float one_minus_b1 = 1.0f - b1, one_minus_b2 = 1.0f - b2;
    const float step_size = -h->lr / h->bias_correction1;
    const float wd = h->weight_decay;
    const float wd_factor = -h->lr * wd;
    const bool l2 = wd > 0.0f && !h->adamw_mode;
    const bool decoupled = wd > 0.0f && h->adamw_mode;
    for (size_t i = 0; i < n; ++i) {
        float gi = dsk_ref_load(g, g_dtype, i) * h->grad_scale;
        float pi = p[i];
        float mi = dsk_ref_load(m, state_dtype, i);
        float vi = dsk_ref_load(v, state_dtype, i);
        if (l2) gi = std::fmaf(wd, pi, gi);
        mi = std::fmaf(gi, one_minus_b1, mi * b1);
        vi = std::fmaf(gi * gi, one_minus_b2, vi * b2);
        const float denom = std::fmaf(std::sqrt(vi), h->bias_correction2_rsqrt, h->eps);
        const float u = mi / denom;
        if (decoupled) pi = std::fmaf(wd_factor, pi, pi);
        pi = std::fmaf(step_size, u, pi);
        p[i] = pi;
        dsk_ref_store(m, state_dtype, i, mi);
        dsk_ref_store(v, state_dtype, i, vi);
        if (w16) dsk_ref_store(w16, w_dtype, i, pi);
    }
}
