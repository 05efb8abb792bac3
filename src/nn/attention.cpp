#include "nn/attention.h"

#include "core/error.h"
#include "nn/block_util.h"
#include "nn/layer_util.h"

namespace ds::nn {

CausalSelfAttention::CausalSelfAttention(int64_t n_embd, int64_t n_head, float attn_pdrop, float resid_pdrop, bool bias,
                                         bool causal)
    : n_embd_(n_embd), n_head_(n_head), local_heads_(n_head), attn_pdrop_(attn_pdrop), causal_(causal) {
    DS_CHECK(n_embd >= 1 && n_head >= 1, DS_ERR_INVALID_ARGUMENT,
             "CausalSelfAttention: n_embd = %lld and n_head = %lld must be >= 1", static_cast<long long>(n_embd),
             static_cast<long long>(n_head));
    DS_CHECK(n_embd % n_head == 0, DS_ERR_INVALID_ARGUMENT,
             "CausalSelfAttention: n_embd = %lld is not a multiple of n_head = %lld", static_cast<long long>(n_embd),
             static_cast<long long>(n_head));
    DS_CHECK(attn_pdrop >= 0.0f && attn_pdrop < 1.0f, DS_ERR_INVALID_ARGUMENT,
             "CausalSelfAttention: attn_pdrop = %g is outside [0, 1)", static_cast<double>(attn_pdrop));
    DS_CHECK(resid_pdrop >= 0.0f && resid_pdrop < 1.0f, DS_ERR_INVALID_ARGUMENT,
             "CausalSelfAttention: resid_pdrop = %g is outside [0, 1)", static_cast<double>(resid_pdrop));
    c_attn_ = std::make_unique<Linear>(n_embd, 3 * n_embd, bias);
    c_proj_ = std::make_unique<Linear>(n_embd, n_embd, bias);
    resid_drop_ = std::make_unique<Dropout>(resid_pdrop);
    set_names("");
}

std::vector<Module*> CausalSelfAttention::children() {
    return {c_attn_.get(), c_proj_.get(), resid_drop_.get()};
}

void CausalSelfAttention::set_names(const std::string& prefix) {
    set_name(prefix.empty() ? std::string() : prefix.substr(0, prefix.size() - 1));
    name_linear(*c_attn_, prefix + "c_attn");
    name_linear(*c_proj_, prefix + "c_proj");
    resid_drop_->set_name(prefix + "resid_dropout");
}

void CausalSelfAttention::shard(std::unique_ptr<Linear> c_attn, std::unique_ptr<Linear> c_proj, int64_t first_head,
                                int64_t local_heads) {
    DS_CHECK(c_attn != nullptr && c_proj != nullptr, DS_ERR_INTERNAL, "%s%s: shard without layers", type(),
             module_label(*this).c_str());
    DS_CHECK(local_heads >= 1 && first_head >= 0 && first_head + local_heads <= n_head_, DS_ERR_INVALID_ARGUMENT,
             "%s%s: heads [%lld, %lld) are not within n_head = %lld", type(), module_label(*this).c_str(),
             static_cast<long long>(first_head), static_cast<long long>(first_head + local_heads),
             static_cast<long long>(n_head_));
    const int64_t cl = local_heads * (n_embd_ / n_head_);
    DS_CHECK(c_attn->in_features() == n_embd_ && c_attn->out_features() == 3 * cl && c_proj->in_features() == cl &&
                 c_proj->out_features() == n_embd_,
             DS_ERR_INVALID_ARGUMENT, "%s%s: c_attn [%lld, %lld] and c_proj [%lld, %lld] do not fit %lld local heads",
             type(), module_label(*this).c_str(), static_cast<long long>(c_attn->out_features()),
             static_cast<long long>(c_attn->in_features()), static_cast<long long>(c_proj->out_features()),
             static_cast<long long>(c_proj->in_features()), static_cast<long long>(local_heads));
    clear_saved();
    c_attn_ = std::move(c_attn);
    c_proj_ = std::move(c_proj);
    first_head_ = first_head;
    local_heads_ = local_heads;
    sharded_ = true;
}

void CausalSelfAttention::core_forward(const float* qkv, float* y, float* probs, const dsk_attention_args& a,
                                       RunContext& ctx) const {
    if (local_heads_ == n_head_ || a.dropout_p == 0.0f) {
        ctx.kernels.attention_forward(qkv, y, probs, a);
        return;
    }
    // The kernel numbers probability (b, h, i, j) ((b*H + h)*T + i)*T + j over
    // the heads it is given; per batch element, an offset of (b*n_head +
    // first_head)*T*T makes that the unsplit layer's index of global head
    // first_head + h.
    const int64_t B = a.batch, T = a.seq, C = a.channels, H = a.heads;
    dsk_attention_args one = a;
    one.batch = 1;
    for (int64_t b = 0; b < B; ++b) {
        one.dropout_key.offset = a.dropout_key.offset + static_cast<uint64_t>((b * n_head_ + first_head_) * T * T);
        ctx.kernels.attention_forward(qkv + b * T * 3 * C, y + b * T * C, probs ? probs + b * H * T * T : nullptr, one);
    }
}

void CausalSelfAttention::core_backward(const float* qkv, const float* probs, const float* dy, float* dqkv,
                                        const dsk_attention_args& a, RunContext& ctx) const {
    if (local_heads_ == n_head_ || a.dropout_p == 0.0f) {
        ctx.kernels.attention_backward(qkv, probs, dy, dqkv, a);
        return;
    }
    const int64_t B = a.batch, T = a.seq, C = a.channels, H = a.heads;
    dsk_attention_args one = a;
    one.batch = 1;
    for (int64_t b = 0; b < B; ++b) {
        one.dropout_key.offset = a.dropout_key.offset + static_cast<uint64_t>((b * n_head_ + first_head_) * T * T);
        ctx.kernels.attention_backward(qkv + b * T * 3 * C, probs ? probs + b * H * T * T : nullptr, dy + b * T * C,
                                       dqkv + b * T * 3 * C, one);
    }
}

Tensor CausalSelfAttention::forward(const Tensor& x, RunContext& ctx) {
    DS_CHECK(x.defined() && x.dtype() == DType::F32 && x.dim() == 3 && x.shape()[2] == n_embd_, DS_ERR_INVALID_ARGUMENT,
             "%s%s: input must be float32 [batch, seq, %lld], got %s%s", type(), module_label(*this).c_str(),
             static_cast<long long>(n_embd_), x.defined() ? shape_to_string(x.shape()).c_str() : "an undefined tensor",
             x.defined() && x.dtype() != DType::F32 ? " (not float32)" : "");
    drop_saved();
    // C: the channels of this rank's heads (all of n_embd unless sharded).
    const int64_t B = x.shape()[0], T = x.shape()[1], C = local_heads_ * (n_embd_ / n_head_);
    Tensor qkv = call_forward(*c_attn_, x, ctx).view({B, T, 3 * C});

    dsk_attention_args a{};
    a.batch = B;
    a.seq = T;
    a.channels = C;
    a.heads = local_heads_;
    a.causal = causal_ ? 1 : 0;
    a.dropout_p = ctx.training ? attn_pdrop_ : 0.0f;
    a.dropout_key = Dropout::key(ctx, id());  // the Dropout layer's stream for this module
    a.bf16_products = ctx.matmul_dtype == DType::BF16 ? 1 : 0;  // as nn::Linear's products

    Tensor y = new_activation({B, T, C}, ctx);
    Tensor probs;
    if (ctx.training && !recompute_probs_) probs = new_activation({B, local_heads_, T, T}, ctx);
    core_forward(qkv.data<float>(), y.data<float>(), probs.defined() ? probs.data<float>() : nullptr, a, ctx);
    const double hd = static_cast<double>(n_embd_ / n_head_);
    count_.macs = 2.0 * static_cast<double>(B) * static_cast<double>(local_heads_) * static_cast<double>(T) *
                  static_cast<double>(T) * hd;
    count_.flops = 2.0 * count_.macs;
    if (ctx.training) {
        qkv_ = qkv;
        probs_ = probs;
        args_ = a;
        in_shape_ = x.shape();
        saved_bytes_ = static_cast<int64_t>(qkv.nbytes() + (probs.defined() ? probs.nbytes() : 0));
        meter_ = ctx.meter;
        if (meter_ != nullptr) meter_->add(saved_bytes_);
    }
    Tensor z = call_forward(*c_proj_, y, ctx);
    return call_forward(*resid_drop_, z, ctx);
}

Tensor CausalSelfAttention::backward(const Tensor& dy, RunContext& ctx) {
    DS_CHECK(qkv_.defined(), DS_ERR_INVALID_STATE, "%s%s: backward without a training forward (nothing saved)", type(),
             module_label(*this).c_str());
    Tensor dz = resid_drop_->backward(dy, ctx);
    Tensor dyatt = c_proj_->backward(dz, ctx);
    DS_CHECK(dyatt.numel() == args_.batch * args_.seq * args_.channels, DS_ERR_INTERNAL, "%s%s: c_proj returned %s",
             type(), module_label(*this).c_str(), shape_to_string(dyatt.shape()).c_str());
    Tensor dqkv = new_activation(qkv_.shape(), ctx);
    core_backward(qkv_.data<float>(), probs_.defined() ? probs_.data<float>() : nullptr, dyatt.data<float>(),
                  dqkv.data<float>(), args_, ctx);
    drop_saved();
    return c_attn_->backward(dqkv, ctx);
}

void CausalSelfAttention::clear_saved() {
    drop_saved();
    for (Module* c : children()) c->clear_saved();
}

void CausalSelfAttention::drop_saved() {
    if (meter_ != nullptr && saved_bytes_ != 0) meter_->sub(saved_bytes_);
    saved_bytes_ = 0;
    meter_ = nullptr;
    qkv_ = Tensor();
    probs_ = Tensor();
}

}  // namespace ds::nn
