// TransformerLayer: DeepSpeed's transformer layer (DeepSpeedTransformerLayer,
// deepspeed/ops/transformer/transformer.py) as a Module on [B, T, C]:
//   pre-LN:  x1 = x + drop(attn(ln_1(x)));       y = x1 + drop(mlp(ln_2(x1)))
//   post-LN: x1 = ln_1(x + drop(attn(x)));       y = ln_2(x1 + drop(mlp(x1)))
// attn = CausalSelfAttention (probability dropout attn_dropout_ratio),
// mlp = Mlp with GELU (tanh); both "drop"s use hidden_dropout_ratio.
// The memory options change what forward keeps, never the numbers:
//   attn_dropout_checkpoint: no [B, H, T, T] probabilities, recomputed in backward;
//   gelu_checkpoint:         no GELU input, c_fc's output recomputed in backward;
//   normalize_invertible:    the LayerNorms keep their output, not their input,
//                            and run backward from it.
// Parameter names follow `naming` (docs/MODELS.md, "Layers"): "gpt2" (ln_1,
// attn.c_attn, ... as GPT-2/nanoGPT/llm.c) or "deepspeed" (attn_qkvw, ...).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "nn/attention.h"
#include "nn/layernorm.h"
#include "nn/mlp.h"
#include "nn/module.h"

namespace ds::nn {

// Mirrors DeepSpeedTransformerConfig (its defaults), plus `causal`, `bias`
// and `naming`. batch_size, seed, fp16, local_rank, stochastic_mode,
// return_tuple and training have no counterpart: the batch comes from the
// input, dropout keys from RunContext, precision and training mode from the
// engine.
struct TransformerLayerConfig {
    int64_t hidden_size = -1;
    int64_t intermediate_size = -1;  // <= 0: 4 * hidden_size
    int64_t heads = -1;
    float attn_dropout_ratio = 0.0f;
    float hidden_dropout_ratio = 0.0f;
    int64_t num_hidden_layers = -1;  // used by adjust_init_range
    float initializer_range = 0.02f;
    float layer_norm_eps = 1e-12f;
    bool pre_layer_norm = true;
    bool normalize_invertible = false;
    bool gelu_checkpoint = false;
    bool adjust_init_range = true;
    bool attn_dropout_checkpoint = false;
    bool causal = true;           // ours: GPT (true) or BERT-style (false) attention
    bool bias = true;             // ours: biases on the four Linears
    std::string naming = "gpt2";  // "gpt2" or "deepspeed"
};

class TransformerLayer : public Module {
public:
    // Validates the config: DS_ERR_INVALID_ARGUMENT naming the field.
    explicit TransformerLayer(const TransformerLayerConfig& cfg);

    const char* type() const override { return "TransformerLayer"; }
    std::vector<Module*> children() override;
    Tensor forward(const Tensor& x, RunContext& ctx) override;
    Tensor backward(const Tensor& dy, RunContext& ctx) override;
    void clear_saved() override;

    // Names this module `prefix` without the trailing dot ("h.0.") and every
    // parameter "<prefix><name>" in the config's naming scheme.
    void set_names(const std::string& prefix);
    // DeepSpeed's init_transformer_weights: weights ~ normal(0,
    // initializer_range), the two output projections (attn.c_proj, mlp.c_proj)
    // ~ normal(0, initializer_range / sqrt(2 * num_hidden_layers)) when
    // adjust_init_range, biases 0, LayerNorm weight 1 and bias 0. Each
    // parameter draws from its own stream keyed by (seed, its position), so
    // the values depend on nothing but the seed and the config.
    void init_params(uint64_t seed);

    const TransformerLayerConfig& config() const { return cfg_; }
    LayerNorm& ln_1() { return *ln_1_; }
    LayerNorm& ln_2() { return *ln_2_; }
    CausalSelfAttention& attn() { return *attn_; }
    Mlp& mlp() { return *mlp_; }  // not after replace_mlp
    bool has_mlp() const { return mlp_ != nullptr; }  // false after replace_mlp
    // Puts `ffn` (an MoeLayer, nn/moe_layer.h) where the MLP was: same input,
    // same residual add. The layer then names it "<prefix>mlp" and
    // init_params initialises it (MoeLayer::init_params with the MLP's stds).
    void replace_mlp(std::unique_ptr<Module> ffn);
    Module& ffn() { return ffn_ ? *ffn_ : static_cast<Module&>(*mlp_); }

private:
    TransformerLayerConfig cfg_;
    std::unique_ptr<LayerNorm> ln_1_, ln_2_;
    std::unique_ptr<CausalSelfAttention> attn_;
    std::unique_ptr<Mlp> mlp_;
    std::unique_ptr<Module> ffn_;  // replace_mlp: the MLP's replacement (mlp_ is then null)
    bool have_forward_ = false;
};

// The config check TransformerLayer's constructor runs (spec parsers call it
// to report errors before building): throws DS_ERR_INVALID_ARGUMENT naming
// the field and value.
void validate(const TransformerLayerConfig& cfg);

}  // namespace ds::nn
