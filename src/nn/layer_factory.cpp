#include "nn/layer_factory.h"

#include <cmath>
#include <string>
#include <unordered_set>

#include "core/error.h"
#include "nn/checkpointed.h"
#include "nn/cross_entropy.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/gelu.h"
#include "nn/layernorm.h"
#include "nn/linear.h"

namespace ds::nn {

namespace {

bool ends_with(const std::string& s, const char* tail) {
    const size_t n = std::char_traits<char>::length(tail);
    return s.size() >= n && s.compare(s.size() - n, n, tail) == 0;
}

uint64_t mix(uint64_t seed, uint64_t i) {
    uint64_t x = seed + 0x9E3779B97F4A7C15ull * (i + 1);
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

void init_tree(Module& m, uint64_t seed, double range, std::unordered_set<Param*>& done, uint64_t& layer_index) {
    Module* inner = &m;
    if (auto* c = dynamic_cast<Checkpointed*>(inner)) inner = &c->inner();
    // A transformer layer: DeepSpeed's init_transformer_weights (GPT-2's with
    // adjust_init_range), each layer from its own stream.
    if (init_transformer_layer(*inner, mix(seed, layer_index))) {
        ++layer_index;
        for (Param* p : all_params(*inner)) done.insert(p);
        return;
    }
    const bool norm = std::string(m.type()) == "LayerNorm";
    for (Param* p : m.own_params()) {
        if (!done.insert(p).second) continue;
        if (ends_with(p->name, "bias"))
            init_constant(*p, 0.0f);
        else if (norm)
            init_constant(*p, 1.0f);
        else
            init_normal(*p, seed, range);
    }
    for (Module* c : m.children()) init_tree(*c, seed, range, done, layer_index);
}

}  // namespace

std::unique_ptr<Module> make_layer(const LayerSpec& s, double range) {
    switch (s.kind) {
        case LayerSpec::Kind::Linear: return std::make_unique<Linear>(s.in_features, s.out_features, s.bias);
        case LayerSpec::Kind::Gelu: return std::make_unique<Gelu>();
        case LayerSpec::Kind::LayerNorm: return std::make_unique<LayerNorm>(s.dim, static_cast<float>(s.eps));
        case LayerSpec::Kind::Dropout: return std::make_unique<Dropout>(static_cast<float>(s.p));
        case LayerSpec::Kind::Embedding: return std::make_unique<Embedding>(s.num_embeddings, s.embedding_dim);
        case LayerSpec::Kind::TransformerLayer: return make_transformer_layer(s, range);
    }
    fail(DS_ERR_INTERNAL, "unknown layer kind");
}


std::unique_ptr<Loss> make_cross_entropy(int64_t ignore_index) {
    return std::make_unique<CrossEntropyLoss>(ignore_index);
}

std::unique_ptr<Loss> make_loss(const SequentialSpec& spec) {
    if (spec.loss == SequentialSpec::LossKind::CrossEntropy) return make_cross_entropy(spec.ignore_index);
    return std::make_unique<MSELoss>();
}

void init_layers(Model& m, uint64_t seed, double range) {
    std::unordered_set<Param*> done;
    uint64_t layer_index = 0;
    init_tree(m.root(), seed, range, done, layer_index);
}

}  // namespace ds::nn
