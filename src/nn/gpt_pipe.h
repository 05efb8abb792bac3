// The built-in GPT as a pipeline sees it (DeepSpeed's PipelineModule layer
// list) and a built GPT cut down to one pipeline stage's layers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/model.h"
#include "nn/model_spec.h"

namespace ds::nn {

// One pipeline layer: its type and its parameter elements.
struct PipeLayerInfo {
    std::string type;
    int64_t params = 0;
};

// L + 3 entries: 0 "GPTEmbedding" (wte + wpe + embedding dropout),
// 1..L "TransformerLayer" (h.0..h.{L-1}; an MoE layer too), L+1 "LayerNorm"
// (ln_f), L+2 "LMHead". A tied head counts V*C, as DeepSpeed's TiedLayerSpec
// counts the tied module on both stages that hold it. An MoE layer counts
// the num_experts / moe.ep_size experts a rank holds: DeepSpeed counts each
// LayerSpec as built on the rank, and MoE(ep_size) builds its local experts.
std::vector<PipeLayerInfo> gpt_pipe_layers(const GptSpec& g);

// Cuts a built GPT (build_model of a "gpt" spec, parameters initialised) to
// pipeline layers [first, last): the other layers' modules are destroyed.
// Afterwards root().forward takes token ids [B, T] (first == 0) or float32
// activations [B, T, C] and returns activations [B, T, C], or the logits
// when last == L + 3; backward returns dx [B, T, C] (first > 0) or an
// undefined Tensor. params() holds only this stage's parameters, with the
// full model's names and initial values (a tied head without the embedding
// holds "wte.weight"); every module keeps its id (the dropout masks equal the
// full model's); the checkpointable layers are this stage's transformer
// layers; io() and pipe_stage() describe the stage. MoE layers stay in their
// transformer layers; the model's aux_loss() then covers this stage's MoE
// layers only (the loss, on the last stage, adds the last stage's terms).
// Any activation checkpointing or layer scoping is undone first.
// Errors: DS_ERR_INVALID_ARGUMENT for a non-GPT model, a model already cut or
// a bad range; DS_ERR_INVALID_STATE while an engine holds the model.
void cut_gpt_to_stage(Model& m, int64_t first, int64_t last);

}  // namespace ds::nn
