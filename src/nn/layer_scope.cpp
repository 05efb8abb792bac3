#include "nn/layer_scope.h"

namespace ds::nn {

LayerScope::LayerScope(std::unique_ptr<Module> inner, size_t index, LayerHooks* hooks)
    : inner_(std::move(inner)), index_(index), hooks_(hooks) {
    set_name(inner_->name());
    set_id(inner_->id());  // the profiler's view of the layer is unchanged
}

Tensor LayerScope::forward(const Tensor& x, RunContext& ctx) {
    hooks_->enter(index_, false);
    Tensor y = inner_->forward(x, ctx);
    hooks_->leave(index_, false);
    return y;
}

Tensor LayerScope::backward(const Tensor& dy, RunContext& ctx) {
    hooks_->enter(index_, true);
    Tensor dx = inner_->backward(dy, ctx);
    hooks_->leave(index_, true);
    return dx;
}

}  // namespace ds::nn
