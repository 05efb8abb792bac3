// LAMB's per-tensor scalars, shared by dsk_cpu_lamb_step and its reference
// twin so both apply the very same trust ratio (plain scalar math on the two
// norms; the element loops stay independent). DSK_HD: the CUDA LAMB forms
// the ratio on the device with these same functions.
#pragma once

#include <cmath>

#include "../elem/hd.h"
#include "kernels.h"

namespace {

// trust = |p|/|u| clamped to [min_coeff, max_coeff]; 1 when either norm is
// 0. A NaN ratio stays NaN (the comparisons are false), so it shows.
DSK_HD inline float dsk_lamb_trust(double p_sq, double u_sq, const dsk_lamb_hparams* h) {
    float trust = 1.0f;
    if (p_sq != 0.0 && u_sq != 0.0) {
        trust = static_cast<float>(::sqrt(p_sq) / ::sqrt(u_sq));
        if (trust > h->max_coeff) trust = h->max_coeff;
        if (trust < h->min_coeff) trust = h->min_coeff;
    }
    return trust;
}

// The pass-2 coefficient: p += coef * u, coef = -(lr * sqrt(bc2) / bc1 * trust).
DSK_HD inline float dsk_lamb_coef(float trust, const dsk_lamb_hparams* h) {
    const float step_size = h->lr * ::sqrtf(h->bias_correction2) / h->bias_correction1;
    return -(step_size * trust);
}

}  // namespace
