// Scalar reference for Lion (DEEPSPEED_SEMANTICS.md §2.5). sign(0) = 0; a NaN interpolant
// propagates into p (sign(NaN) = NaN) rather than being silently skipped.
#include <cmath>

#include "kernels.h"
#include "ref_dtype.h"

extern "C" void dsk_ref_lion_step(float* p, const void* g, int g_dtype, float* m, void* w16, int w_dtype,
                                  size_t n, const dsk_lion_hparams* h) {
    const float b1 = h->beta1, b2 = h->beta2;
    const float one_minus_b1 = 1.0f - b1, one_minus_b2 = 1.0f - b2;
    const float decay = 1.0f - h->lr * h->weight_decay;
    const float neg_lr = -h->lr;
    for (size_t i = 0; i < n; ++i) {
        const float gi = dsk_ref_load(g, g_dtype, i) * h->grad_scale;
        float pi = p[i];
        const float mi = m[i];
        const float c = std::fmaf(gi, one_minus_b1, mi * b1);
        if (h->weight_decay > 0.0f) pi = pi * decay;
        const float s = c > 0.0f ? 1.0f : c < 0.0f ? -1.0f : (c == c ? 0.0f : c);
        pi = std::fmaf(neg_lr, s, pi);
        p[i] = pi;
        m[i] = std::fmaf(gi, one_minus_b2, mi * b2);
        if (w16) dsk_ref_store(w16, w_dtype, i, pi);
    }
}
