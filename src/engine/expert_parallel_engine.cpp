#include "engine/expert_parallel_engine.h"

#include <algorithm>
#include <vector>

#include "comm/factory.h"
#include "comm/tensor_collectives.h"
#include "core/device_memory.h"
#include "core/error.h"
#include "core/kernel_backend.h"
#include "engine/norm_across.h"
#include "engine/parallel_groups.h"
#include "engine/shard_layout.h"
#include "engine/tensor_parallel_engine.h"
#include "nn/model.h"
#include "nn/moe_ep.h"
#include "nn/moe_layer.h"

namespace ds::ep {

namespace {

// Every MoE layer of the model's tree, in forward order.
void collect_moe(nn::Module& m, std::vector<nn::MoeLayer*>* out) {
    if (auto* moe = dynamic_cast<nn::MoeLayer*>(&m)) out->push_back(moe);
    for (nn::Module* c : m.children()) collect_moe(*c, out);
}

}  // namespace

bool is_expert_parallel_model(const nn::Model& m) {
    return m.spec().type == nn::ModelSpec::Type::Gpt && m.spec().gpt.moe.enabled && m.spec().gpt.moe.ep_size > 1;
}

void check_expert_parallel_engine(const Engine& e, int P) {
    DS_CHECK(e.config().zero_optimization.stage <= 1, DS_ERR_UNSUPPORTED,
             "zero_optimization.stage = %lld with model spec moe.ep_size = %d: expert parallelism is built for ZeRO "
             "stages 0 and 1 (the gradients are reduced over the expert group at the boundary, while stages 2 and 3 "
             "reduce them during the backward)",
             static_cast<long long>(e.config().zero_optimization.stage), P);
    DS_CHECK(!e.config().use_data_before_expert_parallelism, DS_ERR_UNSUPPORTED,
             "use_data_before_expert_parallelism = true with model spec moe.ep_size = %d: DeepSpeed's D + E layout "
             "(expert-data groups of consecutive ranks, expert groups strided) is not built; the expert groups are "
             "ep_size consecutive data-parallel replicas (E + D)",
             P);
    DS_CHECK(e.grad_dtype() == DType::F32, DS_ERR_UNSUPPORTED,
             "model spec moe.ep_size = %d with %s gradient buffers (data_types.grad_accum_dtype): expert parallelism "
             "is built for fp32 gradient accumulation",
             P, dtype_name(e.grad_dtype()));
}

void exchange_experts_on_device(nn::Model& model, const std::shared_ptr<comm::Communicator>& device_group) {
    std::vector<nn::MoeLayer*> layers;
    collect_moe(model.root(), &layers);
    for (nn::MoeLayer* l : layers)
        if (l->ep_group().size > 1) l->use_device_exchange(device_group.get());
    model.hold(device_group);  // the layers' device all-to-alls use it for the model's life
}

void shard_experts(nn::Model& model, const std::shared_ptr<comm::Communicator>& group, int ep_rank, int P) {
    std::vector<nn::MoeLayer*> layers;
    collect_moe(model.root(), &layers);
    for (nn::MoeLayer* l : layers) {
        try {
            nn::shard_moe_layer(*l, group.get(), ep_rank, P);
        } catch (const Error& err) {
            throw Error(err.status(), format("model spec moe.ep_size = %d: %s", P, err.what()));
        }
    }
    model.refresh_params();
    model.hold(group);  // the layers' all-to-alls use it for the model's life
}

void reduce_over_expert_group(Engine& e, nn::Model& model, std::shared_ptr<comm::Communicator> group, int ep_rank,
                              int P, std::shared_ptr<comm::Communicator> device_group) {
    const nn::MoeParamSplit split = nn::moe_expert_params(model.root());
    std::vector<std::string> experts, shared;
    for (nn::Param* p : split.expert) experts.push_back(p->name);
    for (nn::Param* p : split.replicated)
        if (p->trainable) shared.push_back(p->name);
    if (ep_rank != 0)
        for (const std::string& n : shared)
            if (e.params().contains(n)) e.params().get(n.c_str()).norm_excluded = true;
    Engine* eng = &e;
    // Gradients in device memory (a device-resident engine) are scaled by the
    // device's kernel and averaged over the device communicator; host ones
    // (CPU and ZeRO-Offload engines) as before.
    e.set_pre_reduce([eng, group, device_group, experts, shared, P] {
        const float inv = 1.0f / static_cast<float>(P);
        for (const std::string& n : experts) {
            Param& p = eng->params().get(n.c_str());
            ParamStore::clear_if_stale(p);
            if (p.grad.device().is_cpu()) {
                float* g = p.grad.data<float>();
                for (int64_t i = 0; i < p.grad.numel(); ++i) g[i] *= inv;
            } else {
                const device_memory::DeviceScope on(p.grad.device().index);
                kernels_for(p.grad.device()).scale(p.grad.data_ptr(), DSK_F32, inv, static_cast<size_t>(p.grad.numel()));
            }
            p.norm_cached = false;
        }
        for (const std::string& n : shared) {
            Param& p = eng->params().get(n.c_str());
            ParamStore::clear_if_stale(p);
            const bool on_host = p.grad.device().is_cpu();
            DS_CHECK(on_host || device_group, DS_ERR_INTERNAL,
                     "expert parallelism: the gradient of '%s' is on %s, but the expert group has no device "
                     "communicator", n.c_str(), p.grad.device().str().c_str());
            if (on_host)
                comm::all_reduce_tensor(*group, p.grad, comm::Op::Avg);
            else  // in place on the device (fp32, contiguous: the engine's gradient buffer)
                device_group->allreduce(p.grad.data_ptr(), p.grad.data_ptr(), static_cast<size_t>(p.grad.numel()),
                                        DType::F32, comm::Op::Avg);
            p.norm_cached = false;
        }
    });
}

std::unique_ptr<Engine> create_ep_engine(const std::string& config_json, const EngineOptions& options,
                                         std::shared_ptr<comm::Communicator> world, std::shared_ptr<nn::Model> model) {
    if (!world) world = comm::make_world(comm::options_from_env());
    const int W = world->size();
    const int P = static_cast<int>(model->spec().gpt.moe.ep_size);
    // With tensor_parallel.autotp_size = N > 1: data x model, expert groups of
    // P consecutive replicas of one tp rank (engine/parallel_groups.h).
    const int N = static_cast<int>(std::max<int64_t>(1, tp::autotp_size(config_json)));
    DS_CHECK(model->spec().gpt.pipeline.stages <= 1, DS_ERR_INTERNAL,
             "create_ep_engine on a pipeline model (create_stage_engine builds its stages)");
    DS_CHECK(W % N == 0, DS_ERR_INVALID_CONFIG,
             "tensor_parallel.autotp_size = %d does not divide the world size %d (the world is data x model)", N, W);
    DS_CHECK(N > 1 || W % P == 0, DS_ERR_INVALID_ARGUMENT,
             "model spec moe.ep_size = %d does not divide the world size %d (the world is replicas x expert groups)",
             P, W);
    DS_CHECK((W / N) % P == 0, DS_ERR_INVALID_ARGUMENT,
             "model spec moe.ep_size = %d does not divide the %d data-parallel replicas (the world of %d ranks is "
             "data x model with tensor_parallel.autotp_size = %d; an expert group is ep_size consecutive replicas "
             "of one tensor-parallel rank)",
             P, W / N, W, N);
    const ParallelGroups pg = make_parallel_groups(world, 1, N, P);

    EngineOptions o = options;
    o.monitor_rank = world->rank();  // only world rank 0 writes the monitors' files
    o.batch_world_size = pg.replicas;  // every replica trains its own micro-batch
    auto e = std::make_unique<Engine>(config_json, o, pg.expert_data);
    check_expert_parallel_engine(*e, P);
    if (N > 1) {
        e->require_cpu_engine("a tensor-parallel model (tensor_parallel.autotp_size > 1) with moe.ep_size > 1");
        tp::shard_model(*model, pg.model, pg.tp_rank, N);
    }
    shard_experts(*model, pg.expert, pg.ep_rank, P);
    // On a GPU the layers' token blocks and a device-resident engine's
    // gradients cross the expert group in device memory (NCCL).
    std::shared_ptr<comm::Communicator> device_group;
    if (e->device().is_cuda()) {
        device_group = Engine::device_comm_over(pg.expert, e->device().index);
        exchange_experts_on_device(*model, device_group);
    }
    e->attach_model(model);
    if (N > 1) tp::exclude_replicated_from_norm(*e, *model, pg.tp_rank);
    reduce_over_expert_group(*e, *model, pg.expert, pg.ep_rank, P, device_group);
    e->set_norm_combiner(norm_sum_over(pg.norm));
    // Checkpoints describe the logical model (engine/shard_layout.h).
    e->set_shard_layout(build_shard_layout(*model, world));
    return e;
}

}  // namespace ds::ep
