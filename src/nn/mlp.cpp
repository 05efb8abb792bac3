#include "nn/mlp.h"

#include "core/error.h"
#include "nn/block_util.h"
#include "nn/layer_util.h"

namespace ds::nn {

Mlp::Mlp(int64_t hidden, int64_t inner, float pdrop, bool bias, bool gelu_checkpoint)
    : gelu_checkpoint_(gelu_checkpoint) {
    DS_CHECK(hidden >= 1 && inner >= 1, DS_ERR_INVALID_ARGUMENT, "MLP: hidden = %lld and inner = %lld must be >= 1",
             static_cast<long long>(hidden), static_cast<long long>(inner));
    DS_CHECK(pdrop >= 0.0f && pdrop < 1.0f, DS_ERR_INVALID_ARGUMENT, "MLP: dropout = %g is outside [0, 1)",
             static_cast<double>(pdrop));
    c_fc_ = std::make_unique<Linear>(hidden, inner, bias);
    gelu_ = std::make_unique<Gelu>(/*keep_input=*/!gelu_checkpoint);
    c_proj_ = std::make_unique<Linear>(inner, hidden, bias);
    drop_ = std::make_unique<Dropout>(pdrop);
    set_names("");
}

std::vector<Module*> Mlp::children() {
    return {c_fc_.get(), gelu_.get(), c_proj_.get(), drop_.get()};
}

void Mlp::set_names(const std::string& prefix) {
    set_name(prefix.empty() ? std::string() : prefix.substr(0, prefix.size() - 1));
    name_linear(*c_fc_, prefix + "c_fc");
    gelu_->set_name(prefix + "gelu");
    name_linear(*c_proj_, prefix + "c_proj");
    drop_->set_name(prefix + "dropout");
}

void Mlp::shard(std::unique_ptr<Linear> c_fc, std::unique_ptr<Linear> c_proj) {
    DS_CHECK(c_fc != nullptr && c_proj != nullptr, DS_ERR_INTERNAL, "MLP%s: shard without layers",
             module_label(*this).c_str());
    const int64_t hidden = c_fc_->in_features();
    DS_CHECK(c_fc->in_features() == hidden && c_proj->out_features() == hidden &&
                 c_fc->out_features() == c_proj->in_features(),
             DS_ERR_INVALID_ARGUMENT, "MLP%s: c_fc [%lld, %lld] and c_proj [%lld, %lld] do not chain on hidden = %lld",
             module_label(*this).c_str(), static_cast<long long>(c_fc->out_features()),
             static_cast<long long>(c_fc->in_features()), static_cast<long long>(c_proj->out_features()),
             static_cast<long long>(c_proj->in_features()), static_cast<long long>(hidden));
    clear_saved();
    c_fc_ = std::move(c_fc);
    c_proj_ = std::move(c_proj);
    sharded_ = true;
}

Tensor Mlp::forward(const Tensor& x, RunContext& ctx) {
    x_ = Tensor();
    Tensor h = call_forward(*c_fc_, x, ctx);
    Tensor g = call_forward(*gelu_, h, ctx);
    // Borrowed memory may change before backward: keep a copy of it (as Linear does).
    if (ctx.training && gelu_checkpoint_) {
        if (x.owns_storage()) {
            x_ = x;
        } else {
            x_ = new_activation(x.shape(), ctx);
            x_.copy_from(x);
        }
    }
    return call_forward(*drop_, call_forward(*c_proj_, g, ctx), ctx);
}

Tensor Mlp::backward(const Tensor& dy, RunContext& ctx) {
    Tensor dg = c_proj_->backward(drop_->backward(dy, ctx), ctx);
    Tensor dh;
    if (gelu_checkpoint_) {
        DS_CHECK(x_.defined(), DS_ERR_INVALID_STATE, "MLP%s: backward without a training forward",
                 module_label(*this).c_str());
        // Recompute c_fc's output h = x W^T + b (the GELU's input).
        Linear& fc = *c_fc_;
        const int64_t rows = x_.numel() / fc.in_features();
        Shape hs = x_.shape();
        hs.back() = fc.out_features();
        Tensor h = new_activation(hs, ctx);
        // The same kernel as c_fc's forward (bf16 products in bf16 mode), so h is bit-identical.
        fc.apply(x_.data<float>(), h.data<float>(), rows, ctx);
        x_ = Tensor();
        dh = Gelu::backward_from_input(h, dg, ctx);
    } else {
        dh = gelu_->backward(dg, ctx);
    }
    return c_fc_->backward(dh, ctx);
}

void Mlp::clear_saved() {
    x_ = Tensor();
    for (Module* c : children()) c->clear_saved();
}

}  // namespace ds::nn
