// The pipeline engine over the built-in GPT (DeepSpeed's PipelineModule +
// PipelineEngine.train_batch / eval_batch, DEEPSPEED_SEMANTICS.md §8): each
// rank trains one stage of the model on a pipe x data topology. Its stage is
// an ordinary Engine (ZeRO 0/1 over the data axis) bound to the GPT cut to
// the stage's layers (nn/gpt_pipe.h); this class runs DeepSpeed's
// TrainSchedule (1F1B) / InferenceSchedule on it, moving activations and
// gradients between neighbouring stages (p2p.h), all-reducing the tied
// embedding's gradient over the first and last stage, and combining the
// gradient norm and overflow across stages so every stage clips and skips
// alike.
//
// Activations in flight: a module keeps what backward needs for one forward
// only, so a stage keeps each micro-batch's INPUT and, when another forward
// ran since, recomputes the micro-batch's forward (same dropout masks: the
// forward index is the micro-batch's) right before its backward. The last
// stage runs backward right after each forward and never recomputes. This
// is activation checkpointing at stage granularity: memory is one
// micro-batch's activations plus the inputs of the micro-batches in flight,
// at the price of a second forward on every stage but the last.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/tensor.h"
#include "engine/engine.h"
#include "engine/engine_options.h"
#include "pipe/topology.h"

namespace ds {
namespace nn {
class Model;
}
namespace pipe {

// Timings of the last train_batch / eval_batch on this stage.
struct BatchStats {
    double wall_seconds = 0.0;     // the whole call, from the batch-start agreement to the loss
    // forwards, backwards, recomputed forwards and the optimizer step of this
    // stage: the rest of the wall time is waiting (on a neighbour, a
    // collective), the pipeline's bubble
    double compute_seconds = 0.0;
    double recompute_seconds = 0.0;  // of which recomputed forwards
};

class PipeEngine {
public:
    // Everything below is made by create_stage_engine.
    // replicas: this stage's data-parallel replicas (the loss is averaged
    // over them; the engine's own ranks are fewer with experts split).
    PipeEngine(Engine& e, std::shared_ptr<comm::Communicator> world, std::shared_ptr<comm::Communicator> pipe,
               std::shared_ptr<comm::Communicator> replicas, std::shared_ptr<comm::Communicator> tie,
               ProcessTopology topo, std::vector<int32_t> parts);

    int32_t stage() const { return stage_; }
    int32_t num_stages() const { return stages_; }
    int32_t first_layer() const { return parts_[static_cast<size_t>(stage_)]; }
    int32_t last_layer() const { return parts_[static_cast<size_t>(stage_) + 1]; }
    const std::vector<int32_t>& parts() const { return parts_; }
    int32_t micro_batches() const;
    int32_t data_parallel_size() const { return replicas_->size(); }
    const ProcessTopology& topology() const { return topo_; }
    const BatchStats& last_stats() const { return stats_; }

    // One batch: gradient_accumulation_steps micro-batches of
    // train_micro_batch_size_per_gpu rows through the schedule, one
    // optimizer step. inputs / targets: token ids [M x micro, T] of this
    // data-parallel replica (read on the first / last stage, ignored, and
    // may be undefined, elsewhere). Collective over the world. Returns the
    // mean loss over micro-batches, averaged over data-parallel replicas, on
    // every stage (DeepSpeed's train_batch); with MoE layers it includes
    // every stage's aux_loss_coef * l_aux terms, as one process's loss does.
    // *step: the optimizer step's result.
    float train_batch(const Tensor& inputs, const Tensor& targets, StepResult* step);
    // InferenceSchedule, no gradients, dropout off: the mean loss as train_batch.
    float eval_batch(const Tensor& inputs, const Tensor& targets);

private:
    struct Batch;
    // Checks this rank's inputs/targets and agrees on them with every rank
    // (one all-reduce over the world), so a bad batch fails everywhere
    // before any stage waits on a neighbour. Returns T.
    int64_t agree_on_batch(const Tensor& inputs, const Tensor& targets, int64_t rows);
    float mean_loss(double loss_sum, int32_t micro_batches);
    void reduce_tied_grads();

    Engine& e_;
    std::shared_ptr<comm::Communicator> world_, pipe_, replicas_, tie_;
    ProcessTopology topo_;
    std::vector<int32_t> parts_;
    int32_t stage_ = 0, stages_ = 1;
    bool first_ = true, last_ = true;
    BatchStats stats_;
};

// Whether a model is to be trained as a pipeline (a GPT spec with
// pipeline.stages > 1).
bool is_pipeline_model(const nn::Model& m);

// The engine of this rank's stage: the world (null: the process's) is laid
// out as DeepSpeed's PipeDataParallelTopology (pipe x data, data fastest;
// with tensor_parallel.autotp_size > 1 pipe x data x model); the model's
// layers are partitioned by its spec's partition_method and the model cut
// to this rank's; the engine runs on the data axis. MoE layers stay in their
// stage; with moe.ep_size = P > 1 they are sharded over expert groups of P
// consecutive replicas of the stage and the engine runs on the expert-data
// group (engine/parallel_groups.h, expert_parallel_engine.h). Collective
// over the world. Throws ds::Error: the world size not a multiple of the
// stages (or P not dividing a stage's replicas), a stage without layers,
// ZeRO stage > 1 (DeepSpeed's pipeline engine refuses it too), the engine's
// own errors.
std::unique_ptr<Engine> create_stage_engine(const std::string& config_json, const EngineOptions& options,
                                            std::shared_ptr<comm::Communicator> world,
                                            std::shared_ptr<nn::Model> model);

}  // namespace pipe
}  // namespace ds
