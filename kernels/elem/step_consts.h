// The per-step constants of the fused optimizers, formed from the public
// hyper-parameters once per call on the host. The CPU and the CUDA entry
// points both build them here, so every backend (and every ISA) computes
// with bit-identical constants.
#pragma once

#include "kernel_args.h"
#include "kernels.h"

namespace ds::kernels {

inline void set_betas(BetaConsts& c, float beta1, float beta2) {
    c.beta1 = beta1;
    c.one_minus_beta1 = 1.0f - beta1;
    c.beta2 = beta2;
    c.one_minus_beta2 = 1.0f - beta2;
}

// DeepSpeed CPU-Adam's forms (DEEPSPEED_SEMANTICS.md §2.1).
inline AdamConsts adam_consts(const dsk_adam_hparams& h) {
    AdamConsts c;
    set_betas(c, h.beta1, h.beta2);
    c.eps = h.eps;
    c.bc2_rsqrt = h.bias_correction2_rsqrt;
    c.step_size = -h.lr / h.bias_correction1;
    c.wd = h.weight_decay;
    c.wd_factor = -h.lr * h.weight_decay;
    c.grad_scale = h.grad_scale;
    c.l2 = h.weight_decay > 0.0f && !h.adamw_mode;
    c.decoupled = h.weight_decay > 0.0f && h.adamw_mode;
    return c;
}

inline LambConsts lamb_consts(const dsk_lamb_hparams& h) {
    LambConsts c;
    set_betas(c, h.beta1, h.beta2);
    c.eps = h.eps;
    c.wd = h.weight_decay;
    c.grad_scale = h.grad_scale;
    c.eps_inside_sqrt = h.eps_inside_sqrt != 0;
    return c;
}

inline SgdConsts sgd_consts(const dsk_sgd_hparams& h) {
    SgdConsts c;
    c.momentum = h.momentum;
    c.one_minus_dampening = 1.0f - h.dampening;
    c.wd = h.weight_decay;
    c.neg_lr = -h.lr;
    c.grad_scale = h.grad_scale;
    c.has_wd = h.weight_decay != 0.0f;
    c.has_momentum = h.momentum != 0.0f;
    c.nesterov = h.nesterov != 0;
    c.first_step = h.first_step != 0;
    return c;
}

inline LionConsts lion_consts(const dsk_lion_hparams& h) {
    LionConsts c;
    set_betas(c, h.beta1, h.beta2);
    c.decay = 1.0f - h.lr * h.weight_decay;
    c.neg_lr = -h.lr;
    c.grad_scale = h.grad_scale;
    c.has_wd = h.weight_decay > 0.0f;
    return c;
}

}  // namespace ds::kernels
