// Lion (reference §2.5).
#include "optim/optimizers.h"

namespace ds::optim {

LionOptimizer::LionOptimizer(const config::OptimizerConfig& c) : Optimizer(c) {}

void LionOptimizer::update(const ParamBuffers& p, const StepContext& ctx) {
    dsk_lion_hparams h;
    h.lr = static_cast<float>(ctx.lr);
    h.beta1 = static_cast<float>(ctx.beta1);
    h.beta2 = static_cast<float>(ctx.beta2);
    h.weight_decay = static_cast<float>(c_.weight_decay);
    h.grad_scale = ctx.grad_scale;
    kernels_.lion_step(p.master, p.grad, p.grad_dtype, static_cast<float*>(p.states[0]), p.w16, p.w_dtype,
                       p.numel, &h);
}

}  // namespace ds::optim
