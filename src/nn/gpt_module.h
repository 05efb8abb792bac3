// The GPT-2 root Module (built by build_gpt, gpt.cpp) and what a pipeline
// stage keeps of it (cut by cut_gpt_to_stage, gpt_pipe.cpp).
//
// Uncut: token embedding (wte) + position embedding (wpe), embedding
// dropout, n_layer pre-LN causal transformer layers named "h.<i>.…" (GPT-2's
// names), the final LayerNorm (ln_f) and the LM head (tied to wte unless
// tied_embeddings is false). Input token ids [B, T], output logits [B, T, V].
//
// Cut to pipeline layers [first, last) (gpt_pipe.h: 0 the embedding, 1..L
// the transformer layers, L+1 ln_f, L+2 the head): the modules of the other
// layers are gone; without the embedding the input is float32 activations
// [B, T, C], without the head the output is the activations [B, T, C].
#pragma once

#include <memory>
#include <vector>

#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/layernorm.h"
#include "nn/linear.h"
#include "nn/model_spec.h"
#include "nn/module.h"

namespace ds::nn {

class MoeLayer;

class Gpt final : public Module {
public:
    explicit Gpt(const GptSpec& g);

    const char* type() const override { return "GPT"; }
    std::vector<Module*> children() override;
    // Empty, except on a stage that holds a tied head without the embedding:
    // then the head's weight ("wte.weight"), which no child owns.
    std::vector<Param*> own_params() override;
    Tensor forward(const Tensor& x, RunContext& ctx) override;
    Tensor backward(const Tensor& dy, RunContext& ctx) override;
    void clear_saved() override;

    const std::vector<MoeLayer*>& moe_layers() const { return moe_layers_; }
    // The transformer layers' owning slots, in forward order (activation
    // checkpointing replaces what they hold).
    std::vector<std::unique_ptr<Module>*> layer_slots();

    // gpt_pipe.cpp: destroys every module outside pipeline layers
    // [first, last) (the caller has checked the range and unwrapped the
    // layer slots); ids and names of what stays are untouched.
    void keep_pipe_layers(int64_t first, int64_t last);

private:
    Tensor embed(const Tensor& ids, RunContext& ctx);
    void embed_backward(const Tensor& dx, RunContext& ctx);

    GptSpec g_;
    std::unique_ptr<Embedding> wte_, wpe_;  // null on a stage without layer 0
    std::unique_ptr<Dropout> drop_;         // null on a stage without layer 0
    std::vector<std::unique_ptr<Module>> h_;  // the transformer layers this model holds
    std::unique_ptr<LayerNorm> ln_f_;       // null on a stage without it
    std::unique_ptr<Linear> lm_head_;       // null on a stage without it
    // A tied head's weight kept after the embedding was cut away (the head
    // reads it; same name, same values as wte.weight).
    Param head_weight_;
    bool holds_head_weight_ = false;
    int64_t batch_ = 0, seq_ = 0;
    std::vector<MoeLayer*> moe_layers_;  // owned by their transformer layers
};

}  // namespace ds::nn
