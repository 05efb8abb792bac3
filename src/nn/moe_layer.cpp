#include "nn/moe_layer.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "nn/block_util.h"
#include "nn/dropout.h"
#include "nn/layer_util.h"
#include "nn_moe.h"

namespace ds::nn {

namespace {

void copy_param(Param& dst, const Param& src) {
    init_constant(dst, 0.0f);
    std::memcpy(dst.value.data<float>(), src.value.data<float>(), static_cast<size_t>(src.value.numel()) * 4);
}

void init_mlp(Mlp& m, uint64_t seed, double std_in, double std_out) {
    init_normal(m.c_fc().weight(), seed, std_in);
    init_normal(m.c_proj().weight(), seed, std_out);
    if (m.c_fc().has_bias()) init_constant(m.c_fc().bias(), 0.0f);
    if (m.c_proj().has_bias()) init_constant(m.c_proj().bias(), 0.0f);
}

void copy_mlp(Mlp& dst, Mlp& src) {
    copy_param(dst.c_fc().weight(), src.c_fc().weight());
    copy_param(dst.c_proj().weight(), src.c_proj().weight());
    if (src.c_fc().has_bias()) copy_param(dst.c_fc().bias(), src.c_fc().bias());
    if (src.c_proj().has_bias()) copy_param(dst.c_proj().bias(), src.c_proj().bias());
}

}  // namespace

void validate(const MoeConfig& c) {
    auto bad = [](const char* fmt, auto... v) { fail(DS_ERR_INVALID_ARGUMENT, fmt, v...); };
    if (c.num_experts < 1 || c.num_experts > 65536)
        bad("MoE: num_experts = %lld must be in [1, 65536]", static_cast<long long>(c.num_experts));
    if (c.k != 1 && c.k != 2) bad("MoE: k = %d must be 1 or 2 (DeepSpeed's MoE layer supports top-1 and top-2)", c.k);
    if (c.k == 2 && c.num_experts < 2)
        bad("MoE: k = 2 needs num_experts >= 2, got %lld", static_cast<long long>(c.num_experts));
    if (!(std::isfinite(c.capacity_factor) && c.capacity_factor > 0.0))
        bad("MoE: capacity_factor = %g must be finite and > 0", c.capacity_factor);
    if (!(std::isfinite(c.eval_capacity_factor) && c.eval_capacity_factor > 0.0))
        bad("MoE: eval_capacity_factor = %g must be finite and > 0", c.eval_capacity_factor);
    if (c.min_capacity < 0) bad("MoE: min_capacity = %lld must be >= 0", static_cast<long long>(c.min_capacity));
    if (c.ep_size < 1) bad("MoE: ep_size = %lld must be >= 1", static_cast<long long>(c.ep_size));
    if (c.num_experts % c.ep_size != 0)
        bad("MoE: num_experts = %lld is not divisible by ep_size = %lld", static_cast<long long>(c.num_experts),
            static_cast<long long>(c.ep_size));
    DS_CHECK(c.ep_size == 1, DS_ERR_UNSUPPORTED,
             "MoE: ep_size = %lld: expert parallelism (the all-to-all over an expert group) is not built yet; "
             "ep_size must be 1 (all experts local)",
             static_cast<long long>(c.ep_size));
}

MoeLayer::MoeLayer(const MoeConfig& cfg, int64_t hidden, int64_t inner, float pdrop, bool bias)
    : cfg_(cfg), hidden_(hidden) {
    validate(cfg);
    gate_ = std::make_unique<Linear>(hidden, cfg.num_experts, /*bias=*/false);
    for (int64_t j = 0; j < cfg.num_experts; ++j) experts_.push_back(std::make_unique<Mlp>(hidden, inner, pdrop, bias));
    if (cfg.use_residual) {
        mlp_ = std::make_unique<Mlp>(hidden, inner, pdrop, bias);
        coefficient_ = std::make_unique<Linear>(hidden, 2, /*bias=*/true);
    }
    set_names("");
}

std::vector<Module*> MoeLayer::children() {
    std::vector<Module*> out = {gate_.get()};
    for (auto& e : experts_) out.push_back(e.get());
    if (mlp_) {
        out.push_back(mlp_.get());
        out.push_back(coefficient_.get());
    }
    return out;
}

void MoeLayer::set_names(const std::string& prefix) {
    set_name(prefix.empty() ? std::string() : prefix.substr(0, prefix.size() - 1));
    name_linear(*gate_, prefix + "deepspeed_moe.gate.wg");
    for (size_t j = 0; j < experts_.size(); ++j)
        experts_[j]->set_names(prefix + "deepspeed_moe.experts.deepspeed_experts." +
                               std::to_string(first_expert_ + static_cast<int64_t>(j)) + ".");
    if (mlp_) {
        mlp_->set_names(prefix + "mlp.");
        name_linear(*coefficient_, prefix + "coefficient");
    }
}

void MoeLayer::init_params(uint64_t seed, double std_in, double std_out) {
    init_normal(gate_->weight(), seed, std_in);
    init_mlp(*experts_[0], seed, std_in, std_out);
    for (size_t j = 1; j < experts_.size(); ++j) copy_mlp(*experts_[j], *experts_[0]);
    if (mlp_) {
        copy_mlp(*mlp_, *experts_[0]);
        init_normal(coefficient_->weight(), seed, std_in);
        init_constant(coefficient_->bias(), 0.0f);
    }
}

void MoeLayer::drop_saved() {
    have_forward_ = false;
    for (Saved& s : expert_out_) s.reset();  // the meter gets their bytes back
    expert_out_.clear();
    moe_out_.reset();
    mlp_out_.reset();
    coef_.reset();
    ep_returned_.reset();
    ep_token_ = Tensor();
    ep_pos_ = Tensor();
    ep_weight_ = Tensor();
    route_rows_ = Tensor();
    route_weight_ = Tensor();
    ident_rows_ = Tensor();
    coef0_ = Tensor();
    coef1_ = Tensor();
}

void MoeLayer::clear_saved() {
    drop_saved();
    for (Module* c : children()) c->clear_saved();
}

// The factors follow the gating kernel's draws in the layer's stream (2 S E of them).
void MoeLayer::jitter(const float* src, int64_t S, bool accumulate, float* dst, RunContext& ctx) const {
    const uint64_t first = 2 * static_cast<uint64_t>(S * cfg_.num_experts);
    ctx.kernels.moe_jitter(src, S * hidden_, key_, first, accumulate, dst);
}

// The gating on host logits [S, E]: probs, each route's expert, slot and
// weight, the counts per expert, the capacity and l_aux (kernels/nn_moe.h).
void MoeLayer::route(const float* logits, int64_t S, RunContext& ctx) {
    const int64_t E = cfg_.num_experts;
    const size_t k = static_cast<size_t>(cfg_.k);
    dsk_moe_gate_args a{};
    a.k = cfg_.k;
    a.drop_tokens = cfg_.drop_tokens;
    a.use_rts = cfg_.k == 1 && cfg_.use_rts;
    a.rsample = cfg_.k == 1 && ctx.training && cfg_.noisy_gate_policy == MoeConfig::Noise::RSample;
    a.second_sampling = cfg_.k == 2 && cfg_.top2_2nd_expert_sampling;
    a.capacity_factor = ctx.training ? cfg_.capacity_factor : cfg_.eval_capacity_factor;
    a.min_capacity = cfg_.min_capacity;
    a.key = key_;
    probs_.resize(static_cast<size_t>(S * E));
    expert_.resize(static_cast<size_t>(S) * k);
    slot_.resize(expert_.size());
    weight_.resize(expert_.size());
    counts_.assign(static_cast<size_t>(E), 0);
    if (dsk_cpu_moe_gate_fwd(logits, static_cast<size_t>(S), static_cast<size_t>(E), &a, probs_.data(),
                             expert_.data(), slot_.data(), weight_.data(), counts_.data(), &capacity_,
                             &l_aux_) != DSK_OK)
        fail(DS_ERR_INVALID_ARGUMENT, "MoE%s: %s", module_label(*this).c_str(), dsk_last_error());
}

Tensor MoeLayer::forward(const Tensor& x, RunContext& ctx) {
    check_activation(x, ctx, "MoE", "input");
    DS_CHECK(x.shape().back() == hidden_, DS_ERR_INVALID_ARGUMENT, "MoE%s: input's last dim must be %lld, got %s",
             module_label(*this).c_str(), static_cast<long long>(hidden_), shape_to_string(x.shape()).c_str());
    drop_saved();
    const int64_t C = hidden_, S = x.numel() / C, E = cfg_.num_experts;
    const size_t k = static_cast<size_t>(cfg_.k);
    shape_ = x.shape();
    const Tensor x2 = x.view({S, C});  // the sub-modules see [tokens, C]
    key_ = Dropout::key(ctx, id());
    // The gate runs with fp32 products whatever the engine's dtype (DeepSpeed casts to float).
    RunContext gctx = ctx;
    gctx.matmul_dtype = DType::F32;
    jittered_ = ctx.training && cfg_.noisy_gate_policy == MoeConfig::Noise::Jitter;
    // Jitter: only the gate sees x times the factors; the experts see x.
    Tensor gin = x2;
    if (jittered_) {
        gin = new_activation({S, C}, ctx);
        jitter(x2.data<float>(), S, /*accumulate=*/false, gin.data<float>(), ctx);
    }
    if (!ctx.device.is_cpu()) return forward_on_device(x2, gin, ctx).view(shape_);
    Tensor logits = call_forward(*gate_, gin, gctx);

    route(logits.data<float>(), S, ctx);
    if (!ctx.training) gate_->clear_saved();

    // Dispatch: expert e's kept routes occupy slots [0, n_e) (positions are
    // handed out in order and a route is kept iff its position < capacity).
    std::vector<int64_t> n(static_cast<size_t>(E), 0);
    for (size_t r = 0; r < slot_.size(); ++r)
        if (slot_[r] >= 0) n[static_cast<size_t>(expert_[r])] += 1;
    Tensor y = Tensor::zeros({S, C}, DType::F32, Device::cpu(),
                             ctx.alloc != nullptr ? *ctx.alloc : Allocator::process(), MemCategory::Buffers);
    float* yv = y.data<float>();
    const float* xv = x.data<float>();
    // The experts: all here, or split over the expert group (moe_ep.cpp).
    const bool all_local = ep_.size == 1;
    if (all_local)
        expert_out_.resize(static_cast<size_t>(E));
    else
        forward_experts_ep(xv, yv, ctx);
    for (int64_t e = 0; all_local && e < E; ++e) {
        const int64_t ne = n[static_cast<size_t>(e)];
        if (ne == 0) continue;
        Tensor xe = new_activation({ne, C}, ctx);
        float* xev = xe.data<float>();
        for (size_t r = 0; r < slot_.size(); ++r) {
            if (expert_[r] != e || slot_[r] < 0) continue;
            DS_CHECK(slot_[r] < ne, DS_ERR_INTERNAL, "MoE: slot %d of expert %lld beyond its %lld kept routes",
                     slot_[r], static_cast<long long>(e), static_cast<long long>(ne));
            std::memcpy(xev + slot_[r] * C, xv + (r / k) * static_cast<size_t>(C), static_cast<size_t>(C) * 4);
        }
        Tensor ye = call_forward(*experts_[static_cast<size_t>(e)], xe, ctx);
        const float* yev = ye.data<float>();
        for (size_t r = 0; r < slot_.size(); ++r) {
            if (expert_[r] != e || slot_[r] < 0) continue;
            float* dst = yv + (r / k) * static_cast<size_t>(C);
            const float* src = yev + slot_[r] * C;
            for (int64_t c = 0; c < C; ++c) dst[c] += weight_[r] * src[c];
        }
        if (ctx.training) expert_out_[static_cast<size_t>(e)].keep(ye, ctx);
    }
    if (mlp_) {
        Tensor m = call_forward(*mlp_, x2, ctx);
        Tensor cl = call_forward(*coefficient_, x2, ctx);
        Tensor coef = new_activation({S, 2}, ctx);
        Tensor out = new_activation({S, C}, ctx);
        const float* mv = m.data<float>();
        const float* clv = cl.data<float>();
        float* cv = coef.data<float>();
        float* ov = out.data<float>();
        for (int64_t s = 0; s < S; ++s) {
            const float mx = std::max(clv[2 * s], clv[2 * s + 1]);
            const float e0 = std::exp(clv[2 * s] - mx), e1 = std::exp(clv[2 * s + 1] - mx);
            cv[2 * s] = e0 / (e0 + e1);
            cv[2 * s + 1] = e1 / (e0 + e1);
            for (int64_t c = 0; c < C; ++c)
                ov[s * C + c] = yv[s * C + c] * cv[2 * s] + mv[s * C + c] * cv[2 * s + 1];
        }
        if (ctx.training) {
            moe_out_.keep(y, ctx);
            mlp_out_.keep(m, ctx);
            coef_.keep(coef, ctx);
        }
        y = out;
    }
    have_forward_ = ctx.training;
    return y.view(shape_);
}

Tensor MoeLayer::backward(const Tensor& dy, RunContext& ctx) {
    DS_CHECK(have_forward_, DS_ERR_INVALID_STATE, "MoE%s: backward without a training forward",
             module_label(*this).c_str());
    check_same_shape(dy, shape_, ctx, "MoE", "backward dy");
    have_forward_ = false;
    if (!ctx.device.is_cpu()) return backward_on_device(dy.view({dy.numel() / hidden_, hidden_}), ctx).view(shape_);
    const int64_t C = hidden_, S = dy.numel() / C, E = cfg_.num_experts;
    const size_t k = static_cast<size_t>(cfg_.k);
    const float* dyv = dy.data<float>();
    Tensor dx = Tensor::zeros({S, C}, DType::F32, Device::cpu(),
                              ctx.alloc != nullptr ? *ctx.alloc : Allocator::process(), MemCategory::Buffers);
    float* dxv = dx.data<float>();
    auto add_rows = [&](const Tensor& t) {
        const float* tv = t.data<float>();
        for (int64_t i = 0; i < S * C; ++i) dxv[i] += tv[i];
    };

    Tensor dmoe = dy;
    if (mlp_) {
        // out = moe * c0 + mlp * c1: split dy, then the 2-way softmax's backward.
        dmoe = new_activation({S, C}, ctx);
        Tensor dmlp = new_activation({S, C}, ctx);
        Tensor dcl = new_activation({S, 2}, ctx);
        const float* mo = moe_out_.get().data<float>();
        const float* ml = mlp_out_.get().data<float>();
        const float* cv = coef_.get().data<float>();
        float* dm = dmoe.data<float>();
        float* dl = dmlp.data<float>();
        float* dc = dcl.data<float>();
        for (int64_t s = 0; s < S; ++s) {
            float g0 = 0.0f, g1 = 0.0f;
            for (int64_t c = 0; c < C; ++c) {
                const float d = dyv[s * C + c];
                dm[s * C + c] = d * cv[2 * s];
                dl[s * C + c] = d * cv[2 * s + 1];
                g0 += d * mo[s * C + c];
                g1 += d * ml[s * C + c];
            }
            const float dot = cv[2 * s] * g0 + cv[2 * s + 1] * g1;
            dc[2 * s] = cv[2 * s] * (g0 - dot);
            dc[2 * s + 1] = cv[2 * s + 1] * (g1 - dot);
        }
        add_rows(coefficient_->backward(dcl, ctx));
        add_rows(mlp_->backward(dmlp, ctx));
    }

    // Combine's backward: d weight[r] = <dy[s], expert_out[e][slot]>, d expert_out = weight * dy[s].
    const float* dmv = dmoe.data<float>();
    std::vector<float> dweight(weight_.size(), 0.0f);
    const bool all_local = ep_.size == 1;
    if (!all_local) backward_experts_ep(dmv, dxv, dweight, ctx);
    for (int64_t e = 0; all_local && e < E; ++e) {
        const Tensor& ye = expert_out_[static_cast<size_t>(e)].get();
        if (!ye.defined()) continue;
        const float* yev = ye.data<float>();
        Tensor dye = Tensor::zeros(ye.shape(), DType::F32, Device::cpu(),
                                   ctx.alloc != nullptr ? *ctx.alloc : Allocator::process(), MemCategory::Buffers);
        float* dyev = dye.data<float>();
        for (size_t r = 0; r < slot_.size(); ++r) {
            if (expert_[r] != e || slot_[r] < 0) continue;
            const float* g = dmv + (r / k) * static_cast<size_t>(C);
            const float* o = yev + slot_[r] * C;
            float acc = 0.0f;
            for (int64_t c = 0; c < C; ++c) {
                acc += g[c] * o[c];
                dyev[slot_[r] * C + c] = weight_[r] * g[c];
            }
            dweight[r] = acc;
        }
        Tensor dxe = experts_[static_cast<size_t>(e)]->backward(dye, ctx);
        const float* dxev = dxe.data<float>();
        for (size_t r = 0; r < slot_.size(); ++r) {
            if (expert_[r] != e || slot_[r] < 0) continue;
            float* dst = dxv + (r / k) * static_cast<size_t>(C);
            for (int64_t c = 0; c < C; ++c) dst[c] += dxev[slot_[r] * C + c];
        }
    }
    Tensor dlogits = new_activation({S, E}, ctx);
    if (dsk_cpu_moe_gate_bwd(probs_.data(), static_cast<size_t>(S), static_cast<size_t>(E), cfg_.k, expert_.data(),
                             slot_.data(), dweight.data(), aux_grad_, dlogits.data<float>()) != DSK_OK)
        fail(DS_ERR_INTERNAL, "MoE%s: %s", module_label(*this).c_str(), dsk_last_error());
    aux_grad_ = 0.0f;
    RunContext gctx = ctx;
    gctx.matmul_dtype = DType::F32;
    Tensor dgin = gate_->backward(dlogits, gctx);
    if (jittered_)  // d x += d gin * factor
        jitter(dgin.data<float>(), S, /*accumulate=*/true, dxv, ctx);
    else
        add_rows(dgin);
    drop_saved();
    return dx.view(shape_);
}

float MoeAux::add_terms(float v) const {
    for (MoeLayer* l : *layers_) v += coef_ * l->l_aux();
    return v;
}

void MoeAux::set_grad(float dloss) {
    for (MoeLayer* l : *layers_) l->set_aux_grad(dloss * coef_);
}

namespace {

class MoeAuxLoss final : public Loss {
public:
    MoeAuxLoss(std::unique_ptr<Loss> inner, std::shared_ptr<MoeAux> aux)
        : inner_(std::move(inner)), aux_(std::move(aux)) {}
    const char* name() const override { return inner_->name(); }
    float forward(const Tensor& output, const Tensor& targets, RunContext& ctx) override {
        inner_->set_output_donated(output_donated_);  // what the engine told this wrapper
        return aux_->add_terms(inner_->forward(output, targets, ctx));
    }
    Tensor backward(float dloss, RunContext& ctx) override {
        aux_->set_grad(dloss);
        return inner_->backward(dloss, ctx);
    }

private:
    std::unique_ptr<Loss> inner_;
    std::shared_ptr<MoeAux> aux_;
};

}  // namespace

std::unique_ptr<Loss> make_moe_aux_loss(std::unique_ptr<Loss> inner, std::shared_ptr<MoeAux> aux) {
    return std::make_unique<MoeAuxLoss>(std::move(inner), std::move(aux));
}

}  // namespace ds::nn
