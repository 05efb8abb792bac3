// AutoTP training over the built-in GPT (DeepSpeed's `tensor_parallel:
// {"autotp_size": N}`, docs/PIPELINE.md "Tensor parallelism"): the world is
// laid out as DeepSpeed's model-parallel groups (N consecutive ranks share
// each layer, rank = replica * N + tp_rank), every transformer layer of the
// model is split Megatron-style over its group (nn/tp_transformer.h), and
// this rank's engine is an ordinary Engine on the data axis (ZeRO 0-2 over
// the replicas holding the same shard). Training is the usual ds_forward /
// ds_backward / ds_step on every rank of the group with the same batch.
// The gradient norm and overflow span the group: the split parameters' sums
// of squares add over it, the replicated ones (LayerNorms, row-parallel
// biases, embeddings, head) count on tp rank 0 only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "comm/communicator.h"
#include "engine/engine.h"
#include "engine/engine_options.h"

namespace ds {
namespace nn {
class Model;
}
namespace tp {

// tensor_parallel.autotp_size of a config's JSON (0 when absent, malformed
// or not an integer: the engine's own parse reports those), read before the
// engine parses it because the engine's communicator depends on it.
int64_t autotp_size(const std::string& config_json);

// The engine of this rank's shard. Collective over the world (null: the
// process's). Throws ds::Error: the size not dividing the world
// (DS_ERR_INVALID_CONFIG naming tensor_parallel.autotp_size), a model that
// is not a GPT or is a pipeline (DS_ERR_UNSUPPORTED), the shard's errors
// (heads or the MLP width not a multiple of the size), the engine's own.
// MoE layers (moe.ep_size 1) stay whole on every rank of the group.
// Splits every transformer layer of `model` (a built GPT, or a pipeline
// stage of one) over the ranks of `mp` (this rank = tp_rank of N),
// recollects its parameters and keeps `mp` alive with the model. MoE layers
// stay whole (replicated on every tp rank). A refusal (heads or the MLP
// width not a multiple of N) leaves the layers whole and names
// tensor_parallel.autotp_size; moe.enable_expert_tensor_parallelism = true
// is DS_ERR_UNSUPPORTED naming it.
void shard_model(nn::Model& model, const std::shared_ptr<comm::Communicator>& mp, int tp_rank, int N);
// On tp ranks other than 0: the replicated parameters (LayerNorms,
// row-parallel biases, embeddings, head) leave this engine's norm (the
// group's rank 0 counts them).
void exclude_replicated_from_norm(Engine& e, nn::Model& model, int tp_rank);

std::unique_ptr<Engine> create_tp_engine(const std::string& config_json, const EngineOptions& options,
                                         std::shared_ptr<comm::Communicator> world, std::shared_ptr<nn::Model> model,
                                         int64_t tp_size);

}  // namespace tp
}  // namespace ds
