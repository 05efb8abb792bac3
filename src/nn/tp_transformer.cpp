#include "nn/tp_transformer.h"

#include <functional>
#include <string>

#include "core/error.h"
#include "nn/block_util.h"
#include "nn/tp_linear.h"

namespace ds::nn {

void shard_transformer_layer(TransformerLayer& layer, comm::Communicator* c, int rank, int size) {
    const TransformerLayerConfig& cfg = layer.config();
    const std::string label = module_label(layer);  // " 'h.0'" or ""
    const char* where = label.c_str();
    DS_CHECK(size >= 1, DS_ERR_INVALID_ARGUMENT, "shard_transformer_layer%s: size = %d must be >= 1", where, size);
    DS_CHECK(cfg.heads % size == 0, DS_ERR_INVALID_ARGUMENT,
             "shard_transformer_layer%s: n_head (heads) = %lld is not a multiple of the tensor-parallel size %d",
             where, static_cast<long long>(cfg.heads), size);
    // An MoE layer in place of the MLP stays whole on every rank (DeepSpeed's
    // default, enable_expert_tensor_parallelism = false): its input follows
    // the attention's row-parallel all-reduce, so every rank computes the same
    // routes and outputs, as for a LayerNorm.
    const bool dense = layer.has_mlp();
    DS_CHECK(!dense || cfg.intermediate_size % size == 0, DS_ERR_INVALID_ARGUMENT,
             "shard_transformer_layer%s: the MLP's inner size (intermediate_size, 4 * hidden by default) = %lld "
             "is not a multiple of the tensor-parallel size %d",
             where, static_cast<long long>(cfg.intermediate_size), size);
    DS_CHECK(!layer.attn().sharded() && !(dense && layer.mlp().sharded()), DS_ERR_INVALID_STATE,
             "shard_transformer_layer%s: the layer is already sharded", where);
    const TpGroup g = make_tp_group(c, rank, size);

    CausalSelfAttention& attn = layer.attn();
    const int64_t local_heads = cfg.heads / size;
    // Build every replacement before installing any, so an error leaves the layer whole.
    auto qkv = ColumnParallelLinear::shard(attn.c_attn(), g, /*blocks=*/3);
    auto attn_out = RowParallelLinear::shard(attn.c_proj(), g);
    std::unique_ptr<ColumnParallelLinear> fc;
    std::unique_ptr<RowParallelLinear> mlp_out;
    if (dense) {
        fc = ColumnParallelLinear::shard(layer.mlp().c_fc(), g);
        mlp_out = RowParallelLinear::shard(layer.mlp().c_proj(), g);
    }
    attn.shard(std::move(qkv), std::move(attn_out), rank * local_heads, local_heads);
    if (dense) layer.mlp().shard(std::move(fc), std::move(mlp_out));
}

TpParamSplit tp_param_split(Module& root) {
    TpParamSplit out;
    std::function<void(Module&)> walk = [&](Module& m) {
        const bool column = dynamic_cast<ColumnParallelLinear*>(&m) != nullptr;
        auto* row = dynamic_cast<RowParallelLinear*>(&m);
        for (Param* p : m.own_params()) {
            const bool split = column || (row != nullptr && p == &row->weight());
            (split ? out.split : out.replicated).push_back(p);
        }
        for (Module* child : m.children()) walk(*child);
    };
    walk(root);
    return out;
}

}  // namespace ds::nn
