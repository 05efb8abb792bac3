#include "engine/pipeline_engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "comm/factory.h"
#include "comm/tensor_collectives.h"
#include "core/error.h"
#include "engine/engine_model.h"
#include "engine/expert_parallel_engine.h"
#include "engine/norm_across.h"
#include "engine/parallel_groups.h"
#include "engine/shard_layout.h"
#include "engine/tensor_parallel_engine.h"
#include "nn/gpt_pipe.h"
#include "nn/model.h"
#include "pipe/p2p.h"
#include "pipe/partition.h"
#include "pipe/schedule.h"

namespace ds::pipe {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Tags of the two streams between neighbours (MPI keeps each in order).
constexpr int kTagActivation = 1;
constexpr int kTagGrad = 2;

bool is_int(DType d) { return d == DType::I32 || d == DType::I64; }
int64_t id_at(const Tensor& t, int64_t i) {
    return t.dtype() == DType::I32 ? t.data<int32_t>()[i] : t.data<int64_t>()[i];
}

// Rows [m * micro, (m + 1) * micro) of a [rows, T] tensor.
Tensor micro_slice(const Tensor& t, int64_t m, int64_t micro) {
    const int64_t T = t.shape()[1];
    return t.view({micro, T}, m * micro * T);
}

}  // namespace

bool is_pipeline_model(const nn::Model& m) {
    return m.spec().type == nn::ModelSpec::Type::Gpt && m.spec().gpt.pipeline.stages > 1;
}

PipeEngine::PipeEngine(Engine& e, std::shared_ptr<comm::Communicator> world, std::shared_ptr<comm::Communicator> pipe,
                       std::shared_ptr<comm::Communicator> replicas, std::shared_ptr<comm::Communicator> tie,
                       ProcessTopology topo, std::vector<int32_t> parts)
    : e_(e),
      world_(std::move(world)),
      pipe_(std::move(pipe)),
      replicas_(std::move(replicas)),
      tie_(std::move(tie)),
      topo_(std::move(topo)),
      parts_(std::move(parts)) {
    stages_ = pipe_->size();
    stage_ = pipe_->rank();
    first_ = stage_ == 0;
    last_ = stage_ == stages_ - 1;
}

int32_t PipeEngine::micro_batches() const { return static_cast<int32_t>(e_.config().gradient_accumulation_steps); }

int64_t PipeEngine::agree_on_batch(const Tensor& inputs, const Tensor& targets, int64_t rows) {
    const nn::Model& m = e_.model_binding()->model();
    const nn::GptSpec& g = m.spec().gpt;
    std::string mine;  // why this rank refuses its batch
    int64_t t_in = 0, t_tg = 0;
    auto check_ids = [&](const Tensor& t, const char* what, bool targets_rule) {
        if (!t.defined()) return format("%s is NULL on stage %d, which reads it", what, stage_);
        if (!is_int(t.dtype())) return format("%s.dtype is %s: token ids must be int32 or int64", what, dtype_name(t.dtype()));
        if (t.dim() != 2 || t.shape()[0] != rows || t.shape()[1] < 1 || t.shape()[1] > g.block_size)
            return format("%s.shape = %s: expected [%lld, T] (gradient_accumulation_steps x "
                          "train_micro_batch_size_per_gpu rows) with 1 <= T <= block_size %lld",
                          what, shape_to_string(t.shape()).c_str(), static_cast<long long>(rows),
                          static_cast<long long>(g.block_size));
        for (int64_t i = 0; i < t.numel(); ++i) {
            const int64_t v = id_at(t, i);
            if ((v < 0 || v >= g.vocab_size) && !(targets_rule && v == -100))
                return format("%s[%lld][%lld] = %lld: outside [0, %lld)%s", what,
                              static_cast<long long>(i / t.shape()[1]), static_cast<long long>(i % t.shape()[1]),
                              static_cast<long long>(v), static_cast<long long>(g.vocab_size),
                              targets_rule ? " and not ignore_index -100" : "");
        }
        return std::string();
    };
    if (first_) {
        mine = check_ids(inputs, "inputs", false);
        if (mine.empty()) t_in = inputs.shape()[1];
    }
    if (last_ && mine.empty()) {
        mine = check_ids(targets, "targets", true);
        if (mine.empty()) t_tg = targets.shape()[1];
    }
    // [T of the inputs, T of the targets, this rank refused]: max over the world.
    const int W = world_->size();
    std::vector<int64_t> v(static_cast<size_t>(W) + 2, 0);
    v[0] = t_in;
    v[1] = t_tg;
    v[2 + static_cast<size_t>(world_->rank())] = mine.empty() ? 0 : 1;
    world_->allreduce(v.data(), v.data(), v.size(), DType::I64, comm::Op::Max);
    DS_CHECK(mine.empty(), DS_ERR_INVALID_ARGUMENT, "ds_train_batch/ds_eval_batch: %s", mine.c_str());
    for (int r = 0; r < W; ++r)
        DS_CHECK(v[2 + static_cast<size_t>(r)] == 0, DS_ERR_INVALID_ARGUMENT,
                 "ds_train_batch/ds_eval_batch: rank %d (pipeline stage %d, data-parallel replica %d) refused its "
                 "batch; no stage ran it",
                 r, topo_.coord_of(r)[0], topo_.coord_of(r)[1]);
    // Every data-parallel replica may have its own T, but within a pipeline
    // the first stage's inputs and the last stage's targets must agree.
    DS_CHECK(v[0] == v[1], DS_ERR_INVALID_ARGUMENT,
             "ds_train_batch/ds_eval_batch: the first stage's inputs have T = %lld, the last stage's targets T = %lld",
             static_cast<long long>(v[0]), static_cast<long long>(v[1]));
    return v[0];
}

float PipeEngine::mean_loss(double loss_sum, int32_t micro_batches) {
    // DeepSpeed's _aggregate_total_loss: the last stage's mean over
    // micro-batches, averaged over its data-parallel replicas, broadcast to
    // the other stages. With MoE layers every stage holds part of the loss
    // (its layers' aux terms; the last stage's loss_sum has the cross-entropy
    // and its own): each stage's mean, averaged over its replicas, summed
    // over the stages.
    const bool parts = e_.model_binding()->model().aux_loss() != nullptr;
    float loss[1] = {last_ || parts ? static_cast<float>(loss_sum / micro_batches) : 0.0f};
    Tensor t = Tensor::borrow(loss, {1}, {1}, DType::F32, Device::cpu());
    if ((last_ || parts) && replicas_->size() > 1) comm::all_reduce_tensor(*replicas_, t, comm::Op::Avg);
    if (parts) comm::all_reduce_tensor(*pipe_, t, comm::Op::Sum);
    else comm::broadcast_tensor(*pipe_, t, stages_ - 1);
    return loss[0];
}

void PipeEngine::reduce_tied_grads() {
    if (!tie_) return;
    Param& p = e_.params().get("wte.weight");
    // Both stages ran a backward into it; the sum is the model's gradient.
    comm::all_reduce_tensor(*tie_, p.grad, comm::Op::Sum);
    p.grad_stale = false;
    p.norm_cached = false;
}

float PipeEngine::train_batch(const Tensor& inputs, const Tensor& targets, StepResult* step) {
    const auto t0 = Clock::now();
    stats_ = BatchStats();
    ModelBinding& b = *e_.model_binding();
    DS_CHECK(!b.eval(), DS_ERR_INVALID_STATE,
             "ds_train_batch under ds_engine_eval(engine, 1): call ds_engine_eval(engine, 0) first");
    const int32_t M = micro_batches();
    const int64_t micro = e_.config().train_micro_batch_size_per_gpu;
    const int64_t T = agree_on_batch(inputs, targets, M * micro);
    const int64_t C = b.model().spec().gpt.n_embd;
    Allocator& alloc = e_.allocator();
    const Shape act_shape = {micro, T, C};

    Schedule sched(ScheduleKind::Train, M, stages_, stage_);
    const size_t nbuf = static_cast<size_t>(sched.num_pipe_buffers());
    struct Buffer {
        int32_t mb = -1;
        Tensor input, targets, output, out_grad, in_grad;
    };
    std::vector<Buffer> buf(nbuf);
    const uint64_t base = b.forward_index();
    const Counters counters_before = e_.counters();
    int32_t live_mb = -1;  // the micro-batch whose activations the modules keep
    double loss_sum = 0.0;
    float loss = 0.0f;
    StepResult result;
    auto forward = [&](Buffer& x, bool recompute) {
        const auto tf = Clock::now();
        float micro_loss = 0.0f;
        Tensor y = b.forward_stage(x.input, last_ ? x.targets : Tensor(), base + static_cast<uint64_t>(x.mb),
                                   /*training=*/true, &micro_loss);
        if (!recompute) {
            loss_sum += micro_loss;  // the last stage's loss, another stage's MoE aux terms
            if (!last_) x.output = std::move(y);
        }
        live_mb = x.mb;
        const double s = seconds_since(tf);
        stats_.compute_seconds += s;
        if (recompute) stats_.recompute_seconds += s;
    };
    try {
        for (int32_t t = 0; t < sched.num_steps(); ++t) {
            for (const Instruction& in : sched.step(t)) {
                Buffer* x = in.buffer_id >= 0 ? &buf[static_cast<size_t>(in.buffer_id)] : nullptr;
                switch (in.type) {
                    case InstrType::LoadMicroBatch:
                        x->mb = in.micro_batch;
                        if (first_) x->input = micro_slice(inputs, in.micro_batch, micro);
                        if (last_) x->targets = micro_slice(targets, in.micro_batch, micro);
                        break;
                    case InstrType::RecvActivation:
                        x->input = Tensor::empty(act_shape, DType::F32, Device::cpu(), alloc, MemCategory::Buffers);
                        recv_tensor(*pipe_, x->input, stage_ - 1, kTagActivation);
                        break;
                    case InstrType::ForwardPass:
                        x->mb = in.micro_batch;  // middle stages load nothing: the instruction names it
                        forward(*x, false);
                        break;
                    case InstrType::SendActivation:
                        send_tensor(*pipe_, x->output, stage_ + 1, kTagActivation);
                        x->output = Tensor();
                        break;
                    case InstrType::RecvGrad:
                        x->out_grad = Tensor::empty(act_shape, DType::F32, Device::cpu(), alloc, MemCategory::Buffers);
                        recv_tensor(*pipe_, x->out_grad, stage_ + 1, kTagGrad);
                        break;
                    case InstrType::BackwardPass: {
                        DS_CHECK(x->mb == in.micro_batch, DS_ERR_INTERNAL,
                                 "pipeline buffer %d holds micro-batch %d, the schedule backwards %d", in.buffer_id,
                                 x->mb, in.micro_batch);
                        if (live_mb != x->mb) forward(*x, true);
                        const auto tb = Clock::now();
                        if (!last_) b.set_stage_out_grad(std::move(x->out_grad));
                        e_.backward(nullptr);
                        live_mb = -1;
                        x->in_grad = b.take_input_grad();
                        x->input = Tensor();
                        x->targets = Tensor();
                        stats_.compute_seconds += seconds_since(tb);
                        // Every micro-step but the batch's last counts here; the
                        // last one steps at OptimizerStep, after the reductions.
                        if (x->mb != M - 1) e_.step();
                        break;
                    }
                    case InstrType::SendGrad:
                        send_tensor(*pipe_, x->in_grad, stage_ - 1, kTagGrad);
                        x->in_grad = Tensor();
                        break;
                    case InstrType::ReduceTiedGrads:
                        reduce_tied_grads();
                        break;
                    case InstrType::ReduceGrads:
                        break;  // the data-parallel reduction is the engine step's (ZeRO 0/1)
                    case InstrType::OptimizerStep:
                        // Every stage is here (the schedule's last step): the
                        // batch's loss goes to every stage and to the monitors
                        // (this batch's train_loss event), then the step.
                        loss = mean_loss(loss_sum, M);
                        e_.monitors().forward_begin(e_.counters().global_steps, nullptr);
                        e_.monitors().forward_end(M * micro * T, loss, 0.0);
                        {
                            const auto ts = Clock::now();
                            result = e_.step();
                            stats_.compute_seconds += seconds_since(ts);
                        }
                        break;
                }
            }
        }
    } catch (...) {
        // A failure part-way (a neighbour timed out, out of memory): the
        // window's gradients are dropped, the weights are as before the batch.
        b.reset();
        e_.reset_window();
        e_.restore_counters(counters_before);
        b.restore_stream(b.seed(), base + static_cast<uint64_t>(M));
        throw;
    }
    b.restore_stream(b.seed(), base + static_cast<uint64_t>(M));
    if (step) *step = result;
    stats_.wall_seconds = seconds_since(t0);
    return loss;
}

float PipeEngine::eval_batch(const Tensor& inputs, const Tensor& targets) {
    const auto t0 = Clock::now();
    stats_ = BatchStats();
    ModelBinding& b = *e_.model_binding();
    const int32_t M = micro_batches();
    const int64_t micro = e_.config().train_micro_batch_size_per_gpu;
    const int64_t T = agree_on_batch(inputs, targets, M * micro);
    const int64_t C = b.model().spec().gpt.n_embd;
    Schedule sched(ScheduleKind::Inference, M, stages_, stage_);
    struct Buffer {
        int32_t mb = -1;
        Tensor input, targets, output;
    };
    std::vector<Buffer> buf(static_cast<size_t>(sched.num_pipe_buffers()));
    double loss_sum = 0.0;
    for (int32_t t = 0; t < sched.num_steps(); ++t) {
        for (const Instruction& in : sched.step(t)) {
            Buffer& x = buf[static_cast<size_t>(in.buffer_id)];
            switch (in.type) {
                case InstrType::LoadMicroBatch:
                    x.mb = in.micro_batch;
                    if (first_) x.input = micro_slice(inputs, in.micro_batch, micro);
                    if (last_) x.targets = micro_slice(targets, in.micro_batch, micro);
                    break;
                case InstrType::RecvActivation:
                    x.input = Tensor::empty({micro, T, C}, DType::F32, Device::cpu(), e_.allocator(),
                                            MemCategory::Buffers);
                    recv_tensor(*pipe_, x.input, stage_ - 1, kTagActivation);
                    break;
                case InstrType::ForwardPass: {
                    const auto tf = Clock::now();
                    float loss = 0.0f;
                    // At the stream's position, as ds_forward under eval: MoE gating's
                    // RTS and top-2 sampling draw in eval too (DeepSpeed's top1/top2gating).
                    x.output = b.forward_stage(x.input, last_ ? x.targets : Tensor(), b.forward_index(),
                                               /*training=*/false, &loss);
                    loss_sum += loss;  // the last stage's loss, another stage's MoE aux terms
                    stats_.compute_seconds += seconds_since(tf);
                    break;
                }
                case InstrType::SendActivation:
                    send_tensor(*pipe_, x.output, stage_ + 1, kTagActivation);
                    x.output = Tensor();
                    break;
                default:
                    fail(DS_ERR_INTERNAL, "the inference schedule yielded %s", instr_name(in.type));
            }
        }
    }
    const float loss = mean_loss(loss_sum, M);
    stats_.wall_seconds = seconds_since(t0);
    return loss;
}

std::unique_ptr<Engine> create_stage_engine(const std::string& config_json, const EngineOptions& options,
                                            std::shared_ptr<comm::Communicator> world,
                                            std::shared_ptr<nn::Model> model) {
    if (!world) world = comm::make_world(comm::options_from_env());
    const nn::GptSpec& g = model->spec().gpt;
    const int S = static_cast<int>(g.pipeline.stages);
    const int W = world->size();
    // With tensor_parallel.autotp_size = N > 1 too: DeepSpeed's
    // PipeModelDataParallelTopology (pipe x data x model, model fastest).
    const int N = static_cast<int>(std::max<int64_t>(1, tp::autotp_size(config_json)));
    DS_CHECK(W % S == 0, DS_ERR_INVALID_ARGUMENT,
             "model spec pipeline.stages = %d does not divide the world size %d (the world is pipe x data)", S, W);
    DS_CHECK(W % (S * N) == 0, DS_ERR_INVALID_CONFIG,
             "model spec pipeline.stages = %d x tensor_parallel.autotp_size = %d does not divide the world size %d "
             "(the world is pipe x data x model)",
             S, N, W);
    // With moe.ep_size = P > 1: expert groups of P consecutive replicas within
    // each stage (and tp rank), DeepSpeed's groups (engine/parallel_groups.h).
    const int P = g.moe.enabled ? static_cast<int>(g.moe.ep_size) : 1;
    DS_CHECK((W / (S * N)) % P == 0, DS_ERR_INVALID_ARGUMENT,
             "model spec moe.ep_size = %d does not divide the %d data-parallel replicas of each pipeline stage (the "
             "world of %d ranks is pipe x data%s with pipeline.stages = %d; an expert group is ep_size consecutive "
             "replicas of one stage)",
             P, W / (S * N), W, N > 1 ? " x model" : "", S);
    ProcessTopology topo = N > 1 ? ProcessTopology({"pipe", "data", "model"}, {S, W / (S * N), N})
                                 : ProcessTopology::pipe_data(S, W / S);
    const ParallelGroups pg = make_parallel_groups(world, S, N, P);
    const int stage = pg.stage, replica = pg.replica, tp_rank = pg.tp_rank;

    // The partition: the same on every rank (a pure function of the spec).
    const std::vector<nn::PipeLayerInfo> layers = nn::gpt_pipe_layers(g);
    std::vector<int64_t> counts;
    std::vector<std::string> types;
    for (const auto& l : layers) {
        counts.push_back(l.params);
        types.push_back(l.type);
    }
    std::vector<int32_t> parts;
    try {
        parts = partition_layers(g.pipeline.partition_method, static_cast<int32_t>(layers.size()), counts, types, S);
    } catch (const Error& e) {
        throw Error(e.status(), std::string("model spec pipeline.partition_method: ") + e.what());
    }
    for (int s = 0; s < S; ++s)
        DS_CHECK(parts[static_cast<size_t>(s) + 1] > parts[static_cast<size_t>(s)], DS_ERR_INVALID_ARGUMENT,
                 "model spec pipeline: partition_method \"%s\" leaves stage %d of %d without layers (the GPT has %zu "
                 "pipeline layers: embedding, %lld transformer layers, ln_f, head)",
                 g.pipeline.partition_method.c_str(), s, S, layers.size(), static_cast<long long>(g.n_layer));

    // The tied embedding's group: the first and last stage of each replica (and tp rank).
    std::shared_ptr<comm::Communicator> tie;
    const bool tied = g.tied_embeddings && S > 1;
    if (tied) {
        const bool member = stage == 0 || stage == S - 1;
        tie = world->split(member ? replica * N + tp_rank : comm::kSplitUndefined, stage);
    }

    EngineOptions stage_options = options;
    stage_options.monitor_rank = world->rank();  // only world rank 0 writes the monitors' files
    stage_options.batch_world_size = pg.replicas;  // with experts split the engine runs on fewer ranks
    // The stage's engine: on its replicas, or with experts split on the
    // replicas holding the same experts (the expert-data group).
    auto e = std::make_unique<Engine>(config_json, stage_options, pg.expert_data);
    DS_CHECK(e->config().zero_optimization.stage <= 1, DS_ERR_UNSUPPORTED,
             "zero_optimization.stage = %lld with a pipeline model: DeepSpeed's pipeline engine supports ZeRO stages "
             "0 and 1 (stages 2 and 3 partition gradients across micro-batches the schedule interleaves)",
             static_cast<long long>(e->config().zero_optimization.stage));
    DS_CHECK(e->config().managed_gradient_accumulation, DS_ERR_UNSUPPORTED,
             "managed_gradient_accumulation = false with a pipeline model: a pipeline batch is "
             "gradient_accumulation_steps micro-batches");
    if (P > 1) ep::check_expert_parallel_engine(*e, P);
    nn::cut_gpt_to_stage(*model, parts[static_cast<size_t>(stage)], parts[static_cast<size_t>(stage) + 1]);
    if (N > 1) tp::shard_model(*model, pg.model, tp_rank, N);
    if (P > 1) ep::shard_experts(*model, pg.expert, pg.ep_rank, P);
    e->require_cpu_engine("a pipeline stage (a built-in model cut into stages)");
    e->attach_model(model);
    if (N > 1) tp::exclude_replicated_from_norm(*e, *model, tp_rank);
    if (P > 1) ep::reduce_over_expert_group(*e, *model, pg.expert, pg.ep_rank, P);
    // The tied weight counts once in the norm across stages: on the first
    // stage (DeepSpeed marks the other copies ds_pipe_replicated).
    if (tied && stage == S - 1) e->params().get("wte.weight").norm_excluded = true;
    // The norm's group: every part of one replica's model (DeepSpeed's
    // model-parallel group: stages and tp ranks), and its expert group.
    e->set_norm_combiner(norm_sum_over(pg.norm));
    // Checkpoints describe the logical model (engine/shard_layout.h).
    e->set_shard_layout(build_shard_layout(*model, world));
    e->attach_pipeline(std::make_unique<PipeEngine>(*e, world, pg.pipe, pg.data, tie, topo, parts));
    return e;
}

}  // namespace ds::pipe
