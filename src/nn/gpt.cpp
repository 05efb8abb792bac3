#include "nn/gpt.h"
#include "nn/gpt_module.h"

#include <cmath>
#include <string>

#include "core/error.h"
#include "nn/cross_entropy.h"
#include "nn/layer_factory.h"
#include "nn/layer_util.h"
#include "nn/moe_layer.h"
#include "nn/transformer_layer.h"

namespace ds::nn {

namespace {

Allocator& alloc_of(RunContext& ctx) { return ctx.alloc != nullptr ? *ctx.alloc : Allocator::process(); }

// Megatron-DeepSpeed's placement: 1-based layer number divisible by the interval.
bool is_moe_layer(const GptSpec& g, int64_t i) { return g.moe.enabled && (i + 1) % g.moe.every == 0; }

MoeConfig moe_config(const GptMoeSpec& m) {
    MoeConfig c;
    c.num_experts = m.num_experts;
    c.ep_size = 1;  // built with every expert; an expert-parallel engine shards them (nn/moe_ep.h)
    c.k = static_cast<int>(m.k);
    c.capacity_factor = m.capacity_factor;
    c.eval_capacity_factor = m.eval_capacity_factor;
    c.min_capacity = m.min_capacity;
    c.noisy_gate_policy = m.noisy_gate_policy == "Jitter"    ? MoeConfig::Noise::Jitter
                          : m.noisy_gate_policy == "RSample" ? MoeConfig::Noise::RSample
                                                             : MoeConfig::Noise::None;
    c.drop_tokens = m.drop_tokens;
    c.use_rts = m.use_rts;
    c.use_residual = m.use_residual;
    c.top2_2nd_expert_sampling = m.top2_2nd_expert_sampling;
    return c;
}

}  // namespace

Gpt::Gpt(const GptSpec& g) : g_(g) {
    wte_ = std::make_unique<Embedding>(g.vocab_size, g.n_embd);
    wte_->set_name("wte");
    wpe_ = std::make_unique<Embedding>(g.block_size, g.n_embd);
    wpe_->set_name("wpe");
    drop_ = std::make_unique<Dropout>(static_cast<float>(g.embd_dropout));
    drop_->set_name("drop");
    for (int64_t i = 0; i < g.n_layer; ++i) {
        TransformerLayerConfig c;
        c.hidden_size = g.n_embd;
        c.intermediate_size = 4 * g.n_embd;
        c.heads = g.n_head;
        c.attn_dropout_ratio = static_cast<float>(g.attn_dropout);
        c.hidden_dropout_ratio = static_cast<float>(g.resid_dropout);
        c.num_hidden_layers = g.n_layer;
        c.initializer_range = static_cast<float>(g.initializer_range);
        c.layer_norm_eps = static_cast<float>(g.layer_norm_eps);
        c.pre_layer_norm = true;
        c.adjust_init_range = true;  // GPT-2: c_proj ~ normal(0, range / sqrt(2 n_layer))
        c.causal = true;
        c.bias = g.bias;
        c.naming = "gpt2";
        auto layer = std::make_unique<TransformerLayer>(c);
        if (is_moe_layer(g, i)) {
            auto moe = std::make_unique<MoeLayer>(moe_config(g.moe), g.n_embd, 4 * g.n_embd,
                                                  static_cast<float>(g.resid_dropout), g.bias);
            moe_layers_.push_back(moe.get());
            layer->replace_mlp(std::move(moe));
        }
        name_layer(*layer, "h." + std::to_string(i));
        h_.push_back(std::move(layer));
    }
    ln_f_ = std::make_unique<LayerNorm>(g.n_embd, static_cast<float>(g.layer_norm_eps));
    ln_f_->set_name("ln_f");
    if (g.tied_embeddings)
        lm_head_ = std::make_unique<Linear>(&wte_->weight(), /*bias=*/false);
    else
        lm_head_ = std::make_unique<Linear>(g.n_embd, g.vocab_size, /*bias=*/false);
    lm_head_->set_name("lm_head");
}

std::vector<Module*> Gpt::children() {
    std::vector<Module*> out;
    for (Module* m : {static_cast<Module*>(wte_.get()), static_cast<Module*>(wpe_.get()),
                      static_cast<Module*>(drop_.get())})
        if (m != nullptr) out.push_back(m);
    for (auto& l : h_) out.push_back(l.get());
    if (ln_f_) out.push_back(ln_f_.get());
    if (lm_head_) out.push_back(lm_head_.get());
    return out;
}

std::vector<Param*> Gpt::own_params() {
    if (holds_head_weight_) return {&head_weight_};
    return {};
}

std::vector<std::unique_ptr<Module>*> Gpt::layer_slots() {
    std::vector<std::unique_ptr<Module>*> s;
    for (auto& l : h_) s.push_back(&l);
    return s;
}

// Pipeline layer 0: wte(ids) + wpe(positions), then the embedding dropout.
Tensor Gpt::embed(const Tensor& ids, RunContext& ctx) {
    DS_CHECK(ids.dim() == 2, DS_ERR_INVALID_ARGUMENT, "GPT input: token ids [B, T] expected, got shape %s",
             shape_to_string(ids.shape()).c_str());
    const int64_t B = ids.shape()[0], T = ids.shape()[1], C = g_.n_embd;
    DS_CHECK(T <= g_.block_size, DS_ERR_INVALID_ARGUMENT, "GPT input: sequence length %lld exceeds block_size %lld",
             static_cast<long long>(T), static_cast<long long>(g_.block_size));
    Tensor tok = call_forward(*wte_, ids, ctx);
    Tensor pos = Tensor::empty({T}, DType::I64, Device::cpu(), alloc_of(ctx), MemCategory::Buffers);
    for (int64_t t = 0; t < T; ++t) pos.data<int64_t>()[t] = t;
    Tensor pe = call_forward(*wpe_, on_run_device(pos, ctx), ctx);
    // x[b] = tok[b] + pe for each batch element, by the run's kernels (on its device).
    Tensor x = new_activation({B, T, C}, ctx);
    const size_t n = static_cast<size_t>(T * C);
    for (int64_t b = 0; b < B; ++b)
        ctx.kernels.add(tok.data<float>() + b * T * C, pe.data<float>(), x.data<float>() + b * T * C, n);
    return call_forward(*drop_, x, ctx);
}

void Gpt::embed_backward(const Tensor& dy, RunContext& ctx) {
    Tensor dx = drop_->backward(dy, ctx);
    const int64_t B = batch_, T = seq_, C = g_.n_embd;
    // dpe = the sum of dx over the batch, in batch order.
    Tensor dpe = new_activation({T, C}, ctx);
    dpe.zero();
    const size_t n = static_cast<size_t>(T * C);
    for (int64_t b = 0; b < B; ++b) ctx.kernels.add_inplace(dpe.data<float>(), dx.data<float>() + b * T * C, n);
    wte_->backward(dx, ctx);
    wpe_->backward(dpe, ctx);
}

Tensor Gpt::forward(const Tensor& in, RunContext& ctx) {
    Tensor x;
    if (wte_) {
        x = embed(in, ctx);
    } else {
        // A later pipeline stage: the previous stage's activations.
        check_activation(in, ctx, "GPT stage", "input");
        DS_CHECK(in.dim() == 3 && in.shape()[2] == g_.n_embd && in.shape()[1] <= g_.block_size,
                 DS_ERR_INVALID_ARGUMENT,
                 "GPT stage input: activations [B, T, %lld] with T <= block_size %lld expected, got shape %s",
                 static_cast<long long>(g_.n_embd), static_cast<long long>(g_.block_size),
                 shape_to_string(in.shape()).c_str());
        x = in;
    }
    for (auto& l : h_) x = call_forward(*l, x, ctx);
    if (ln_f_) x = call_forward(*ln_f_, x, ctx);
    batch_ = x.shape()[0];
    seq_ = x.shape()[1];
    return lm_head_ ? call_forward(*lm_head_, x, ctx) : x;
}

Tensor Gpt::backward(const Tensor& dy, RunContext& ctx) {
    Tensor dx = dy;
    if (lm_head_) dx = lm_head_->backward(dx, ctx);
    if (ln_f_) dx = ln_f_->backward(dx, ctx);
    for (size_t i = h_.size(); i-- > 0;) dx = h_[i]->backward(dx, ctx);
    if (!wte_) return dx;  // the previous stage's gradient
    embed_backward(dx, ctx);
    return Tensor();  // token ids have no gradient
}

void Gpt::clear_saved() {
    for (Module* m : children()) m->clear_saved();
}

int64_t gpt_layer_param_count(const GptSpec& g, int64_t i) {
    const int64_t C = g.n_embd;
    const int64_t b = g.bias ? 1 : 0;
    // ln_1 (2C), c_attn (3C² + 3C·b), attn.c_proj (C² + C·b), ln_2 (2C),
    // c_fc (4C² + 4C·b), mlp.c_proj (4C² + C·b)
    const int64_t layer = 4 * C + 12 * C * C + 9 * C * b;
    if (!is_moe_layer(g, i)) return layer;
    // An MoE layer has num_experts MLPs (8C² + 5C·b each) and the gate (C·E)
    // in place of its MLP, plus with use_residual one more MLP and the
    // coefficient Linear(C, 2) with bias.
    const int64_t mlp = 8 * C * C + 5 * C * b, E = g.moe.num_experts;
    return layer + (E - 1) * mlp + C * E + (g.moe.use_residual ? mlp + 2 * C + 2 : 0);
}

int64_t gpt_layer_local_param_count(const GptSpec& g, int64_t i) {
    if (!is_moe_layer(g, i)) return gpt_layer_param_count(g, i);
    const int64_t C = g.n_embd, b = g.bias ? 1 : 0, E = g.moe.num_experts;
    const int64_t mlp = 8 * C * C + 5 * C * b;
    return gpt_layer_param_count(g, i) - (E - E / g.moe.ep_size) * mlp;  // the other ranks' experts
}

int64_t gpt_param_count(const GptSpec& g) {
    const int64_t C = g.n_embd, V = g.vocab_size, S = g.block_size;
    int64_t layers = 0;
    for (int64_t i = 0; i < g.n_layer; ++i) layers += gpt_layer_param_count(g, i);
    // the LM head has no bias; tied, its weight is wte's
    return V * C + S * C + layers + 2 * C + (g.tied_embeddings ? 0 : V * C);
}

std::unique_ptr<Model> build_gpt(const ModelSpec& spec) {
    const GptSpec& g = spec.gpt;
    auto root = std::make_unique<Gpt>(g);
    std::vector<std::unique_ptr<Module>*> slots = root->layer_slots();
    IoContract io;
    io.ids_input = true;
    io.max_seq = g.block_size;
    io.in_width = g.vocab_size;
    io.out_width = g.vocab_size;
    io.class_targets = true;
    std::unique_ptr<Loss> loss = make_cross_entropy(-100);
    // MoE: the loss adds aux_loss_coef * l_aux of every MoE layer (DeepSpeed's users add it themselves).
    std::shared_ptr<MoeAux> aux;
    if (g.moe.enabled) {
        aux = std::make_shared<MoeAux>(&root->moe_layers(), g.moe.aux_loss_coef);
        loss = make_moe_aux_loss(std::move(loss), aux);
    }
    auto m = std::make_unique<Model>(spec, std::move(root), std::move(loss), io, std::move(slots));
    m->set_aux_loss(aux);
    init_layers(*m, g.seed, g.initializer_range);
    return m;
}

}  // namespace ds::nn
