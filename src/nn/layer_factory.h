// The built-in layers a spec names, made and initialised (the bridge between
// model_spec.h and the layer classes).
#pragma once

#include <memory>

#include "nn/model.h"
#include "nn/model_spec.h"

namespace ds::nn {

std::unique_ptr<Module> make_layer(const LayerSpec& spec);
std::unique_ptr<Loss> make_loss(const SequentialSpec& spec);
// GPT-2's initialisation over every parameter of `m` by its module's type:
// LayerNorm weight 1 / bias 0; other weights normal(0, range) (output
// projections named "*.c_proj.weight" scaled by 1/sqrt(2 n_layer) when
// n_layer > 0); other biases 0.
void init_layers(Model& m, uint64_t seed, double range, int64_t n_layer = 0);

}  // namespace ds::nn
