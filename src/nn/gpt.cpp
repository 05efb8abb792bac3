#include "nn/gpt.h"

#include "core/error.h"

namespace ds::nn {

int64_t gpt_param_count(const GptSpec& g) {
    const int64_t C = g.n_embd, V = g.vocab_size, S = g.block_size, L = g.n_layer;
    const int64_t b = g.bias ? 1 : 0;
    // per layer: ln_1 (2C), c_attn (3C² + 3C·b), attn c_proj (C² + C·b),
    // ln_2 (2C), c_fc (4C² + 4C·b), mlp c_proj (4C² + C·b)
    const int64_t layer = 4 * C + 12 * C * C + 9 * C * b;
    return V * C + S * C + L * layer + 2 * C + (g.tied_embeddings ? 0 : V * C + (g.bias ? V : 0));
}

std::unique_ptr<Model> build_gpt(const ModelSpec&) {
    fail(DS_ERR_UNSUPPORTED, "type: \"gpt\" models need the transformer layer, which is not built yet");
}

}  // namespace ds::nn
