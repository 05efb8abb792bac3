#include "nn/gelu.h"

#include "core/error.h"

namespace ds::nn {

Tensor Gelu::apply(const Tensor& x, RunContext& ctx) {
    check_activation(x, ctx, "GELU", "input");
    Tensor y = new_activation(x.shape(), ctx);
    ctx.kernels.gelu_fwd(x.data<float>(), y.data<float>(), static_cast<size_t>(x.numel()));
    return y;
}

Tensor Gelu::backward_from_input(const Tensor& x, const Tensor& dy, RunContext& ctx) {
    check_activation(x, ctx, "GELU", "backward input");
    check_same_shape(dy, x.shape(), ctx, "GELU", "backward dy");
    Tensor dx = new_activation(x.shape(), ctx);
    ctx.kernels.gelu_bwd(x.data<float>(), dy.data<float>(), dx.data<float>(), static_cast<size_t>(x.numel()));
    return dx;
}

Tensor Gelu::forward(const Tensor& x, RunContext& ctx) {
    Tensor y = apply(x, ctx);
    last_numel_ = x.numel();
    if (ctx.training && keep_input_) saved_.keep(x, ctx);
    else saved_.reset();
    return y;
}

Tensor Gelu::backward(const Tensor& dy, RunContext& ctx) {
    DS_CHECK(keep_input_, DS_ERR_INVALID_ARGUMENT,
             "GELU '%s' backward: built with keep_input = false (gelu_checkpoint): call "
             "Gelu::backward_from_input(x, dy) with the recomputed input",
             name().c_str());
    DS_CHECK(saved_.defined(), DS_ERR_INVALID_ARGUMENT,
             "GELU '%s' backward: no training-mode forward to differentiate (eval forward, or backward already "
             "ran)",
             name().c_str());
    Tensor dx = backward_from_input(saved_.get(), dy, ctx);
    saved_.reset();
    return dx;
}

OpCount Gelu::op_count() const {
    OpCount c;
    c.flops = static_cast<double>(last_numel_);
    return c;
}

}  // namespace ds::nn
