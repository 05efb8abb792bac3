// The DeepSpeed transformer layer for models built from a spec.
#include "core/error.h"
#include "nn/layer_factory.h"

namespace ds::nn {

std::unique_ptr<Module> make_transformer_layer(const LayerSpec&, double) {
    fail(DS_ERR_UNSUPPORTED, "the transformer layer is not built yet");
}

bool init_transformer_layer(Module&, uint64_t) { return false; }

void name_layer(Module& layer, const std::string& name) { layer.set_name(name); }

}  // namespace ds::nn
