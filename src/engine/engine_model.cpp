// ModelBinding (engine_model.h): the built-in model's forward and backward
// inside the engine's micro-step state machine.
#include "engine/engine_model.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include <cjson/cJSON.h>
#include <string>
#include <unordered_map>

#include "core/dlpack_interop.h"
#include "core/error.h"
#include "core/json/json_text.h"
#include "core/tensor_transfer.h"
#include "core/kernel_backend.h"
#include "deepspeed_c.h"
#include "engine/engine.h"
#include "engine/rank_agreement.h"
#include "nn/moe_ep.h"

namespace ds {

struct ModelBinding::Checked {
    Tensor input;    // engine-owned contiguous copies on the engine's device (caller_on_host, on_engine_device)
    Tensor targets;  // undefined: no targets
    Shape out_shape;
};

namespace {

bool is_int(DType d) { return d == DType::I32 || d == DType::I64; }

int64_t id_at(const Tensor& t, int64_t i) {
    return t.dtype() == DType::I32 ? t.data<int32_t>()[i] : t.data<int64_t>()[i];
}

// A contiguous copy when the caller's tensor is strided (or misaligned for its dtype).
Tensor contiguous(const Tensor& t, Allocator& alloc) {
    const bool aligned = reinterpret_cast<uintptr_t>(t.data_ptr()) % t.element_size() == 0;
    if (t.is_contiguous() && aligned) return t;
    return t.to(t.dtype(), alloc, MemCategory::Buffers);
}

std::string shape_str(const Shape& s) { return shape_to_string(s); }


// Elements of the widest layer counting the parameters i with counted(i):
// the size of a reusable buffer that holds one layer's tensors end to end,
// as ModelBinding::enter lays them out.
template <class Counted>
int64_t widest_layer(const std::vector<std::vector<size_t>>& layers, const std::vector<nn::Param*>& params,
                     Counted counted) {
    int64_t widest = 0;
    for (const std::vector<size_t>& layer : layers) {
        int64_t n = 0;
        for (size_t i : layer)
            if (counted(i)) n += checked_numel(params[i]->shape, params[i]->name.c_str());
        widest = std::max(widest, n);
    }
    return widest;
}

}  // namespace

ModelBinding::ModelBinding(Engine& e, std::shared_ptr<nn::Model> model)
    : e_(e), model_(std::move(model)), dev_(e.device()) {
    DS_CHECK(model_->try_acquire(), DS_ERR_INVALID_STATE,
             "model: it is already used by another engine (a model trains in one engine at a time; destroy "
             "that engine first)");
    try {
        for (nn::Param* p : model_->params()) {
            DS_CHECK(p->value.defined(), DS_ERR_INVALID_STATE,
                     "model: parameter '%s' has no values (a ZeRO-3 engine that trained this model released "
                     "them; create the model again)",
                     p->name.c_str());
            DLTensor dl;
            fill_view(p->value, &dl);
            e_.add_param(p->name.c_str(), &dl, p->trainable ? DS_PARAM_TRAINABLE : 0);
        }
        // DeepSpeed's is_moe_param: the MoE layers' experts (any ep_size).
        for (nn::Param* p : nn::moe_expert_params(model_->root()).expert)
            e_.params().get(p->name.c_str()).expert = true;
    } catch (...) {
        model_->release();
        throw;
    }
    seed_ = model_->seed();
    // forward drops the model's output after the loss; a GPT's output is the
    // lm_head's fresh logits, which no module keeps, so the loss owns them
    // (a Sequential's last layer may keep its own output: not donated).
    model_->loss().set_output_donated(model_->spec().type == nn::ModelSpec::Type::Gpt);
}

ModelBinding::~ModelBinding() {
    drop_pending();
    release_weights();
    // fp32 views keep the engine's weights alive for the model (the next
    // engine made with it starts from them); the other cases keep copies.
    if (scoped_) model_->scope_layers(nullptr);
    const auto& params = model_->params();
    const bool bound = layer_of_.size() == params.size();  // after_init ran
    for (size_t i = 0; i < params.size(); ++i) {
        nn::Param& p = *params[i];
        p.grad = Tensor();
        if (!bound || stage3_ || (fp32_views_ && dev_.is_cpu())) continue;
        // fp16/bf16, or an engine on a GPU: the model keeps host fp32 copies
        // of the final weights (the next engine made with it starts from
        // them); without memory for them it has none, and a later engine
        // refuses it by name.
        try {
            Tensor v = fp32_copies_[i].defined() && dev_.is_cpu()
                           ? fp32_copies_[i]
                           : Tensor::empty(p.shape, DType::F32, Device::cpu(), Allocator::process(), MemCategory::Params);
            copy_converting(v, e_.model_weights(e_.params().get(p.name.c_str())), Allocator::process());
            p.value = v;
        } catch (...) {
            p.value = Tensor();
        }
    }
    model_->loss().set_output_donated(false);
    model_->release();
}

void ModelBinding::after_init() {
    stage3_ = e_.zero_stage() == 3;
    prefetch_layers_ = stage3_ && e_.stages_gathered_weights();
    fp32_views_ = e_.working_dtype() == DType::F32 && !stage3_;
    // fp16/bf16, and every dtype at ZeRO-3: each transformer layer's fp32
    // weights exist only while it runs, converted into one reusable buffer
    // (ZeRO-3: from its weights gathered for that time, DeepSpeed's fetch and
    // release around each submodule; the other parameters stay gathered for
    // the whole forward and backward).
    layer_weights_ = !fp32_views_;
    const auto& params = model_->params();
    // bf16: the parameters every reader of which accepts bf16 (Linear
    // weights, Embedding tables) read the working weights in place.
    direct16_.assign(params.size(), 0);
    if (e_.working_dtype() == DType::BF16)
        for (size_t i = 0; i < params.size(); ++i) direct16_[i] = params[i]->reads_bf16 ? 1 : 0;
    fp32_copies_.assign(params.size(), Tensor());
    shared_grad_.assign(params.size(), false);
    in_place_.assign(params.size(), 1);
    layer_grad_.assign(params.size(), false);
    layer_of_.assign(params.size(), -1);
    layers_.assign(static_cast<size_t>(model_->checkpointable_layers()), {});
    layer_gathered_.assign(layers_.size(), 0);
    {
        std::unordered_map<const nn::Param*, size_t> index;
        for (size_t i = 0; i < params.size(); ++i) index.emplace(params[i], i);
        std::vector<char> shared(params.size(), 0);
        for (size_t k = 0; k < layers_.size(); ++k)
            for (nn::Param* p : model_->layer_params(k)) {
                const size_t i = index.at(p);
                if (layer_of_[i] >= 0) {  // shared by two layers: bound as a whole
                    shared[i] = 1;
                    continue;
                }
                layer_of_[i] = static_cast<int64_t>(k);
                layers_[k].push_back(i);
            }
        // ZeRO-3 gathers a layer's own weights only: one shared with another
        // layer stays gathered for the pass.
        for (size_t i = 0; stage3_ && i < params.size(); ++i) {
            if (!shared[i]) continue;
            auto& l = layers_[static_cast<size_t>(layer_of_[i])];
            l.erase(std::find(l.begin(), l.end(), i));
            layer_of_[i] = -1;
        }
    }
    for (size_t i = 0; i < params.size(); ++i) {
        nn::Param& p = *params[i];
        Param& ep = e_.params().get(p.name.c_str());
        const bool in_layer = layer_of_[i] >= 0;
        if (fp32_views_ || (direct16_[i] && !stage3_)) {
            p.value = e_.model_weights(ep);  // a fixed view below ZeRO-3
        } else if (!stage3_ && !in_layer) {
            fp32_copies_[i] = Tensor::empty(p.shape, DType::F32, dev_, e_.allocator(), MemCategory::Buffers);
            p.value = fp32_copies_[i];
        } else {
            p.value = Tensor();  // bound while gathered (ZeRO-3) or while its layer runs
        }
        if (!p.trainable) continue;
        // The engine's own fp32 gradient buffer where it holds the whole
        // parameter's (ZeRO 0/1, fp32 gradients): backward adds straight
        // into it, so no second copy exists. Else a model-side buffer handed
        // over after backward: a layer's own for the duration of its
        // backward, the others' (embeddings, final LayerNorm) for the pass.
        if (ep.grad.defined() && ep.grad.dtype() == DType::F32 && ep.grad.device() == dev_ && !stage3_) {
            p.grad = ep.grad;
            shared_grad_[i] = true;
        } else if (in_layer) {
            p.grad = Tensor();
            layer_grad_[i] = true;
        } else {
            p.grad = Tensor::zeros(p.shape, DType::F32, dev_, e_.allocator(), MemCategory::Grads);
        }
    }
    const int64_t widest_w = widest_layer(layers_, params, [&](size_t i) { return !direct16_[i]; });
    const int64_t widest_g = widest_layer(layers_, params, [&](size_t i) { return bool(layer_grad_[i]); });
    // A window's later micro-steps hand the shared gradients over per layer
    // too (run_backward): then grad_scratch_ holds both kinds of the layer.
    handoff_grad_elems_ =
        widest_layer(layers_, params, [&](size_t i) { return layer_grad_[i] || shared_grad_[i]; });
    if (layer_weights_ && widest_w > 0)
        weight_scratch_ = Tensor::empty({widest_w}, DType::F32, dev_, e_.allocator(), MemCategory::Buffers);
    // Gradients queued to the host (ZeRO-Offload on a GPU, engine/grad_pipe.h)
    // are read by their copies while the next layer's backward runs: two
    // buffers, layers alternating, so a layer's backward waits only for the
    // copies of the layer before the last.
    grad_halves_ = e_.queues_model_grads() ? 2 : 1;
    grad_stride_ = widest_g;
    if (widest_g > 0)
        grad_scratch_ =
            Tensor::empty({widest_g * grad_halves_}, DType::F32, dev_, e_.allocator(), MemCategory::Grads);
    // Wrapped too where shared gradients may be handed over per layer (later
    // micro-steps of a window); the larger buffer for that is allocated when
    // first needed (a window of one micro-step never needs it).
    scoped_ = weight_scratch_.defined() || grad_scratch_.defined() || handoff_grad_elems_ > 0 ||
              (stage3_ && !layers_.empty());
    // Activation checkpointing (docs/CONFIG.md, "activation_checkpointing"):
    // on when number_checkpoints is set (that many transformer layers, from
    // the first) or cpu_checkpointing is true (all of them unless
    // number_checkpoints says otherwise).
    const config::ActivationCheckpointingConfig& ac = e_.config().sections.activation_checkpointing;
    // A pipeline stage's spec may ask too (PipelineModule's
    // activation_checkpoint_interval > 0): every transformer layer of the
    // stage, each its own unit (DeepSpeed groups `interval` layers per unit:
    // the same numbers, a different peak).
    const nn::ModelSpec& spec = model_->spec();
    const bool pipe_ckpt = spec.type == nn::ModelSpec::Type::Gpt && model_->pipe_stage().num_layers > 0 &&
                           spec.gpt.pipeline.activation_checkpoint_interval > 0;
    const bool enabled = ac.number_checkpoints.has_value() || ac.cpu_checkpointing || pipe_ckpt;
    const int64_t want = enabled ? ac.number_checkpoints.value_or(model_->checkpointable_layers()) : 0;
    const int64_t n = model_->checkpoint_layers(want, ac.cpu_checkpointing);
    DS_LOG(e_.logger(), DS_LOG_INFO,
           "model: %lld parameters; activation checkpointing: %lld of %lld transformer layers%s",
           static_cast<long long>(model_->num_params()), static_cast<long long>(n),
           static_cast<long long>(model_->checkpointable_layers()),
           n > 0 && ac.cpu_checkpointing ? " (inputs kept in the cpu checkpoint pool)" : "");
    if (scoped_) model_->scope_layers(this);  // outside the Checkpointed wrappers
}

nn::RunContext ModelBinding::context(bool training) const {
    nn::RunContext c;
    c.kernels = kernels_for(dev_);  // the legacy default stream on a GPU (Engine::attach_model)
    c.device = dev_;
    c.alloc = &e_.allocator();
    c.training = training;
    c.seed = seed_;
    c.forward_index = forward_index_;
    c.matmul_dtype = matmul_override_.value_or(e_.working_dtype() == DType::BF16 ? DType::BF16 : DType::F32);
    c.meter = &model_->meter();
    // The flops profiler while it profiles (monitor), else hooks set by set_forward_hooks.
    c.hooks = e_.monitors().forward_hooks();
    if (c.hooks == nullptr) c.hooks = hooks_;
    return c;
}

ModelBinding::Checked ModelBinding::check_forward(const DLTensor* inputs, int32_t n_inputs,
                                                  const DLTensor* out) const {
    DS_CHECK(e_.initialized(), DS_ERR_INVALID_STATE, "ds_forward called before ds_engine_init");
    DS_CHECK(inputs != nullptr, DS_ERR_INVALID_ARGUMENT, "argument 'inputs' is NULL");
    DS_CHECK(n_inputs == 1 || n_inputs == 2, DS_ERR_INVALID_ARGUMENT,
             "n_inputs = %d: expected 1 (the input) or 2 (the input and the targets)", n_inputs);
    DS_CHECK(out != nullptr, DS_ERR_INVALID_ARGUMENT, "argument 'out' is NULL");
    const nn::IoContract& io = model_->io();
    Checked c;
    // inputs[0]
    c.input = caller_on_host(&inputs[0], "inputs[0]");
    const Shape& s = c.input.shape();
    DS_CHECK(s.size() == 2 && s[0] > 0 && s[1] > 0, DS_ERR_INVALID_ARGUMENT,
             "inputs[0].shape = %s: expected [batch, %s] with both > 0", shape_str(s).c_str(),
             io.ids_input ? "seq" : "features");
    const int64_t batch = s[0];
    int64_t rows = batch;
    if (io.ids_input) {
        DS_CHECK(is_int(c.input.dtype()), DS_ERR_INVALID_ARGUMENT,
                 "inputs[0].dtype is %s: token ids must be int32 or int64", dtype_name(c.input.dtype()));
        DS_CHECK(io.max_seq == 0 || s[1] <= io.max_seq, DS_ERR_INVALID_ARGUMENT,
                 "inputs[0].shape = %s: the sequence length %lld exceeds the model's block_size %lld",
                 shape_str(s).c_str(), static_cast<long long>(s[1]), static_cast<long long>(io.max_seq));
        const int64_t vocab = model_->io().in_width;
        for (int64_t i = 0; i < c.input.numel(); ++i) {
            const int64_t id = id_at(c.input, i);
            DS_CHECK(id >= 0 && id < vocab, DS_ERR_INVALID_ARGUMENT,
                     "inputs[0][%lld][%lld] = %lld: token id outside [0, %lld)", static_cast<long long>(i / s[1]),
                     static_cast<long long>(i % s[1]), static_cast<long long>(id), static_cast<long long>(vocab));
        }
        rows = batch * s[1];
        c.out_shape = {batch, s[1], io.out_width};
    } else {
        DS_CHECK(c.input.dtype() == DType::F32, DS_ERR_INVALID_ARGUMENT, "inputs[0].dtype is %s: expected float32",
                 dtype_name(c.input.dtype()));
        DS_CHECK(s[1] == io.in_width, DS_ERR_INVALID_ARGUMENT,
                 "inputs[0].shape = %s: expected [batch, %lld] (the first layer's input width)",
                 shape_str(s).c_str(), static_cast<long long>(io.in_width));
        c.out_shape = {batch, io.out_width};
    }
    // A training micro-batch is what the engine counts in global_samples.
    const int64_t micro = e_.config().train_micro_batch_size_per_gpu;
    DS_CHECK(eval_ || batch == micro, DS_ERR_INVALID_ARGUMENT,
             "inputs[0].shape = %s: the batch dimension %lld must equal train_micro_batch_size_per_gpu = %lld "
             "(the engine counts global_samples from it)",
             shape_str(s).c_str(), static_cast<long long>(batch), static_cast<long long>(micro));
    // inputs[1]: targets
    if (n_inputs == 2) {
        c.targets = caller_on_host(&inputs[1], "inputs[1]");
        if (io.class_targets) {
            const Shape want = io.ids_input ? Shape{batch, s[1]} : Shape{batch};
            expect_shape(&inputs[1], want, "inputs[1] (targets)");
            DS_CHECK(is_int(c.targets.dtype()), DS_ERR_INVALID_ARGUMENT,
                     "inputs[1] (targets).dtype is %s: class targets must be int32 or int64",
                     dtype_name(c.targets.dtype()));
            const int64_t ignore = model_->spec().type == nn::ModelSpec::Type::Sequential
                                       ? model_->spec().sequential.ignore_index
                                       : -100;
            for (int64_t i = 0; i < rows; ++i) {
                const int64_t t = id_at(c.targets, i);
                DS_CHECK((t >= 0 && t < io.out_width) || t == ignore, DS_ERR_INVALID_ARGUMENT,
                         "inputs[1] (targets) element %lld = %lld: outside [0, %lld) and not ignore_index %lld",
                         static_cast<long long>(i), static_cast<long long>(t), static_cast<long long>(io.out_width),
                         static_cast<long long>(ignore));
            }
        } else {
            expect_shape(&inputs[1], c.out_shape, "inputs[1] (targets)");
            expect_dtype(&inputs[1], DType::F32, "inputs[1] (targets)");
        }
        validate_dltensor(out, "out");
        expect_host_or_engine(out, "out (the loss)");
        expect_dtype(out, DType::F32, "out (the loss)");
        DS_CHECK(dltensor_numel(out) == 1 && out->ndim <= 1, DS_ERR_INVALID_ARGUMENT,
                 "out (the loss): expected a scalar of shape [] or [1], got ndim %d with %lld elements", out->ndim,
                 static_cast<long long>(dltensor_numel(out)));
    } else {
        validate_dltensor(out, "out");
        expect_host_or_engine(out, "out (the output)");
        expect_dtype(out, DType::F32, "out (the output)");
        expect_shape(out, c.out_shape, "out (the output)");
    }
    // Checked on the host; the layers read them where they run.
    c.input = on_engine_device(c.input);
    if (c.targets.defined()) c.targets = on_engine_device(c.targets);
    return c;
}

void ModelBinding::drop_pending() noexcept {
    if (pending_ != Pending::None) model_->root().clear_saved();
    pending_ = Pending::None;
}

// A forward that threw part-way: the activations its modules kept and the
// weights it gathered (ZeRO-3: a layer that threw never left) go now, not
// at the next forward, so the memory is back where it was before the call.
void ModelBinding::abandon_forward() noexcept {
    model_->root().clear_saved();
    pending_ = Pending::None;
    release_weights();
}

void ModelBinding::forward(const DLTensor* inputs, int32_t n_inputs, DLTensor* out) {
    Checked c;
    auto checks = [&] {
        c = check_forward(inputs, n_inputs, out);
        agree::CallArgs a;
        a.detail = eval_ ? 1 : 0;
        a.detail_name = "eval";
        a.what = "train/eval mode (ds_engine_eval)";
        return a;
    };
    // ZeRO-3 gathers the weights here: collective, so the ranks agree first.
    if (stage3_ && !gathered_) agree::enter(e_.comm(), agree::Call::Forward, checks);
    else checks();
    drop_pending();  // a new forward replaces one that was never backwarded
    try {
        bind_weights();
        nn::RunContext ctx = context(!eval_);
        Tensor y = nn::call_forward(model_->root(), c.input, ctx);
        DS_CHECK(y.shape() == c.out_shape, DS_ERR_INTERNAL, "model output shape %s, expected %s",
                 shape_str(y.shape()).c_str(), shape_str(c.out_shape).c_str());
        if (c.targets.defined()) {
            const int64_t width = c.out_shape.back();
            const int64_t rows = y.numel() / width;
            Tensor t = model_->io().class_targets ? c.targets.view({rows}) : c.targets.view({rows, width});
            const float loss = model_->loss().forward(y.view({rows, width}), t, ctx);
            last_loss_ = loss;
            write_out(out, Tensor::borrow(&last_loss_, Shape(out->shape, out->shape + out->ndim), {}, DType::F32,
                                          Device::cpu()));
        } else {
            write_out(out, y);
        }
        last_forward_eval_ = eval_;
        if (!eval_) {
            pending_ = c.targets.defined() ? Pending::Loss : Pending::Output;
            pending_index_ = forward_index_;
            ++forward_index_;  // every training forward draws new dropout masks
            out_shape_ = c.out_shape;
        } else {
            release_weights();
        }
    } catch (...) {
        abandon_forward();
        throw;
    }
}

Tensor ModelBinding::forward_stage(const Tensor& input, const Tensor& targets, uint64_t forward_index,
                                   bool training, float* loss) {
    drop_pending();
    stage_out_grad_ = Tensor();
    input_grad_ = Tensor();
    try {
        bind_weights();
        nn::RunContext ctx = context(training);
        ctx.forward_index = forward_index;
        Tensor y = nn::call_forward(model_->root(), input, ctx);
        const Shape y_shape = y.shape();
        Tensor out;
        if (targets.defined()) {
            const int64_t width = y_shape.back();
            const int64_t rows = y.numel() / width;
            *loss = model_->loss().forward(y.view({rows, width}), targets.view({rows}), ctx);
        } else {
            out = std::move(y);
            // A stage before the last: its MoE layers' terms of the loss (the loss itself is the last stage's).
            *loss = model_->aux_loss() != nullptr ? model_->aux_loss()->value() : 0.0f;
        }
        last_forward_eval_ = !training;
        if (training) {
            pending_ = targets.defined() ? Pending::Loss : Pending::Output;
            pending_index_ = forward_index;
            out_shape_ = y_shape;
        } else {
            release_weights();
        }
        return out;
    } catch (...) {
        abandon_forward();
        throw;
    }
}

void ModelBinding::check_backward(const DLTensor* out_grad) const {
    if (pending_ == Pending::None) {
        DS_CHECK(!last_forward_eval_, DS_ERR_INVALID_STATE,
                 "ds_backward after a forward under ds_engine_eval(engine, 1): an eval forward keeps nothing for "
                 "backward (call ds_engine_eval(engine, 0) and run ds_forward again)");
        fail(DS_ERR_INVALID_STATE,
             "ds_backward without a ds_forward since the last ds_backward (or ds_engine_eval / a checkpoint "
             "load dropped it): each backward needs its own forward");
    }
    if (out_grad == nullptr) {
        if (pending_ == Pending::Output && stage_out_grad_.defined()) return;  // a pipeline stage's
        DS_CHECK(pending_ == Pending::Loss, DS_ERR_INVALID_STATE,
                 "ds_backward(engine, NULL): the last ds_forward had no targets, so there is no scalar loss; pass "
                 "out_grad (the gradient of its output, shape %s)",
                 shape_str(out_shape_).c_str());
        return;
    }
    DS_CHECK(pending_ == Pending::Output, DS_ERR_INVALID_STATE,
             "ds_backward(engine, out_grad): the last ds_forward computed the loss (targets were given); call "
             "ds_backward(engine, NULL)");
    validate_dltensor(out_grad, "out_grad");
    expect_host_or_engine(out_grad, "out_grad");
    expect_dtype(out_grad, DType::F32, "out_grad");
    expect_shape(out_grad, out_shape_, "out_grad");
}

void ModelBinding::run_backward(const DLTensor* out_grad) {
    const auto& params = model_->params();
    const bool any_shared = std::find(shared_grad_.begin(), shared_grad_.end(), true) != shared_grad_.end();
    // What ds_engine_accumulate_grad refuses, refused before the backward
    // writes into the engine's buffers.
    DS_CHECK(!any_shared || !e_.strategy().window_reduced(), DS_ERR_INVALID_STATE,
             "ds_backward: this window's gradients were already reduced across ranks by a failed ds_step; call "
             "ds_step again to finish the window");
    handed_ = false;
    // Shared buffers that hold nothing of this window yet start from zeros
    // and are written in place; the others get this micro-batch's gradient
    // computed on its own and added (handoff): per layer into the reusable
    // buffer, for the pass elsewhere (embeddings, final LayerNorm).
    std::vector<char> was_stale(params.size(), 0);
    bool shared_layer_handoff = false;
    for (size_t i = 0; i < params.size(); ++i) {
        if (!shared_grad_[i]) continue;
        Param& ep = e_.params().get(params[i]->name.c_str());
        was_stale[i] = ep.grad_stale ? 1 : 0;
        in_place_[i] = was_stale[i];
        if (!in_place_[i] && layer_of_[i] >= 0) shared_layer_handoff = true;
        ParamStore::clear_if_stale(ep);
    }
    try {
        if (shared_layer_handoff && handoff_grad_elems_ > 0 &&
            (!grad_scratch_.defined() || grad_scratch_.numel() < handoff_grad_elems_))
            grad_scratch_ =
                Tensor::empty({handoff_grad_elems_}, DType::F32, dev_, e_.allocator(), MemCategory::Grads);
        for (size_t i = 0; i < params.size(); ++i) {
            if (!shared_grad_[i] || in_place_[i]) continue;
            params[i]->grad = layer_of_[i] >= 0 ? Tensor()
                                                : Tensor::zeros(params[i]->shape, DType::F32, dev_,
                                                                e_.allocator(), MemCategory::Grads);
        }
        nn::RunContext ctx = context(true);
        ctx.forward_index = pending_index_;
        for (size_t i = 0; i < params.size(); ++i)
            if (params[i]->grad.defined() && !shared_grad_[i]) params[i]->grad.zero();
        // DeepSpeed's order: the loss times the scale, the output gradient
        // divided by the accumulation steps — one factor, loss_multiplier().
        const float mult = static_cast<float>(e_.loss_multiplier());
        Tensor dy;
        if (pending_ == Pending::Loss) {
            dy = model_->loss().backward(mult, ctx);
            dy = contiguous(dy, e_.allocator()).view(out_shape_);
        } else if (out_grad == nullptr) {  // a pipeline stage: the next stage's input gradient, pre-multiplied
            dy = std::move(stage_out_grad_);
            stage_out_grad_ = Tensor();
            // This stage's own loss terms (MoE aux losses) get d loss, seeded as the loss would.
            if (model_->aux_loss() != nullptr) model_->aux_loss()->set_grad(mult);
        } else {
            Tensor h = caller_on_host(out_grad, "out_grad");
            float* d = h.data<float>();
            for (int64_t i = 0; i < h.numel(); ++i) d[i] *= mult;
            dy = on_engine_device(h).view(out_shape_);
        }
        in_backward_ = true;
        input_grad_ = model_->root().backward(dy, ctx);
        in_backward_ = false;
        pending_ = Pending::None;
        for (size_t i = 0; i < params.size(); ++i) {
            nn::Param* p = params[i];
            if (!p->trainable || (handoff(i) && layer_of_[i] >= 0)) continue;  // handed over as each layer returned
            if (shared_grad_[i] && in_place_[i]) {
                // Written in place: the norm cached at accumulation does not cover it.
                Param& ep = e_.params().get(p->name.c_str());
                ep.grad_stale = false;
                ep.norm_cached = false;
                continue;
            }
            DLTensor g;
            fill_view(p->grad, &g);
            handed_ = true;
            e_.accumulate_model_grad(p->name.c_str(), &g);
        }
        e_.drain_model_grads();  // every gradient accumulated before ds_backward returns
    } catch (...) {
        in_backward_ = false;
        e_.discard_model_grads();
        drop_pending();
        release_weights();
        undo_shared_grads(was_stale);
        rebind_shared_grads();
        throw;
    }
    rebind_shared_grads();
    release_weights();
    if (!logged_activations_) {
        logged_activations_ = true;
        DS_LOG(e_.logger(), DS_LOG_INFO, "model: activations kept for backward: peak %lld bytes (%lld of %lld "
               "transformer layers checkpointed)",
               static_cast<long long>(model_->meter().peak_bytes),
               static_cast<long long>(model_->checkpointed_layers()),
               static_cast<long long>(model_->checkpointable_layers()));
    }
}

// A backward that failed part-way (out of memory) added part of a gradient
// into shared buffers. Those that held nothing of this window before read as
// zeros again (stale); where earlier micro-steps' gradients were there, the
// partial sum cannot be taken back, so the whole window is dropped (logged).
// Shared parameters handed over this backward get their view of the
// engine's buffer back, and the next backward decides afresh.
void ModelBinding::rebind_shared_grads() noexcept {
    const auto& params = model_->params();
    for (size_t i = 0; i < params.size(); ++i) {
        if (!shared_grad_[i] || in_place_[i]) continue;
        try {
            params[i]->grad = e_.params().get(params[i]->name.c_str()).grad;
        } catch (...) {  // registered at construction: cannot happen
        }
        in_place_[i] = 1;
    }
}

void ModelBinding::undo_shared_grads(const std::vector<char>& was_stale) noexcept {
    const auto& params = model_->params();
    bool mixed = false;
    for (size_t i = 0; i < params.size(); ++i) {
        if (!shared_grad_[i] || !in_place_[i]) continue;  // handed over: the engine's buffer untouched until then
        Param* ep = nullptr;
        try {
            ep = &e_.params().get(params[i]->name.c_str());
        } catch (...) {
            continue;  // registered at construction: cannot happen
        }
        if (was_stale[i]) ep->grad_stale = true;
        else mixed = true;
    }
    if (!mixed && !handed_) return;
    e_.params().drop_gradients();
    e_.strategy().drop_gradients();
    try {
        DS_LOG(e_.logger(), DS_LOG_WARN,
               "ds_backward failed part-way: the gradients accumulated in this window were dropped (the backward "
               "adds into the engine's buffers, so a partial gradient cannot be separated from them)");
    } catch (...) {
    }
}

void ModelBinding::set_eval(bool on) {
    drop_pending();
    release_weights();
    eval_ = on;
}

void ModelBinding::reset() noexcept {
    drop_pending();
    release_weights();
}

void ModelBinding::restore_stream(uint64_t seed, uint64_t forward_index) noexcept {
    reset();
    seed_ = seed;
    forward_index_ = forward_index;
}

}  // namespace ds

namespace ds {

void Engine::attach_model(std::shared_ptr<nn::Model> model) {
    DS_CHECK(!initialized_ && !model_ && params_.size() == 0, DS_ERR_INTERNAL,
             "attach_model on an engine that already has parameters");
    model_ = std::make_unique<ModelBinding>(*this, std::move(model));
    init();
    model_->after_init();
}

namespace {
// The module's and its descendants' FLOPs of their last forward.
double forward_flops(nn::Module& m) {
    double f = m.op_count().flops;
    for (nn::Module* c : m.children()) f += forward_flops(*c);
    return f;
}
}  // namespace

void Engine::forward(const DLTensor* inputs, int32_t n_inputs, DLTensor* out) {
    DS_CHECK(model_ != nullptr, DS_ERR_INVALID_STATE,
             "ds_forward: this engine has no built-in model (create it with ds_engine_create_with_model)");
    require_initialized("ds_forward", DS_OFFLOAD_LP_PARAMS);  // the weights may be offloaded
    // wall_clock_breakdown's forward timers, the flops profiler at its step (monitor_hub.h).
    monitors_->forward_begin(counters_.global_steps, model());
    try {
        require_on_device();
        const auto on = model_device_scope();  // the layers' kernels run on the engine's GPU
        model_->forward(inputs, n_inputs, out);
    } catch (...) {
        monitors_->forward_failed();
        throw;
    }
    if (model_->eval()) {  // not training: no loss, tokens or FLOPs for the monitors
        monitors_->forward_end(0, NAN, 0.0);
        return;
    }
    // The forward succeeded, so inputs[0] is [batch, seq] ids or [batch, features].
    nn::Model& m = model_->model();
    const int64_t batch = inputs[0].shape[0], seq = inputs[0].shape[1];
    const int64_t tokens = m.io().ids_input ? batch * seq : 0;
    const double loss = n_inputs == 2 ? static_cast<double>(model_->last_loss()) : NAN;
    // Forward + backward FLOPs: the GPT formula (6N + 12 L T C per token,
    // monitor_hub.h), else three times the counted forward FLOPs.
    double flops = 3.0 * forward_flops(m.root());
    if (m.spec().type == nn::ModelSpec::Type::Gpt) {
        const nn::GptSpec& g = m.spec().gpt;
        flops = static_cast<double>(tokens) *
                monitor::gpt_flops_per_token(static_cast<double>(m.num_params()), g.n_layer, seq, g.n_embd);
    }
    monitors_->forward_end(tokens, loss, flops);
}

void Engine::set_eval(bool on) {
    DS_CHECK(model_ != nullptr, DS_ERR_INVALID_STATE,
             "ds_engine_eval: this engine has no built-in model (create it with ds_engine_create_with_model)");
    model_->set_eval(on);
}

nn::Module* Engine::model() { return model_ ? &model_->model().root() : nullptr; }

}  // namespace ds

namespace ds {

std::string ModelBinding::stream_state_json() const {
    return format("{\"stream\":\"dropout\",\"seed\":\"%llu\",\"forward_index\":\"%llu\"}",
                  static_cast<unsigned long long>(seed_), static_cast<unsigned long long>(forward_index_));
}

void ModelBinding::parse_stream_state(const std::string& text, const std::string& what, uint64_t* seed,
                                      uint64_t* forward_index) {
    json::JsonPtr doc = json::parse_text(text, json::TextErrors{DS_ERR_FORMAT, what + ": ", "rng_states[0]"});
    const cJSON* root = doc.get();
    auto u64 = [&](const char* key) -> uint64_t {
        const cJSON* v = cJSON_GetObjectItemCaseSensitive(root, key);
        DS_CHECK(cJSON_IsString(v) && v->valuestring[0] >= '0' && v->valuestring[0] <= '9', DS_ERR_FORMAT,
                 "%s: rng_states[0].%s must be a decimal string", what.c_str(), key);
        errno = 0;
        char* end = nullptr;
        const unsigned long long x = std::strtoull(v->valuestring, &end, 10);
        DS_CHECK(errno == 0 && *end == '\0', DS_ERR_FORMAT, "%s: rng_states[0].%s = \"%s\" is not a uint64",
                 what.c_str(), key, v->valuestring);
        return static_cast<uint64_t>(x);
    };
    DS_CHECK(cJSON_IsObject(root), DS_ERR_FORMAT, "%s: rng_states[0] must be an object", what.c_str());
    const cJSON* st = cJSON_GetObjectItemCaseSensitive(root, "stream");
    DS_CHECK(cJSON_IsString(st) && std::string(st->valuestring) == "dropout", DS_ERR_FORMAT,
             "%s: rng_states[0].stream must be \"dropout\"", what.c_str());
    *seed = u64("seed");
    *forward_index = u64("forward_index");
}

}  // namespace ds
