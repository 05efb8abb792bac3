// Arguments of the optimizer kernel bodies (*_body.h): the buffers of one
// call and the per-step constants. The entry points (adam.cpp, ...; baseline
// code) validate the arguments and compute the constants once, so every ISA
// sees bit-identical values.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels.h"

namespace ds::kernels {

// Buffers every optimizer step has: fp32 master p, gradient g, optional w16.
struct StepArgs {
    float* p;
    const void* g;
    int g_dtype;
    void* w16;  // nullable
    int w_dtype;
    size_t n;
};

// beta1, beta2 and their complements, as Adam, LAMB and Lion use them.
// (Filled by set_betas, step_consts.h.)
struct BetaConsts {
    float beta1, one_minus_beta1, beta2, one_minus_beta2;
};

// Adam: constants as DeepSpeed's CPU-Adam forms them (DEEPSPEED_SEMANTICS.md §2.1).
struct AdamConsts : BetaConsts {
    float eps, bc2_rsqrt;
    float step_size;  // -lr / bias_correction1
    float wd;         // weight decay (L2 mode)
    float wd_factor;  // -lr * wd (decoupled mode)
    float grad_scale;
    bool l2, decoupled;
};
struct AdamArgs : StepArgs {
    void* m;
    void* v;
    int state_dtype;
};

struct LambConsts : BetaConsts {
    float eps, wd, grad_scale;
    bool eps_inside_sqrt;
};
struct LambArgs : StepArgs {
    float* m;
    float* v;
};

struct SgdConsts {
    float momentum, one_minus_dampening, wd, neg_lr, grad_scale;
    bool has_wd, has_momentum, nesterov, first_step;
};
struct SgdArgs : StepArgs {
    float* buf;
};

struct LionConsts : BetaConsts {
    float decay, neg_lr, grad_scale;
    bool has_wd;
};
struct LionArgs : StepArgs {
    float* m;
};

}  // namespace ds::kernels
