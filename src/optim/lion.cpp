// Lion (DEEPSPEED_SEMANTICS.md §2.5).
#include "optim/optimizers.h"

namespace ds::optim {

void LionOptimizer::update(const ParamBuffers& p, const StepContext& ctx) {
    dsk_lion_hparams h{};
    set_common(h, ctx);
    set_betas(h, ctx);
    kernels_.lion_step(p.master, p.grad, p.grad_dtype, static_cast<float*>(p.states[0]), p.w16, p.w_dtype,
                       p.numel, &h);
}

}  // namespace ds::optim
