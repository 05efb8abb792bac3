// SGD with momentum, dampening, Nesterov and weight decay (torch.optim.SGD).
#include "optim/optimizers.h"

namespace ds::optim {

std::vector<std::string> SgdOptimizer::state_names() const {
    if (c_.momentum == 0.0) return {};
    return {"momentum_buffer"};
}

void SgdOptimizer::update(const ParamBuffers& p, const StepContext& ctx) {
    dsk_sgd_hparams h{};
    set_common(h, ctx);
    h.momentum = static_cast<float>(c_.momentum);
    h.dampening = static_cast<float>(c_.dampening);
    h.nesterov = c_.nesterov ? 1 : 0;
    // torch creates the momentum buffer from the first gradient it sees.
    h.first_step = ctx.step == 1 ? 1 : 0;
    float* buf = c_.momentum == 0.0 ? nullptr : static_cast<float*>(p.states[0]);
    kernels_.sgd_step(p.master, p.grad, p.grad_dtype, buf, p.w16, p.w_dtype, p.numel, &h);
}

}  // namespace ds::optim
