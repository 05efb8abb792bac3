#include "nn/gpt.h"

#include <cmath>
#include <string>

#include "core/error.h"
#include "nn/cross_entropy.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/layer_factory.h"
#include "nn/layernorm.h"
#include "nn/linear.h"
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
    c.ep_size = m.ep_size;
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

class Gpt final : public Module {
public:
    explicit Gpt(const GptSpec& g) : g_(g) {
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

    const char* type() const override { return "GPT"; }
    std::vector<Module*> children() override {
        std::vector<Module*> out = {wte_.get(), wpe_.get(), drop_.get()};
        for (auto& l : h_) out.push_back(l.get());
        out.push_back(ln_f_.get());
        out.push_back(lm_head_.get());
        return out;
    }
    const std::vector<MoeLayer*>& moe_layers() const { return moe_layers_; }
    std::vector<std::unique_ptr<Module>*> layer_slots() {
        std::vector<std::unique_ptr<Module>*> s;
        for (auto& l : h_) s.push_back(&l);
        return s;
    }

    Tensor forward(const Tensor& ids, RunContext& ctx) override {
        DS_CHECK(ids.dim() == 2, DS_ERR_INVALID_ARGUMENT, "GPT input: token ids [B, T] expected, got shape %s",
                 shape_to_string(ids.shape()).c_str());
        const int64_t B = ids.shape()[0], T = ids.shape()[1], C = g_.n_embd;
        DS_CHECK(T <= g_.block_size, DS_ERR_INVALID_ARGUMENT, "GPT input: sequence length %lld exceeds block_size %lld",
                 static_cast<long long>(T), static_cast<long long>(g_.block_size));
        Allocator& alloc = alloc_of(ctx);
        Tensor tok = call_forward(*wte_, ids, ctx);
        Tensor pos = Tensor::empty({T}, DType::I64, Device::cpu(), alloc, MemCategory::Buffers);
        for (int64_t t = 0; t < T; ++t) pos.data<int64_t>()[t] = t;
        Tensor pe = call_forward(*wpe_, pos, ctx);
        Tensor x = Tensor::empty({B, T, C}, DType::F32, Device::cpu(), alloc, MemCategory::Buffers);
        const float* tv = tok.data<float>();
        const float* pv = pe.data<float>();
        float* xv = x.data<float>();
        for (int64_t b = 0; b < B; ++b)
            for (int64_t i = 0; i < T * C; ++i) xv[b * T * C + i] = tv[b * T * C + i] + pv[i];
        x = call_forward(*drop_, x, ctx);
        for (auto& l : h_) x = call_forward(*l, x, ctx);
        x = call_forward(*ln_f_, x, ctx);
        batch_ = B;
        seq_ = T;
        return call_forward(*lm_head_, x, ctx);
    }

    Tensor backward(const Tensor& dlogits, RunContext& ctx) override {
        Tensor dx = lm_head_->backward(dlogits, ctx);
        dx = ln_f_->backward(dx, ctx);
        for (size_t i = h_.size(); i-- > 0;) dx = h_[i]->backward(dx, ctx);
        dx = drop_->backward(dx, ctx);
        const int64_t B = batch_, T = seq_, C = g_.n_embd;
        Tensor dpe = Tensor::zeros({T, C}, DType::F32, Device::cpu(), alloc_of(ctx), MemCategory::Buffers);
        const float* d = dx.data<float>();
        float* p = dpe.data<float>();
        for (int64_t b = 0; b < B; ++b)
            for (int64_t i = 0; i < T * C; ++i) p[i] += d[b * T * C + i];
        wte_->backward(dx, ctx);
        wpe_->backward(dpe, ctx);
        return Tensor();
    }

    void clear_saved() override {
        for (Module* m : children()) m->clear_saved();
    }

private:
    GptSpec g_;
    std::unique_ptr<Embedding> wte_, wpe_;
    std::unique_ptr<Dropout> drop_;
    std::vector<std::unique_ptr<Module>> h_;
    std::unique_ptr<LayerNorm> ln_f_;
    std::unique_ptr<Linear> lm_head_;
    int64_t batch_ = 0, seq_ = 0;
    std::vector<MoeLayer*> moe_layers_;  // owned by their transformer layers
};

}  // namespace

int64_t gpt_param_count(const GptSpec& g) {
    const int64_t C = g.n_embd, V = g.vocab_size, S = g.block_size, L = g.n_layer;
    const int64_t b = g.bias ? 1 : 0;
    // per layer: ln_1 (2C), c_attn (3C² + 3C·b), attn.c_proj (C² + C·b),
    // ln_2 (2C), c_fc (4C² + 4C·b), mlp.c_proj (4C² + C·b); the LM head has no bias
    const int64_t layer = 4 * C + 12 * C * C + 9 * C * b;
    // An MoE layer has num_experts MLPs (8C² + 5C·b each) and the gate (C·E)
    // in place of its MLP, plus with use_residual one more MLP and the
    // coefficient Linear(C, 2) with bias.
    int64_t moe = 0;
    for (int64_t i = 0; i < L; ++i) {
        if (!is_moe_layer(g, i)) continue;
        const int64_t mlp = 8 * C * C + 5 * C * b, E = g.moe.num_experts;
        moe += (E - 1) * mlp + C * E + (g.moe.use_residual ? mlp + 2 * C + 2 : 0);
    }
    return V * C + S * C + L * layer + moe + 2 * C + (g.tied_embeddings ? 0 : V * C);
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
    if (g.moe.enabled) loss = make_moe_aux_loss(std::move(loss), root->moe_layers(), g.moe.aux_loss_coef);
    auto m = std::make_unique<Model>(spec, std::move(root), std::move(loss), io, std::move(slots));
    init_layers(*m, g.seed, g.initializer_range);
    return m;
}

}  // namespace ds::nn
