// GPT-2 as a Module: token embedding (wte) + position embedding (wpe),
// embedding dropout, n_layer pre-LN causal transformer layers named
// "h.<i>.…" (GPT-2's names), the final LayerNorm (ln_f) and the LM head
// (tied to wte unless tied_embeddings is false). Input token ids [B, T],
// output logits [B, T, vocab].
#pragma once

#include <memory>
#include <vector>

#include "nn/model.h"
#include "nn/module.h"

namespace ds::nn {

std::unique_ptr<Model> build_gpt(const ModelSpec& spec);

// Parameter elements of a GPT spec (closed formula; tests compare it with
// the built model): V·C + S·C (embeddings) + L·(12C² + 13C) with biases
// (4C·3C… see gpt.cpp) + 2C (ln_f) + V·C when the head is not tied.
int64_t gpt_param_count(const GptSpec& g);

}  // namespace ds::nn
