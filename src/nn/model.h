// The object behind ds_model_t: a built-in model made from a spec
// (model_spec.h). It owns the root Module, the loss, the parameters' initial
// fp32 values (until an engine takes them), the activation meter, and the
// slots of the layers activation checkpointing may wrap. The engine binds the
// parameters' values to its working weights (engine/engine_model.h).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "nn/model_spec.h"
#include "nn/module.h"

namespace ds::nn {

struct LayerHooks;  // layer_scope.h

// A loss: the mean over rows of a per-row loss of the model's output.
class Loss {
public:
    virtual ~Loss() = default;
    virtual const char* name() const = 0;
    // output [rows, width] (viewed 2-D), targets as io().targets says.
    virtual float forward(const Tensor& output, const Tensor& targets, RunContext& ctx) = 0;
    // d(dloss * loss)/d(output) of the last forward, [rows, width].
    virtual Tensor backward(float dloss, RunContext& ctx) = 0;
    // The caller keeps no other reference to the outputs it passes to
    // forward (the engine's binding drops the model's output after the
    // loss): the loss is their only keeper, so their bytes count as kept
    // activations, and backward may write the gradient over them in place
    // (one output-sized buffer less at the start of backward).
    void set_output_donated(bool on) { output_donated_ = on; }

protected:
    bool output_donated_ = false;
};

// Loss terms the model's layers produce besides its output's loss (the MoE
// layers' aux_loss_coef * l_aux, moe_layer.h). The model's Loss adds them;
// a pipeline stage that holds layers but not the loss adds its own terms to
// the batch's loss and seeds their gradient itself (engine/pipeline_engine.cpp).
class AuxLoss {
public:
    virtual ~AuxLoss() = default;
    // The terms of the last forward (0 when the model holds no such layer).
    virtual float value() const = 0;
    // The next backward sends d(dloss * terms) into the layers.
    virtual void set_grad(float dloss) = 0;
};

// What a forward takes and returns.
struct IoContract {
    bool ids_input = false;   // int32/int64 [B, T] token ids; else fp32 [B, in_width]
    int64_t max_seq = 0;      // ids: the longest T (0: unbounded)
    int64_t in_width = 0;     // features input
    int64_t out_width = 0;    // the output's last dim (logits: vocab)
    bool class_targets = true;  // int32/int64 ids shaped like the input's rows; else fp32 like the output
    // A pipeline stage (cut_gpt_to_stage, gpt_pipe.h):
    int64_t act_width = 0;    // > 0: the input is float32 activations [B, T, act_width] (in_width = act_width)
    bool act_output = false;  // the output is activations [B, T, out_width], not logits
};

// Which pipeline layers (gpt_pipe_layers) a model cut to a stage holds:
// [first, last) of num_layers; all zero for a model never cut.
struct PipeStageRange {
    int64_t first = 0, last = 0, num_layers = 0;
};

class Model {
public:
    // Numbers every module (ids), names the parameters by their modules'
    // dotted names, and collects them (a tied parameter once).
    Model(ModelSpec spec, std::unique_ptr<Module> root, std::unique_ptr<Loss> loss, IoContract io,
          std::vector<std::unique_ptr<Module>*> checkpoint_slots);
    ~Model();
    Model(const Model&) = delete;
    Model& operator=(const Model&) = delete;

    const ModelSpec& spec() const { return spec_; }
    Module& root() { return *root_; }
    Loss& loss() { return *loss_; }
    // The layers' own loss terms (included in loss()), or null when the
    // model has none.
    AuxLoss* aux_loss() { return aux_.get(); }
    void set_aux_loss(std::shared_ptr<AuxLoss> a) { aux_ = std::move(a); }
    const IoContract& io() const { return io_; }
    const std::vector<Param*>& params() const { return params_; }
    int64_t num_params() const;
    uint64_t seed() const;
    ActivationMeter& meter() { return meter_; }

    // Activation checkpointing: wrap the first `count` checkpointable layers
    // (the transformer layers, in forward order; count is clamped to how
    // many there are) in Checkpointed, undoing an earlier call. Returns how
    // many were wrapped.
    int64_t checkpoint_layers(int64_t count, bool cpu_checkpointing);
    int64_t checkpointable_layers() const { return static_cast<int64_t>(slots_.size()); }
    int64_t checkpointed_layers() const { return checkpointed_; }
    Allocator& cpu_checkpoint_pool() { return *cpu_pool_; }

    // Wraps each checkpointable (transformer) layer, after any
    // Checkpointed, in a LayerScope calling `hooks` (layer_scope.h); null
    // unwraps them. checkpoint_layers unwraps first.
    void scope_layers(LayerHooks* hooks);
    // The parameters of checkpointable layer `index` (forward order).
    std::vector<Param*> layer_params(size_t index);

    // The pipeline layers this model holds (gpt_pipe.h).
    const PipeStageRange& pipe_stage() const { return stage_; }
    // After cut_gpt_to_stage changed the module tree (no layer wrapped):
    // records the stage, its io and its layer slots, and collects the
    // parameters again from the tree (a shared one once), names unchanged.
    void set_pipe_stage(const PipeStageRange& stage, const IoContract& io,
                        std::vector<std::unique_ptr<Module>*> checkpoint_slots);

    // Checkpointable layer `index`'s module (forward order), as it sits in
    // its slot (a Checkpointed or LayerScope wrapper while wrapped).
    Module& layer(size_t index);
    // After a module of the tree was replaced in place (tensor parallelism
    // swapped a layer's Linears): collects the parameters again from the
    // tree (a shared one once), names unchanged.
    void refresh_params();
    // Keeps `what` alive as long as the model (what its modules point at
    // without owning, e.g. a tensor-parallel communicator).
    void hold(std::shared_ptr<void> what) { held_.push_back(std::move(what)); }

    // One engine at a time binds the parameters (engine_model.cpp).
    bool try_acquire() { return !in_use_.exchange(true); }
    void release() { in_use_ = false; }

private:
    ModelSpec spec_;
    std::unique_ptr<Module> root_;
    std::unique_ptr<Loss> loss_;
    std::shared_ptr<AuxLoss> aux_;  // shared with loss_
    IoContract io_;
    std::vector<std::unique_ptr<Module>*> slots_;
    std::vector<Param*> params_;
    ActivationMeter meter_;
    std::unique_ptr<Allocator> cpu_pool_;
    int64_t checkpointed_ = 0;
    PipeStageRange stage_;
    std::vector<std::shared_ptr<void>> held_;  // outlives root_ (the destructor resets root_ first)
    uint32_t next_id_ = 1;
    std::atomic<bool> in_use_{false};
};

// Builds the model a spec describes (gpt.cpp, sequential.cpp) with its
// parameters initialised from the spec's seed.
std::unique_ptr<Model> build_model(const std::string& spec_json);

// A standard normal stream for parameter init: a pure function of (seed,
// parameter name, element), so a parameter's values do not depend on which
// others exist or the order they are built in.
void init_normal(Param& p, uint64_t seed, double stddev);
void init_constant(Param& p, float value);

}  // namespace ds::nn
