// The built-in layers a spec names, made, named and initialised (the bridge
// between model_spec.h and the layer classes).
#pragma once

#include <memory>
#include <string>

#include "nn/model.h"
#include "nn/model_spec.h"

namespace ds::nn {

// `range`: the init stddev a transformer layer keeps in its config.
std::unique_ptr<Module> make_layer(const LayerSpec& spec, double range);
// Names a layer (a transformer layer also names its parameters "<name>.…").
void name_layer(Module& layer, const std::string& name);
// transformer_factory.cpp: the DeepSpeed transformer layer of a spec entry,
// and its init when `m` is one (false otherwise).
std::unique_ptr<Module> make_transformer_layer(const LayerSpec& spec, double range);
bool init_transformer_layer(Module& m, uint64_t seed);
std::unique_ptr<Loss> make_cross_entropy(int64_t ignore_index);
std::unique_ptr<Loss> make_loss(const SequentialSpec& spec);
// GPT-2's initialisation: transformer layers through their init_params
// (DeepSpeed's init_transformer_weights: weights normal(0, range), output
// projections / sqrt(2·num_hidden_layers), biases 0, LayerNorm 1/0), each
// from its own stream; every other parameter by its module: LayerNorm
// weight 1, biases 0, weights normal(0, range).
void init_layers(Model& m, uint64_t seed, double range);

}  // namespace ds::nn
