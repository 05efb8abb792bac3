// The DeepSpeed transformer layer (nn/transformer_layer.h) for models built
// from a spec: made from a spec entry, named, initialised.
#include "nn/layer_factory.h"
#include "nn/transformer_layer.h"

namespace ds::nn {

std::unique_ptr<Module> make_transformer_layer(const LayerSpec& s, double range) {
    TransformerLayerConfig c;
    c.hidden_size = s.hidden_size;
    c.intermediate_size = s.intermediate_size;
    c.heads = s.heads;
    c.attn_dropout_ratio = static_cast<float>(s.attn_dropout_ratio);
    c.hidden_dropout_ratio = static_cast<float>(s.hidden_dropout_ratio);
    c.num_hidden_layers = 1;
    c.initializer_range = static_cast<float>(range);
    c.layer_norm_eps = static_cast<float>(s.eps);
    c.pre_layer_norm = s.pre_layer_norm;
    c.causal = s.causal;
    c.adjust_init_range = false;
    c.naming = "gpt2";
    return std::make_unique<TransformerLayer>(c);
}

bool init_transformer_layer(Module& m, uint64_t seed) {
    auto* t = dynamic_cast<TransformerLayer*>(&m);
    if (t == nullptr) return false;
    t->init_params(seed);
    return true;
}

void name_layer(Module& layer, const std::string& name) {
    if (auto* t = dynamic_cast<TransformerLayer*>(&layer)) t->set_names(name + ".");
    layer.set_name(name);
}

}  // namespace ds::nn
