// The engine's side of a built-in model (ds_engine_create_with_model,
// ds_forward, ds_backward with a model, ds_engine_eval): binding the model's
// parameters to the engine's weights, running forward and backward, handing
// the gradients to the engine, the dropout stream, activation checkpointing.
// Precision and ZeRO policy (docs/DESIGN.md, "Built-in models"):
//   fp32, ZeRO 0-2: each nn::Param's value IS the engine's working weights
//     (a zero-copy view, fixed for the engine's life);
//   bf16, Linear weights and Embedding tables (nn::Param::reads_bf16): the
//     value IS the bf16 working weights (a zero-copy view; at ZeRO-3 while
//     gathered): the bf16 products read them in place;
//   fp16/bf16 (and fp32 at ZeRO-3), the rest: a transformer layer's values
//     are converted into one reusable fp32 buffer before its forward and its
//     backward (LayerHooks: enter/leave); the other parameters' are fp32
//     copies converted at every forward (the layers compute in fp32);
//   ZeRO-3: a transformer layer's own weights are gathered when it enters
//     (forward, and again for its backward) and released when it leaves
//     (DeepSpeed's fetch/release around each submodule); the other
//     parameters (embeddings, final LayerNorm) are gathered for the forward,
//     stay gathered through the backward and are released after it (a
//     forward without a backward holds them until the next backward, eval
//     switch, or a forward under eval, which releases them at once). Peak:
//     the partitions, those parameters and one layer's weights.
// Gradients: the loss is seeded with loss_multiplier() = loss_scale /
// gradient_accumulation_steps, so every gradient arrives pre-divided.
//   ZeRO 0/1 with fp32 gradient buffers: each nn::Param's grad IS the
//     engine's accumulation buffer (a view of the flat gradient); backward
//     adds into it in place (zeroed first when it holds nothing of this
//     window), so the gradient exists once;
//   otherwise (ZeRO-2, fp16/bf16 gradient buffers): a transformer layer's
//     gradients are added into one reusable fp32 buffer during its backward
//     and handed to Engine::accumulate_grad(..., DS_GRAD_PREDIVIDED) as soon
//     as it returns; the other parameters' into their own fp32 buffers,
//     handed over after the whole backward.
//   A backward that fails part-way restores buffers that held nothing of
//   the window, else drops the window's gradients (undo_shared_grads).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <dlpack/dlpack.h>

#include "core/tensor.h"
#include "nn/layer_scope.h"
#include "nn/model.h"

namespace ds {

class Engine;

class ModelBinding final : public nn::LayerHooks {
public:
    // Takes the model for this engine (DS_ERR_INVALID_STATE when another
    // engine holds it) and registers its parameters (before Engine::init).
    ModelBinding(Engine& e, std::shared_ptr<nn::Model> model);
    ~ModelBinding() override;
    ModelBinding(const ModelBinding&) = delete;
    ModelBinding& operator=(const ModelBinding&) = delete;

    // After Engine::init: gradient buffers, fp32 copies, activation checkpointing.
    void after_init();

    // ds_forward (checks every argument before any collective).
    void forward(const DLTensor* inputs, int32_t n_inputs, DLTensor* out);
    // ds_backward: the checks (run by the engine before the ranks agree),
    // then the model's backward and the gradients handed to the engine.
    void check_backward(const DLTensor* out_grad) const;
    void run_backward(const DLTensor* out_grad);
    void set_eval(bool on);
    bool eval() const { return eval_; }
    // The loss of the last forward with targets.
    float last_loss() const { return last_loss_; }
    // Observers of every module forward (the flops profiler); null: none.
    void set_forward_hooks(nn::ForwardHooks* hooks) { hooks_ = hooks; }
    // The dtype of Linear's matrix products: bf16 on a bf16 engine (as torch
    // autocast), fp32 otherwise, unless set here (tests compare an fp32
    // engine's arithmetic with a bf16 engine's through it).
    void set_matmul_dtype(DType d) { matmul_override_ = d; }

    nn::Model& model() { return *model_; }
    // The dropout stream (saved in checkpoints: docs/CHECKPOINTS.md).
    uint64_t seed() const { return seed_; }
    uint64_t forward_index() const { return forward_index_; }
    void restore_stream(uint64_t seed, uint64_t forward_index) noexcept;
    // Forgets a forward in flight and releases ZeRO-3 weights gathered for it.
    void reset() noexcept;
    // The stream as a checkpoint's rng_states entry:
    // {"stream":"dropout","seed":"<u64>","forward_index":"<u64>"} (decimal
    // strings: JSON numbers cannot hold every uint64). parse: DS_ERR_FORMAT
    // naming `what`.
    std::string stream_state_json() const;
    static void parse_stream_state(const std::string& json, const std::string& what, uint64_t* seed,
                                   uint64_t* forward_index);
    // nn::LayerHooks: one transformer layer's weights and gradients (engine_model.cpp).
    void enter(size_t layer, bool backward) override;
    void leave(size_t layer, bool backward) override;

    // ---- one pipeline stage's calls (engine/pipeline_engine.cpp) ----
    // A forward of this stage's model on `input` (token ids or activations,
    // checked by the caller) with the dropout stream at `forward_index`
    // (the micro-batch's: a recomputed forward draws the same masks).
    // training: keeps what backward needs, as ds_forward does. With
    // `targets`: *loss is the loss and the result undefined; else the
    // stage's output, and *loss the stage's own terms of the loss (its MoE
    // layers' aux_loss_coef * l_aux; 0 without MoE layers).
    Tensor forward_stage(const Tensor& input, const Tensor& targets, uint64_t forward_index, bool training,
                         float* loss);
    // The next backward (Engine::backward(nullptr)) of a forward_stage
    // without targets starts from `dy`, already multiplied by
    // loss_multiplier() (it is the next stage's input gradient); the stage's
    // own loss terms (MoE aux losses) get loss_multiplier() as their d loss.
    void set_stage_out_grad(Tensor dy) { stage_out_grad_ = std::move(dy); }
    // The gradient of the last backward's input (undefined for token ids); taken once.
    Tensor take_input_grad() { return std::move(input_grad_); }

    // Bytes of activations kept for backward at the meter's peak.
    int64_t activation_peak_bytes() const { return model_->meter().peak_bytes; }
    // Layers gathered ahead so far (prefetch_next; tests).
    int64_t layers_prefetched() const { return prefetched_; }

private:
    enum class Pending { None, Loss, Output };
    struct Checked;  // the validated inputs of one forward
    Checked check_forward(const DLTensor* inputs, int32_t n_inputs, const DLTensor* out) const;
    void bind_weights();
    void release_weights() noexcept;
    void drop_pending() noexcept;
    nn::RunContext context(bool training) const;
    // The caller's tensors (engine/engine_model_io.cpp): on the host or, for an
    // engine on a GPU, in that GPU's memory (contiguous there).
    void expect_host_or_engine(const DLTensor* t, const char* what) const;
    Tensor caller_on_host(const DLTensor* t, const char* what) const;  // an engine-owned host copy
    Tensor on_engine_device(const Tensor& host) const;                  // a copy where the layers run
    void write_out(DLTensor* out, const Tensor& src) const;

    Engine& e_;
    std::shared_ptr<nn::Model> model_;
    Device dev_;  // where the layers run: the engine's device (cuda:N: its weights' copies there)
    float last_loss_ = 0.0f;
    bool fp32_views_ = false;  // value = the working weights themselves
    bool stage3_ = false;
    bool gathered_ = false;    // ZeRO-3: the model's weights are gathered
    std::vector<Tensor> fp32_copies_;  // fp16/bf16: the converted weights
    // bf16 engine, nn::Param::reads_bf16: value IS the bf16 working weights
    // (a view; at ZeRO-3 bound while gathered), no fp32 copy exists.
    std::vector<char> direct16_;
    // Per parameter: nn::Param::grad is the engine's own gradient buffer
    // (ZeRO 0/1 with fp32 gradients). Backward writes into it in place only
    // when it holds nothing of this window (the first micro-step); on later
    // micro-steps the micro-batch's gradient is computed on its own (per
    // layer, like layer_grad_) and added, so a window sums its micro-batches
    // in the same order as ranks reduce them (gas on one process == ZeRO on
    // several, bitwise) and a failed backward leaves earlier ones intact.
    std::vector<bool> shared_grad_;
    std::vector<char> in_place_;   // this backward writes shared_grad_[i] in place
    // grad_scratch_'s size when shared gradients are handed over per layer
    // too (the widest layer's layer_grad_ + shared_grad_ elements): computed
    // in after_init, allocated by the first backward that needs it.
    int64_t handoff_grad_elems_ = 0;
    bool handoff(size_t i) const { return layer_grad_[i] || (shared_grad_[i] && !in_place_[i]); }
    void rebind_shared_grads() noexcept;
    void undo_shared_grads(const std::vector<char>& was_stale) noexcept;
    // Per-layer binding (LayerHooks): the model parameters of each
    // transformer layer (indices into model().params(); at ZeRO-3 not one
    // shared with another layer), each parameter's layer (-1: none), whether
    // its fp32 weights are converted per layer (fp16/bf16, ZeRO-3) and its
    // gradient handed over per layer (where it is not shared), and the two
    // reusable buffers (the widest layer).
    std::vector<std::vector<size_t>> layers_;
    std::vector<int64_t> layer_of_;
    // ZeRO-3: layer k's weights are gathered (from its enter to its leave).
    std::vector<char> layer_gathered_;
    void release_layer(size_t k) noexcept;
    // model_->params() indices; all or none. `ahead`: Engine::gather_params's.
    void gather_all(const std::vector<size_t>& which, bool ahead = false);
    // ZeRO-Offload at ZeRO-3 on a GPU (Engine::stages_gathered_weights): as
    // layer k enters, the next layer of the pass (forward k + 1, backward
    // k - 1; layers are indexed in forward order) is gathered too, before
    // k's kernels are queued, so its copies to the device run while they
    // do. A forward inside the backward pass (activation checkpointing's
    // recomputation) prefetches nothing.
    void prefetch_next(size_t k, bool backward);
    bool prefetch_layers_ = false;
    bool in_backward_ = false;  // run_backward's model backward is running
    int64_t prefetched_ = 0;
    void abandon_forward() noexcept;
    bool layer_weights_ = false;
    std::vector<bool> layer_grad_;
    Tensor weight_scratch_, grad_scratch_;
    // grad_scratch_ in grad_halves_ parts of grad_stride_ elements, layer k
    // in part k % grad_halves_; per part, the last queued copy that reads it
    // (0: none). Two parts where the engine queues gradients to the host.
    int64_t grad_halves_ = 1, grad_stride_ = 0;
    uint64_t half_ticket_[2] = {0, 0};
    bool scoped_ = false;   // the layers are wrapped in LayerScope
    bool handed_ = false;   // this backward handed a layer's gradients to the engine
    bool eval_ = false;
    std::optional<DType> matmul_override_;
    Pending pending_ = Pending::None;
    bool last_forward_eval_ = false;
    Shape out_shape_;           // of the last forward's output
    uint64_t seed_ = 0;
    uint64_t forward_index_ = 0;
    uint64_t pending_index_ = 0;  // the forward_index the pending forward ran with
    bool logged_activations_ = false;
    nn::ForwardHooks* hooks_ = nullptr;
    Tensor stage_out_grad_;  // set_stage_out_grad
    Tensor input_grad_;      // take_input_grad
};

}  // namespace ds
