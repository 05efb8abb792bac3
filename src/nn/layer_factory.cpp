#include "nn/layer_factory.h"

#include "core/error.h"

namespace ds::nn {

std::unique_ptr<Module> make_layer(const LayerSpec& spec) {
    fail(DS_ERR_UNSUPPORTED, "layer type \"%s\" is not built yet", layer_kind_name(spec.kind));
}

std::unique_ptr<Loss> make_loss(const SequentialSpec&) {
    fail(DS_ERR_UNSUPPORTED, "losses are not built yet");
}

void init_layers(Model&, uint64_t, double, int64_t) {}

}  // namespace ds::nn
