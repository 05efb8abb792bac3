// CausalSelfAttention: GPT-2's attention block as nanoGPT writes it,
//   qkv = c_attn(x)            Linear(C, 3C)
//   y   = attention(qkv)       H heads, scale 1/sqrt(C/H), causal mask,
//                              dropout attn_pdrop on the probabilities
//   out = resid_drop(c_proj(y))  Linear(C, C), then dropout resid_pdrop
// Input and output are [B, T, C]. The attention core runs the fused-qkv
// kernel (kernels/nn_attention.h); its dropout mask is keyed by
// (ctx.seed, ctx.forward_index, this module's id), so it is regenerated, not
// stored. With recompute_probs (DeepSpeed's attn_dropout_checkpoint) forward
// keeps no [B, H, T, T] probabilities and backward recomputes them from qkv:
// the numbers are identical, the bytes kept drop by B*H*T*T floats.
// Tensor parallelism (nn/tp_transformer.h) replaces c_attn and c_proj by a
// column- and a row-parallel layer and runs the core on this rank's heads
// [first_head, first_head + local_heads); the probability dropout of local
// head h uses global head first_head + h in its element index, so the masks
// are those of the unsplit layer.
#pragma once

#include <cstdint>
#include <memory>

#include "nn/dropout.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace ds::nn {

class CausalSelfAttention : public Module {
public:
    // n_embd % n_head must be 0 and the dropouts in [0, 1), else
    // DS_ERR_INVALID_ARGUMENT naming the value. causal = false gives
    // BERT-style (unmasked) attention.
    CausalSelfAttention(int64_t n_embd, int64_t n_head, float attn_pdrop, float resid_pdrop, bool bias,
                        bool causal = true);

    const char* type() const override { return "CausalSelfAttention"; }
    std::vector<Module*> children() override;
    Tensor forward(const Tensor& x, RunContext& ctx) override;
    Tensor backward(const Tensor& dy, RunContext& ctx) override;
    void clear_saved() override;
    // The attention core, counted as torch's scaled_dot_product_attention:
    // MACs = numel(q)*T + B*H*T*T*hd = 2*B*H*T*T*hd, flops = 2*MACs.
    OpCount op_count() const override { return count_; }

    // Names the children "<prefix>c_attn", "<prefix>c_proj", "<prefix>resid_dropout"
    // and their parameters "<prefix>c_attn.weight", ... (prefix "h.0.attn.").
    void set_names(const std::string& prefix);
    void set_recompute_probs(bool on) { recompute_probs_ = on; }
    bool recompute_probs() const { return recompute_probs_; }

    // Tensor parallelism: `c_attn` (a column-parallel layer computing the
    // q, k, v of heads [first_head, first_head + local_heads)) and `c_proj`
    // (a row-parallel layer reading those heads' outputs) replace the
    // layer's Linears. DS_ERR_INVALID_ARGUMENT when the head range is not
    // within n_head or the layers' shapes do not match it.
    void shard(std::unique_ptr<Linear> c_attn, std::unique_ptr<Linear> c_proj, int64_t first_head,
               int64_t local_heads);
    bool sharded() const { return sharded_; }  // shard() ran (even over a group of one)
    int64_t first_head() const { return first_head_; }
    int64_t local_heads() const { return local_heads_; }

    Linear& c_attn() { return *c_attn_; }
    Linear& c_proj() { return *c_proj_; }
    Dropout& resid_dropout() { return *resid_drop_; }
    int64_t n_embd() const { return n_embd_; }
    int64_t n_head() const { return n_head_; }
    float attn_pdrop() const { return attn_pdrop_; }
    bool causal() const { return causal_; }

private:
    void drop_saved();  // this module's own saved tensors
    // The core on this rank's heads: one kernel call, or (sharded, with
    // dropout) one per batch element with the dropout offset of its global heads.
    void core_forward(const float* qkv, float* y, float* probs, const dsk_attention_args& a, RunContext& ctx) const;
    void core_backward(const float* qkv, const float* probs, const float* dy, float* dqkv, const dsk_attention_args& a,
                       RunContext& ctx) const;

    int64_t n_embd_, n_head_;
    int64_t first_head_ = 0, local_heads_;  // the heads this rank computes (all of them unless sharded)
    bool sharded_ = false;
    float attn_pdrop_;
    bool causal_;
    bool recompute_probs_ = false;
    std::unique_ptr<Linear> c_attn_, c_proj_;
    std::unique_ptr<Dropout> resid_drop_;

    // Saved by a training forward for backward.
    Tensor qkv_, probs_;
    dsk_attention_args args_{};
    int64_t saved_bytes_ = 0;
    Shape in_shape_;
    ActivationMeter* meter_ = nullptr;
    OpCount count_;
};

}  // namespace ds::nn
