#include "engine/tensor_parallel_engine.h"

#include <cstring>
#include <vector>

#include <cjson/cJSON.h>

#include "comm/factory.h"
#include "core/error.h"
#include "engine/norm_across.h"
#include "engine/shard_layout.h"
#include "nn/model.h"
#include "nn/tp_transformer.h"
#include "pipe/topology.h"

namespace ds::tp {

namespace {

// The child of `obj` named exactly `key` (cJSON's own lookup ignores case).
const cJSON* child(const cJSON* obj, const char* key) {
    if (!cJSON_IsObject(obj)) return nullptr;
    for (const cJSON* c = obj->child; c != nullptr; c = c->next)
        if (c->string != nullptr && std::strcmp(c->string, key) == 0) return c;
    return nullptr;
}

}  // namespace

int64_t autotp_size(const std::string& config_json) {
    cJSON* root = cJSON_ParseWithLength(config_json.data(), config_json.size());
    if (root == nullptr) return 0;
    const cJSON* n = child(child(root, "tensor_parallel"), "autotp_size");
    int64_t size = 0;
    if (cJSON_IsNumber(n) && n->valuedouble >= 0 && n->valuedouble <= 65536 &&
        n->valuedouble == static_cast<double>(static_cast<int64_t>(n->valuedouble)))
        size = static_cast<int64_t>(n->valuedouble);
    cJSON_Delete(root);
    return size;
}

void shard_model(nn::Model& model, const std::shared_ptr<comm::Communicator>& mp, int tp_rank, int N) {
    DS_CHECK(!model.spec().gpt.moe.enable_expert_tensor_parallelism, DS_ERR_UNSUPPORTED,
             "model spec moe.enable_expert_tensor_parallelism = true with tensor_parallel.autotp_size = %d: "
             "experts split by tensor parallelism are not built; false (DeepSpeed's default) keeps each MoE layer "
             "whole on every tensor-parallel rank",
             N);
    for (int64_t i = 0; i < model.checkpointable_layers(); ++i) {
        auto* layer = dynamic_cast<nn::TransformerLayer*>(&model.layer(static_cast<size_t>(i)));
        DS_CHECK(layer != nullptr, DS_ERR_INTERNAL, "tensor parallelism: layer %lld is no TransformerLayer",
                 static_cast<long long>(i));
        try {
            nn::shard_transformer_layer(*layer, mp.get(), tp_rank, N);
        } catch (const Error& err) {
            throw Error(err.status(), format("tensor_parallel.autotp_size = %d: %s", N, err.what()));
        }
    }
    model.refresh_params();
    model.hold(mp);  // the layers' all-reduces use it for the model's life
}

void exclude_replicated_from_norm(Engine& e, nn::Model& model, int tp_rank) {
    if (tp_rank == 0) return;
    for (nn::Param* p : nn::tp_param_split(model.root()).replicated)
        if (e.params().contains(p->name)) e.params().get(p->name.c_str()).norm_excluded = true;
}

std::unique_ptr<Engine> create_tp_engine(const std::string& config_json, const EngineOptions& options,
                                         std::shared_ptr<comm::Communicator> world, std::shared_ptr<nn::Model> model,
                                         int64_t tp_size) {
    if (!world) world = comm::make_world(comm::options_from_env());
    const int W = world->size();
    const int N = static_cast<int>(tp_size);
    DS_CHECK(W % N == 0, DS_ERR_INVALID_CONFIG,
             "tensor_parallel.autotp_size = %d does not divide the world size %d (the world is data x model)", N, W);
    const nn::ModelSpec& spec = model->spec();
    DS_CHECK(spec.type == nn::ModelSpec::Type::Gpt, DS_ERR_UNSUPPORTED,
             "tensor_parallel.autotp_size = %d: tensor parallelism splits the built-in GPT's transformer layers; this "
             "model is not a GPT",
             N);
    DS_CHECK(spec.gpt.pipeline.stages <= 1, DS_ERR_INTERNAL,
             "create_tp_engine on a pipeline model (create_stage_engine splits its stages)");
    // DeepSpeed's groups: the N ranks of a model-parallel group are consecutive.
    pipe::ProcessTopology topo({"data", "model"}, {W / N, N});
    const int tp_rank = topo.coord_of(world->rank())[1];
    std::shared_ptr<comm::Communicator> mp = topo.comm(world, {"model"});
    std::shared_ptr<comm::Communicator> data = topo.comm(world, {"data"});

    EngineOptions shard_options = options;
    shard_options.monitor_rank = world->rank();  // only world rank 0 writes the monitors' files
    auto e = std::make_unique<Engine>(config_json, shard_options, data);
    shard_model(*model, mp, tp_rank, N);
    e->require_cpu_engine("a tensor-parallel model (tensor_parallel.autotp_size > 1)");
    e->attach_model(model);
    exclude_replicated_from_norm(*e, *model, tp_rank);
    e->set_norm_combiner(norm_sum_over(mp));
    // Checkpoints describe the logical model (engine/shard_layout.h).
    e->set_shard_layout(build_shard_layout(*model, world));
    return e;
}

}  // namespace ds::tp
