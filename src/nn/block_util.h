// Small helpers the composite layers (attention, MLP, transformer layer)
// share: how a module names itself in messages, and naming a Linear's
// parameters under a prefix. (Activations come from layer_util.h's
// new_activation.)
#pragma once

#include <string>

#include "nn/linear.h"
#include "nn/module.h"

namespace ds::nn {

// " 'h.0.attn'" for a named module, "" for an unnamed one (messages print
// "CausalSelfAttention 'h.0.attn': ...").
inline std::string module_label(const Module& m) {
    return m.name().empty() ? std::string() : " '" + m.name() + "'";
}

// Names module `lin` and its parameters "<name>.weight", "<name>.bias".
void name_linear(Linear& lin, const std::string& name);

}  // namespace ds::nn
