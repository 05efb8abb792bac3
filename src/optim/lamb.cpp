// LAMB (DeepSpeed FusedLamb semantics, DEEPSPEED_SEMANTICS.md §2.3): per-tensor trust ratio.
#include <cmath>

#include "optim/optimizers.h"

namespace ds::optim {

void LambOptimizer::update(const ParamBuffers& p, const StepContext& ctx) {
    dsk_lamb_hparams h{};
    set_common(h, ctx);
    set_betas(h, ctx);
    h.eps = static_cast<float>(c_.eps);
    const double t = static_cast<double>(ctx.step);
    h.bias_correction1 = c_.bias_correction ? static_cast<float>(1.0 - std::pow(ctx.beta1, t)) : 1.0f;
    h.bias_correction2 = c_.bias_correction ? static_cast<float>(1.0 - std::pow(ctx.beta2, t)) : 1.0f;
    h.max_coeff = static_cast<float>(c_.max_coeff);
    h.min_coeff = static_cast<float>(c_.min_coeff);
    h.eps_inside_sqrt = c_.eps_inside_sqrt ? 1 : 0;
    kernels_.lamb_step(p.master, p.grad, p.grad_dtype, static_cast<float*>(p.states[0]),
                       static_cast<float*>(p.states[1]), p.w16, p.w_dtype, p.numel, &h);
}

}  // namespace ds::optim
