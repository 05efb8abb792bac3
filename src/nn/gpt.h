// Building the built-in GPT-2 (the root Module: gpt_module.h) and counting
// its parameters.
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
// Parameter elements of transformer layer i (0-based; an MoE layer's experts
// and gate included).
int64_t gpt_layer_param_count(const GptSpec& g, int64_t i);
// The same with the num_experts / moe.ep_size experts one rank of an expert
// group holds (gpt_layer_param_count when ep_size is 1 or the layer is dense).
int64_t gpt_layer_local_param_count(const GptSpec& g, int64_t i);

}  // namespace ds::nn
