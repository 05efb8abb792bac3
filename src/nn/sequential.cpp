#include "nn/sequential.h"

#include <string>

#include "core/error.h"
#include "nn/layer_factory.h"

namespace ds::nn {

std::vector<Module*> Sequential::children() {
    std::vector<Module*> out;
    out.reserve(layers_.size());
    for (auto& l : layers_) out.push_back(l.get());
    return out;
}

void Sequential::add(std::unique_ptr<Module> layer) {
    name_layer(*layer, std::to_string(layers_.size()));
    layers_.push_back(std::move(layer));
}

Tensor Sequential::forward(const Tensor& x, RunContext& ctx) {
    Tensor h = x;
    for (auto& l : layers_) h = call_forward(*l, h, ctx);
    return h;
}

Tensor Sequential::backward(const Tensor& dy, RunContext& ctx) {
    Tensor g = dy;
    for (size_t i = layers_.size(); i-- > 0;) g = layers_[i]->backward(g, ctx);
    return g;
}

void Sequential::clear_saved() {
    for (auto& l : layers_) l->clear_saved();
}

std::unique_ptr<Model> build_sequential(const ModelSpec& spec) {
    const SequentialSpec& s = spec.sequential;
    auto root = std::make_unique<Sequential>();
    std::vector<std::unique_ptr<Module>*> slots;
    for (const LayerSpec& l : s.layers) root->add(make_layer(l, s.initializer_range));
    for (size_t i = 0; i < s.layers.size(); ++i)  // after the vector stops growing
        if (s.layers[i].kind == LayerSpec::Kind::TransformerLayer) slots.push_back(&root->layers()[i]);
    IoContract io;
    io.ids_input = s.ids_input;
    io.in_width = s.ids_input ? s.layers.front().num_embeddings : s.in_width;
    io.out_width = s.out_width;
    io.class_targets = s.loss == SequentialSpec::LossKind::CrossEntropy;
    std::unique_ptr<Loss> loss = make_loss(s);
    auto m = std::make_unique<Model>(spec, std::move(root), std::move(loss), io, std::move(slots));
    init_layers(*m, s.seed, s.initializer_range);
    return m;
}

}  // namespace ds::nn
