// Adam / AdamW (DeepSpeed CPU-Adam semantics, DEEPSPEED_SEMANTICS.md §2.1).
#include <cmath>

#include "core/error.h"
#include "optim/optimizers.h"

namespace ds::optim {

AdamOptimizer::AdamOptimizer(const config::OptimizerConfig& c, DType model_dtype) : Optimizer(c) {
    state_dtype_ = DSK_F32;
    if (!c.fp32_optimizer_states)
        state_dtype_ = model_dtype == DType::F16 ? DSK_F16
                     : model_dtype == DType::BF16 ? DSK_BF16 : DSK_F32;
}

void AdamOptimizer::update(const ParamBuffers& p, const StepContext& ctx) {
    dsk_adam_hparams h{};
    set_common(h, ctx);
    set_betas(h, ctx);
    h.eps = static_cast<float>(c_.eps);
    if (c_.bias_correction) {
        // Computed from t directly (not by repeated multiplication): exact
        // for any resume point.
        h.bias_correction1 = static_cast<float>(1.0 - std::pow(ctx.beta1, static_cast<double>(ctx.step)));
        h.bias_correction2_rsqrt =
            static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(ctx.beta2, static_cast<double>(ctx.step))));
    } else {
        h.bias_correction1 = 1.0f;
        h.bias_correction2_rsqrt = 1.0f;
    }
    h.adamw_mode = c_.adamw_mode ? 1 : 0;
    kernels_.adam_step(p.master, p.grad, p.grad_dtype, p.states[0], p.states[1], state_dtype_, p.w16, p.w_dtype,
                       p.numel, &h);
}

}  // namespace ds::optim
