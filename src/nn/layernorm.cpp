#include "nn/layernorm.h"

#include "core/error.h"

namespace ds::nn {

namespace {
constexpr const char* kLayer = "LayerNorm";
}

LayerNorm::LayerNorm(int64_t dim, float eps, bool affine) : dim_(dim), eps_(eps), affine_(affine) {
    DS_CHECK(dim > 0, DS_ERR_INVALID_ARGUMENT, "LayerNorm: dim = %lld must be > 0", static_cast<long long>(dim));
    DS_CHECK(eps >= 0.0f, DS_ERR_INVALID_ARGUMENT, "LayerNorm: eps = %g must be >= 0", static_cast<double>(eps));
    if (affine) {
        weight_.name = "weight";
        weight_.shape = {dim};
        weight_.value = new_param_tensor(weight_.shape, MemCategory::Params, 1.0f);
        bias_.name = "bias";
        bias_.shape = {dim};
        bias_.value = new_param_tensor(bias_.shape, MemCategory::Params, 0.0f);
    }
}

std::vector<Param*> LayerNorm::own_params() {
    if (!affine_) return {};
    return {&weight_, &bias_};
}

Tensor LayerNorm::forward(const Tensor& x, RunContext& ctx) {
    check_activation(x, ctx, kLayer, "input");
    DS_CHECK(x.shape().back() == dim_, DS_ERR_INVALID_ARGUMENT,
             "LayerNorm '%s' input: shape %s, last dimension must be %lld", name().c_str(),
             shape_to_string(x.shape()).c_str(), static_cast<long long>(dim_));
    if (affine_) {
        check_same_shape(weight_.value, {dim_}, ctx, kLayer, "weight");
        check_same_shape(bias_.value, {dim_}, ctx, kLayer, "bias");
    }
    const size_t rows = static_cast<size_t>(x.numel() / dim_);
    Tensor y = new_activation(x.shape(), ctx);
    const float* g = affine_ ? weight_.value.data<float>() : nullptr;
    const float* b = affine_ ? bias_.value.data<float>() : nullptr;
    last_numel_ = x.numel();
    if (!ctx.training) {
        clear_saved();
        ctx.kernels.layernorm_fwd(x.data<float>(), g, b, y.data<float>(), nullptr, nullptr, rows,
                                  static_cast<size_t>(dim_), eps_);
        return y;
    }
    Tensor mean = new_activation({static_cast<int64_t>(rows)}, ctx);
    Tensor rstd = new_activation({static_cast<int64_t>(rows)}, ctx);
    ctx.kernels.layernorm_fwd(x.data<float>(), g, b, y.data<float>(), mean.data<float>(), rstd.data<float>(), rows,
                              static_cast<size_t>(dim_), eps_);
    if (from_output_) saved_.keep(y, ctx, /*counted=*/false);
    else saved_.keep(x, ctx);
    mean_.keep(mean, ctx);
    rstd_.keep(rstd, ctx);
    shape_ = x.shape();
    return y;
}

Tensor LayerNorm::backward(const Tensor& dy, RunContext& ctx) {
    DS_CHECK(saved_.defined(), DS_ERR_INVALID_ARGUMENT,
             "LayerNorm '%s' backward: no training-mode forward to differentiate (eval forward, or backward "
             "already ran)",
             name().c_str());
    check_same_shape(dy, shape_, ctx, kLayer, "backward dy");
    const size_t rows = static_cast<size_t>(dy.numel() / dim_), dim = static_cast<size_t>(dim_);
    float *dg = nullptr, *db = nullptr;
    const float *g = nullptr, *b = nullptr;
    if (affine_) {
        for (Param* p : {&weight_, &bias_})
            DS_CHECK(p->grad.defined(), DS_ERR_INVALID_STATE,
                     "LayerNorm '%s' backward: %s has no gradient buffer bound", name().c_str(), p->name.c_str());
        check_same_shape(weight_.grad, {dim_}, ctx, kLayer, "weight.grad");
        check_same_shape(bias_.grad, {dim_}, ctx, kLayer, "bias.grad");
        g = weight_.value.data<float>();
        b = bias_.value.data<float>();
        dg = weight_.grad.data<float>();
        db = bias_.grad.data<float>();
    }
    Tensor dx = new_activation(shape_, ctx);
    if (from_output_) {
        ctx.kernels.layernorm_bwd_from_output(dy.data<float>(), saved_.get().data<float>(), rstd_.get().data<float>(),
                                              g, b, dx.data<float>(), dg, db, rows, dim);
    } else {
        ctx.kernels.layernorm_bwd(dy.data<float>(), saved_.get().data<float>(), mean_.get().data<float>(),
                                  rstd_.get().data<float>(), g, dx.data<float>(), dg, db, rows, dim);
    }
    clear_saved();
    return dx;
}

void LayerNorm::clear_saved() {
    saved_.reset();
    mean_.reset();
    rstd_.reset();
}

OpCount LayerNorm::op_count() const {
    OpCount c;
    c.flops = static_cast<double>(last_numel_) * (affine_ ? 5.0 : 4.0);
    return c;
}

}  // namespace ds::nn
