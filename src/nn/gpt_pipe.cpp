// A built GPT cut to one pipeline stage (gpt_pipe.h). The cut happens after
// the Model numbered the modules, named the parameters and initialised them,
// so whatever stays keeps the full model's ids (dropout keys), names and
// values; the Model then collects the stage's parameters again.
#include "nn/gpt_pipe.h"

#include "core/error.h"
#include "nn/gpt.h"
#include "nn/gpt_module.h"
#include "nn/moe_layer.h"

namespace ds::nn {

std::vector<PipeLayerInfo> gpt_pipe_layers(const GptSpec& g) {
    const int64_t C = g.n_embd, V = g.vocab_size, S = g.block_size;
    std::vector<PipeLayerInfo> out;
    out.push_back({"GPTEmbedding", V * C + S * C});
    for (int64_t i = 0; i < g.n_layer; ++i) out.push_back({"TransformerLayer", gpt_layer_local_param_count(g, i)});
    out.push_back({"LayerNorm", 2 * C});
    out.push_back({"LMHead", V * C});  // tied: wte.weight, counted again here
    return out;
}

void Gpt::keep_pipe_layers(int64_t first, int64_t last) {
    const int64_t L = static_cast<int64_t>(h_.size());
    auto held = [&](int64_t layer) { return layer >= first && layer < last; };
    if (held(L + 2) && !held(0) && lm_head_->weight_is_shared()) {
        // The tied head outlives the embedding: it reads a copy of the Param
        // (the same values, shared storage), in a head that keeps its name and id.
        head_weight_ = wte_->weight();
        holds_head_weight_ = true;
        auto head = std::make_unique<Linear>(&head_weight_, /*bias=*/false);
        head->set_name(lm_head_->name());
        head->set_id(lm_head_->id());
        lm_head_ = std::move(head);
    }
    if (!held(L + 2)) lm_head_.reset();
    if (!held(L + 1)) ln_f_.reset();
    std::vector<std::unique_ptr<Module>> kept;
    std::vector<MoeLayer*> kept_moe;  // the MoE layers of the kept transformer layers, in order
    for (int64_t i = 0; i < L; ++i) {
        if (!held(i + 1)) continue;
        for (Module* c : h_[static_cast<size_t>(i)]->children())
            if (auto* moe = dynamic_cast<MoeLayer*>(c)) kept_moe.push_back(moe);
        kept.push_back(std::move(h_[static_cast<size_t>(i)]));
    }
    h_ = std::move(kept);
    moe_layers_ = std::move(kept_moe);  // the loss's aux terms read this list (MoeAux)
    if (!held(0)) {
        drop_.reset();
        wpe_.reset();
        wte_.reset();
    }
}

void cut_gpt_to_stage(Model& m, int64_t first, int64_t last) {
    DS_CHECK(m.spec().type == ModelSpec::Type::Gpt, DS_ERR_INVALID_ARGUMENT,
             "cut_gpt_to_stage: the model is a sequential model; only the built-in GPT can be cut into stages");
    auto* gpt = dynamic_cast<Gpt*>(&m.root());
    DS_CHECK(gpt != nullptr, DS_ERR_INVALID_ARGUMENT, "cut_gpt_to_stage: the model's root is a %s, not a GPT",
             m.root().type());
    const GptSpec& g = m.spec().gpt;
    const PipeStageRange& was = m.pipe_stage();
    DS_CHECK(was.num_layers == 0, DS_ERR_INVALID_ARGUMENT,
             "cut_gpt_to_stage(%lld, %lld): the model is already cut to pipeline layers [%lld, %lld) of %lld",
             static_cast<long long>(first), static_cast<long long>(last), static_cast<long long>(was.first),
             static_cast<long long>(was.last), static_cast<long long>(was.num_layers));
    const int64_t n = g.n_layer + 3;
    DS_CHECK(first >= 0 && first < last && last <= n, DS_ERR_INVALID_ARGUMENT,
             "cut_gpt_to_stage: layers [first = %lld, last = %lld) are not a non-empty range within the GPT's %lld "
             "pipeline layers [0, %lld)",
             static_cast<long long>(first), static_cast<long long>(last), static_cast<long long>(n),
             static_cast<long long>(n));
    DS_CHECK(m.try_acquire(), DS_ERR_INVALID_STATE,
             "cut_gpt_to_stage: an engine is using the model; cut it before binding it to an engine");
    try {
        m.checkpoint_layers(0, false);  // unwraps Checkpointed and LayerScope: the slots hold the layers
        gpt->keep_pipe_layers(first, last);
        IoContract io = m.io();
        io.ids_input = first == 0;
        io.act_width = first == 0 ? 0 : g.n_embd;
        io.in_width = first == 0 ? g.vocab_size : g.n_embd;
        io.act_output = last < n;
        io.out_width = io.act_output ? g.n_embd : g.vocab_size;
        m.set_pipe_stage(PipeStageRange{first, last, n}, io, gpt->layer_slots());
    } catch (...) {
        m.release();
        throw;
    }
    m.release();
}

}  // namespace ds::nn
