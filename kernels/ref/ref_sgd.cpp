// Scalar reference for SGD with torch.optim.SGD semantics (momentum,
// dampening, nesterov; weight decay applied when it is non-zero).
#include <cmath>

#include "kernels.h"
#include "ref_dtype.h"

extern "C" void dsk_ref_sgd_step(float* p, const void* g, int g_dtype, float* buf, void* w16, int w_dtype,
                                 size_t n, const dsk_sgd_hparams* h) {
    const float mu = h->momentum;
    const float one_minus_damp = 1.0f - h->dampening;
    const float neg_lr = -h->lr;
    for (size_t i = 0; i < n; ++i) {
        float gi = dsk_ref_load(g, g_dtype, i) * h->grad_scale;
        float pi = p[i];
        if (h->weight_decay != 0.0f) gi = std::fmaf(h->weight_decay, pi, gi);
        if (mu != 0.0f) {
            const float b = h->first_step ? gi : std::fmaf(gi, one_minus_damp, buf[i] * mu);
            buf[i] = b;
            gi = h->nesterov ? std::fmaf(mu, b, gi) : b;
        }
        pi = std::fmaf(neg_lr, gi, pi);
        p[i] = pi;
        if (w16) dsk_ref_store(w16, w_dtype, i, pi);
    }
}
