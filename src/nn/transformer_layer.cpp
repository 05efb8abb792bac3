#include "nn/transformer_layer.h"

#include <cmath>

#include "core/error.h"
#include "nn/block_util.h"
#include "nn/layer_util.h"
#include "nn/moe_layer.h"

namespace ds::nn {

namespace {

int64_t inner_size(const TransformerLayerConfig& c) {
    return c.intermediate_size > 0 ? c.intermediate_size : 4 * c.hidden_size;
}

// Fills `p` with normal(0, std) from a stream keyed by (seed, stream):
// splitmix64 uniforms through Box-Muller, in double, rounded once.
void fill_normal(Param& p, double std, uint64_t seed, uint64_t stream) {
    uint64_t state = seed ^ (0x5851f42d4c957f2dULL * (stream + 1));
    auto next = [&state] {
        uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    };
    auto uniform = [&next] { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; };  // (0, 1)
    float* v = p.value.data<float>();
    const int64_t n = p.value.numel();
    for (int64_t i = 0; i < n; i += 2) {
        const double r = std::sqrt(-2.0 * std::log(uniform())), t = 2.0 * M_PI * uniform();
        v[i] = static_cast<float>(std * r * std::cos(t));
        if (i + 1 < n) v[i + 1] = static_cast<float>(std * r * std::sin(t));
    }
}

void fill(Param& p, float value) {
    float* v = p.value.data<float>();
    for (int64_t i = 0; i < p.value.numel(); ++i) v[i] = value;
}

Tensor new_like(const Tensor& t, RunContext& ctx) {
    return new_activation(t.shape(), ctx);
}

void name_layernorm(LayerNorm& ln, const std::string& module, const std::string& w, const std::string& b) {
    ln.set_name(module);
    ln.weight().name = w;
    ln.bias().name = b;
}

}  // namespace

void validate(const TransformerLayerConfig& c) {
    auto bad = [](const char* fmt, auto... v) { fail(DS_ERR_INVALID_ARGUMENT, fmt, v...); };
    if (c.hidden_size < 1)
        bad("TransformerLayer: hidden_size = %lld must be >= 1", static_cast<long long>(c.hidden_size));
    if (c.heads < 1) bad("TransformerLayer: heads = %lld must be >= 1", static_cast<long long>(c.heads));
    if (c.hidden_size % c.heads != 0)
        bad("TransformerLayer: hidden_size = %lld is not a multiple of heads = %lld",
            static_cast<long long>(c.hidden_size), static_cast<long long>(c.heads));
    if (!(c.attn_dropout_ratio >= 0.0f && c.attn_dropout_ratio < 1.0f))
        bad("TransformerLayer: attn_dropout_ratio = %g is outside [0, 1)", static_cast<double>(c.attn_dropout_ratio));
    if (!(c.hidden_dropout_ratio >= 0.0f && c.hidden_dropout_ratio < 1.0f))
        bad("TransformerLayer: hidden_dropout_ratio = %g is outside [0, 1)",
            static_cast<double>(c.hidden_dropout_ratio));
    if (!(c.initializer_range >= 0.0f && std::isfinite(c.initializer_range)))
        bad("TransformerLayer: initializer_range = %g must be finite and >= 0",
            static_cast<double>(c.initializer_range));
    if (!(c.layer_norm_eps > 0.0f && std::isfinite(c.layer_norm_eps)))
        bad("TransformerLayer: layer_norm_eps = %g must be finite and > 0", static_cast<double>(c.layer_norm_eps));
    if (c.adjust_init_range && c.num_hidden_layers < 1)
        bad("TransformerLayer: num_hidden_layers = %lld must be >= 1 when adjust_init_range is true",
            static_cast<long long>(c.num_hidden_layers));
    if (c.naming != "gpt2" && c.naming != "deepspeed")
        bad("TransformerLayer: naming = \"%s\" is not \"gpt2\" or \"deepspeed\"", c.naming.c_str());
}

TransformerLayer::TransformerLayer(const TransformerLayerConfig& cfg) : cfg_(cfg) {
    validate(cfg);
    cfg_.intermediate_size = inner_size(cfg);
    const int64_t C = cfg.hidden_size;
    ln_1_ = std::make_unique<LayerNorm>(C, cfg.layer_norm_eps, true);
    ln_2_ = std::make_unique<LayerNorm>(C, cfg.layer_norm_eps, true);
    attn_ = std::make_unique<CausalSelfAttention>(C, cfg.heads, cfg.attn_dropout_ratio, cfg.hidden_dropout_ratio,
                                                  cfg.bias, cfg.causal);
    mlp_ = std::make_unique<Mlp>(C, cfg_.intermediate_size, cfg.hidden_dropout_ratio, cfg.bias, cfg.gelu_checkpoint);
    attn_->set_recompute_probs(cfg.attn_dropout_checkpoint);
    ln_1_->set_backward_from_output(cfg.normalize_invertible);
    ln_2_->set_backward_from_output(cfg.normalize_invertible);
    set_names("");
}

std::vector<Module*> TransformerLayer::children() {
    Module* f = &ffn();
    if (cfg_.pre_layer_norm) return {ln_1_.get(), attn_.get(), ln_2_.get(), f};
    return {attn_.get(), ln_1_.get(), f, ln_2_.get()};
}

void TransformerLayer::replace_mlp(std::unique_ptr<Module> ffn) {
    DS_CHECK(ffn != nullptr, DS_ERR_INTERNAL, "TransformerLayer::replace_mlp: null module");
    ffn_ = std::move(ffn);
    mlp_.reset();
    const std::string& n = name();
    set_names(n.empty() ? std::string() : n + ".");
}

void TransformerLayer::set_names(const std::string& prefix) {
    set_name(prefix.empty() ? std::string() : prefix.substr(0, prefix.size() - 1));
    attn_->set_names(prefix + "attn.");
    if (mlp_) mlp_->set_names(prefix + "mlp.");
    if (auto* moe = dynamic_cast<MoeLayer*>(ffn_.get())) moe->set_names(prefix + "mlp.");
    if (cfg_.naming == "gpt2") {
        name_layernorm(*ln_1_, prefix + "ln_1", prefix + "ln_1.weight", prefix + "ln_1.bias");
        name_layernorm(*ln_2_, prefix + "ln_2", prefix + "ln_2.weight", prefix + "ln_2.bias");
        return;
    }
    // DeepSpeed's names. Its attn_n* LayerNorm normalizes x + attention (the
    // one before the MLP with pre-LN, after the attention residual with
    // post-LN); norm_* is the other: the input LayerNorm (pre-LN) or the
    // output LayerNorm (post-LN).
    LayerNorm& attn_norm = cfg_.pre_layer_norm ? *ln_2_ : *ln_1_;
    LayerNorm& norm = cfg_.pre_layer_norm ? *ln_1_ : *ln_2_;
    name_layernorm(attn_norm, attn_norm.name(), prefix + "attn_nw", prefix + "attn_nb");
    name_layernorm(norm, norm.name(), prefix + "norm_w", prefix + "norm_b");
    struct Named {
        Linear& lin;
        const char* w;
        const char* b;
    };
    std::vector<Named> linears = {Named{attn_->c_attn(), "attn_qkvw", "attn_qkvb"},
                                  Named{attn_->c_proj(), "attn_ow", "attn_ob"}};
    if (mlp_) {
        linears.push_back(Named{mlp_->c_fc(), "inter_w", "inter_b"});
        linears.push_back(Named{mlp_->c_proj(), "output_w", "output_b"});
    }
    for (const Named& n : linears) {
        n.lin.weight().name = prefix + n.w;
        if (n.lin.has_bias()) n.lin.bias().name = prefix + n.b;
    }
}

void TransformerLayer::init_params(uint64_t seed) {
    // The streams fill whole parameters: a shard's block would get other values.
    DS_CHECK(!attn_->sharded() && !(mlp_ && mlp_->sharded()), DS_ERR_INVALID_STATE,
             "TransformerLayer%s: init_params after shard_transformer_layer; initialise the layer before sharding it",
             module_label(*this).c_str());
    const double std_in = cfg_.initializer_range;
    const double std_out =
        cfg_.adjust_init_range ? std_in / std::sqrt(2.0 * static_cast<double>(cfg_.num_hidden_layers)) : std_in;
    Linear* lins[] = {&attn_->c_attn(), &attn_->c_proj(), mlp_ ? &mlp_->c_fc() : nullptr,
                      mlp_ ? &mlp_->c_proj() : nullptr};
    const double stds[] = {std_in, std_out, std_in, std_out};
    if (auto* moe = dynamic_cast<MoeLayer*>(ffn_.get())) moe->init_params(seed, std_in, std_out);
    for (int k = 0; k < (mlp_ ? 4 : 2); ++k) {
        fill_normal(lins[k]->weight(), stds[k], seed, static_cast<uint64_t>(k));
        if (lins[k]->has_bias()) fill(lins[k]->bias(), 0.0f);
    }
    for (LayerNorm* ln : {ln_1_.get(), ln_2_.get()}) {
        fill(ln->weight(), 1.0f);
        fill(ln->bias(), 0.0f);
    }
}

Tensor TransformerLayer::forward(const Tensor& x, RunContext& ctx) {
    DS_CHECK(
        x.defined() && x.dtype() == DType::F32 && x.dim() == 3 && x.shape()[2] == cfg_.hidden_size && x.is_contiguous(),
        DS_ERR_INVALID_ARGUMENT, "TransformerLayer%s: input must be contiguous float32 [batch, seq, %lld], got %s",
        module_label(*this).c_str(), static_cast<long long>(cfg_.hidden_size),
        x.defined() ? shape_to_string(x.shape()).c_str() : "an undefined tensor");
    have_forward_ = false;
    const size_t n = static_cast<size_t>(x.numel());
    Tensor y;
    if (cfg_.pre_layer_norm) {
        Tensor a = call_forward(*attn_, call_forward(*ln_1_, x, ctx), ctx);
        Tensor x1 = new_like(x, ctx);
        ctx.kernels.add(x.data<float>(), a.data<float>(), x1.data<float>(), n);
        Tensor m = call_forward(ffn(), call_forward(*ln_2_, x1, ctx), ctx);
        y = new_like(x, ctx);
        ctx.kernels.add(x1.data<float>(), m.data<float>(), y.data<float>(), n);
    } else {
        Tensor a = call_forward(*attn_, x, ctx);
        Tensor s1 = new_like(x, ctx);
        ctx.kernels.add(x.data<float>(), a.data<float>(), s1.data<float>(), n);
        Tensor x1 = call_forward(*ln_1_, s1, ctx);
        Tensor m = call_forward(ffn(), x1, ctx);
        Tensor s2 = new_like(x, ctx);
        ctx.kernels.add(x1.data<float>(), m.data<float>(), s2.data<float>(), n);
        y = call_forward(*ln_2_, s2, ctx);
    }
    have_forward_ = ctx.training;
    return y;
}

// The residual branches' gradients add into tensors this layer got fresh from
// a child's backward (never into the caller's dy).
Tensor TransformerLayer::backward(const Tensor& dy, RunContext& ctx) {
    DS_CHECK(have_forward_, DS_ERR_INVALID_STATE, "TransformerLayer%s: backward without a training forward",
             module_label(*this).c_str());
    have_forward_ = false;
    const size_t n = static_cast<size_t>(dy.numel());
    if (cfg_.pre_layer_norm) {
        Tensor dx1 = ln_2_->backward(ffn().backward(dy, ctx), ctx);
        ctx.kernels.add_inplace(dx1.data<float>(), dy.data<float>(), n);
        Tensor dx = ln_1_->backward(attn_->backward(dx1, ctx), ctx);
        ctx.kernels.add_inplace(dx.data<float>(), dx1.data<float>(), n);
        return dx;
    }
    Tensor ds2 = ln_2_->backward(dy, ctx);
    Tensor dx1 = ffn().backward(ds2, ctx);
    ctx.kernels.add_inplace(dx1.data<float>(), ds2.data<float>(), n);
    Tensor ds1 = ln_1_->backward(dx1, ctx);
    Tensor dx = attn_->backward(ds1, ctx);
    ctx.kernels.add_inplace(dx.data<float>(), ds1.data<float>(), n);
    return dx;
}

void TransformerLayer::clear_saved() {
    have_forward_ = false;
    for (Module* c : children()) c->clear_saved();
}

}  // namespace ds::nn
