#include "nn/dropout.h"

#include "core/error.h"

namespace ds::nn {

Dropout::Dropout(float p) : p_(p) {
    DS_CHECK(p >= 0.0f && p <= 1.0f, DS_ERR_INVALID_ARGUMENT, "Dropout: p = %g is not in [0, 1]",
             static_cast<double>(p));
}

dsk_dropout_key Dropout::key(const RunContext& ctx, uint32_t module_id) {
    dsk_dropout_key k{};
    k.seed = ctx.seed;
    k.stream = ctx.forward_index;
    k.module_id = module_id;
    k.offset = 0;
    return k;
}

void Dropout::apply_inplace(Tensor& x, float p, const dsk_dropout_key& key, RunContext& ctx) {
    check_activation(x, ctx, "Dropout", "input");
    ctx.kernels.dropout_apply(x.data<float>(), static_cast<size_t>(x.numel()), p, key);
}

Tensor Dropout::forward(const Tensor& x, RunContext& ctx) {
    check_activation(x, ctx, "Dropout", "input");
    has_key_ = false;
    shape_ = x.shape();
    identity_ = !ctx.training || p_ == 0.0f;
    if (identity_) return x;
    key_ = key(ctx, id());
    Tensor y = new_activation(x.shape(), ctx);
    ctx.kernels.dropout_fwd(x.data<float>(), y.data<float>(), static_cast<size_t>(x.numel()), p_, key_);
    has_key_ = true;
    return y;
}

Tensor Dropout::backward(const Tensor& dy, RunContext& ctx) {
    check_same_shape(dy, shape_, ctx, "Dropout", "backward dy");
    if (identity_) return dy;
    DS_CHECK(has_key_, DS_ERR_INVALID_ARGUMENT,
             "Dropout '%s' backward: no training-mode forward to differentiate (backward already ran)",
             name().c_str());
    Tensor dx = new_activation(shape_, ctx);
    ctx.kernels.dropout_bwd(dy.data<float>(), dx.data<float>(), static_cast<size_t>(dy.numel()), p_, key_);
    has_key_ = false;
    return dx;
}

}  // namespace ds::nn
