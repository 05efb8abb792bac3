// Expert parallelism for the built-in GPT's MoE layers (the GPT spec's
// moe.ep_size > 1, DeepSpeed's MoE(ep_size=...); docs/PIPELINE.md section 7):
// the world is laid out as DeepSpeed's expert groups (ep_size consecutive
// ranks share the experts of every MoE layer, each holding num_experts /
// ep_size of them; rank = replica * ep_size + expert rank), every MoE layer
// is sharded over its group (nn/moe_ep.h: tokens go to their experts' ranks
// and back by all-to-all), and this rank's engine runs on its
// expert-data-parallel group (the ranks holding the same experts). Every
// rank trains its own micro-batch through the ordinary ds_forward /
// ds_backward / ds_step; the batch keys and global_samples count the whole
// world, as DeepSpeed's data parallelism with MoE does.
// Gradients, so that the result equals one process accumulating every
// rank's micro-batch: at each boundary, before the engine's reduction over
// the expert-data group, the non-expert gradients are averaged over the
// expert group (so over the world in all) and the expert gradients, which
// already sum their tokens from every rank of the expert group, are divided
// by ep_size (so they end up summed over the world and divided by its size,
// DeepSpeed's expert-data-parallel reduction). The gradient norm adds the
// expert parameters' squares over the expert group and counts the rest on
// expert rank 0. With tensor or pipeline parallelism too the expert groups
// are formed inside each tp rank's / stage's replicas (engine/parallel_groups.h),
// and the parts below are composed by this file's create_ep_engine and by
// pipeline_engine.h's create_stage_engine.
#pragma once

#include <memory>
#include <string>

#include "comm/communicator.h"
#include "engine/engine.h"
#include "engine/engine_options.h"

namespace ds {
namespace nn {
class Model;
}
namespace ep {

// Whether a model asks for expert parallelism (a GPT whose moe.ep_size > 1).
bool is_expert_parallel_model(const nn::Model& m);

// The engine of this rank's expert shard. Collective over the world (null:
// the process's). With tensor_parallel.autotp_size = N > 1 the world is data
// x model (engine/parallel_groups.h): every transformer layer's attention is
// split over the N ranks of a model-parallel group, its MoE layer stays whole
// on each of them (tp::shard_model), and an expert group is ep_size
// consecutive replicas of one tp rank. Throws ds::Error: ep_size not dividing
// the world (or its replicas; DS_ERR_INVALID_ARGUMENT naming moe.ep_size),
// ZeRO stage > 1, gradient buffers other than fp32 (DS_ERR_UNSUPPORTED,
// naming the key), the tensor-parallel split's and the engine's own errors.
// A pipeline model is create_stage_engine's (pipeline_engine.h).
std::unique_ptr<Engine> create_ep_engine(const std::string& config_json, const EngineOptions& options,
                                         std::shared_ptr<comm::Communicator> world, std::shared_ptr<nn::Model> model);

// The parts an engine with sharded experts is made of (create_ep_engine,
// and a pipeline stage's engine with moe.ep_size > 1):
// ZeRO 0/1, fp32 gradient buffers and use_data_before_expert_parallelism
// false, else DS_ERR_UNSUPPORTED naming the key.
void check_expert_parallel_engine(const Engine& e, int ep_size);
// Shards every MoE layer of `model` over `group` (this rank = ep_rank of
// ep_size; nn/moe_ep.h), recollects its parameters and keeps `group` alive
// with the model. Before the engine binds the model.
void shard_experts(nn::Model& model, const std::shared_ptr<comm::Communicator>& group, int ep_rank, int ep_size);
// An engine on a GPU: the sharded MoE layers of `model` exchange their token
// blocks over `device_group` (the expert group's ranks, device buffers;
// Engine::device_comm_over), which the model keeps alive.
void exchange_experts_on_device(nn::Model& model, const std::shared_ptr<comm::Communicator>& device_group);
// After attach_model: at each boundary, before the engine's reduction over
// its (expert-data) ranks, the non-expert gradients are averaged over `group`
// (over `device_group` where they are in device memory: a device-resident
// engine) and the expert gradients divided by ep_size; on expert ranks other
// than 0 the non-expert parameters leave the norm (the group's rank 0 counts
// them).
void reduce_over_expert_group(Engine& e, nn::Model& model, std::shared_ptr<comm::Communicator> group, int ep_rank,
                              int ep_size, std::shared_ptr<comm::Communicator> device_group = nullptr);

}  // namespace ep
}  // namespace ds
