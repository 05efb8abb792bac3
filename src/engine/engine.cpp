// Engine construction, parameter registration, init and views.
#include "engine/engine.h"

#include "ckpt/names.h"

#include <cmath>

#include "core/dlpack_interop.h"
#include "core/error.h"
#include "engine/device_front.h"
#include "engine/engine_model.h"
#include "engine/rank_agreement.h"
#include "engine/pipeline_engine.h"

namespace ds {

Engine::Engine(const std::string& config_json, const EngineOptions& options,
               std::shared_ptr<comm::Communicator> comm)
    : logger_(options.log_callback, options.log_user_data, options.log_level, /*rank=*/0),
      scaler_(precision::LossScaler::make_static(1.0)) {
    comm_ = comm ? std::move(comm) : comm::make_world(comm::options_from_env());
    DS_CHECK(!comm_->device_buffers(), DS_ERR_UNSUPPORTED,
             "options.comm: a %s communicator moves only CUDA device buffers, but the engine needs a host one (MPI) "
             "for its agreements and host buffers; pass the mpi communicator (a device-resident engine on cuda:N "
             "makes its own NCCL communicator over it)",
             comm::backend_name(comm_->backend()));
    rank_ = comm_->rank();
    world_size_ = comm_->size();
    batch_world_size_ = options.batch_world_size > 0 ? options.batch_world_size : world_size_;
    logger_.set_rank(rank_);
    // Collective with several ranks: every rank's resolved config must be the
    // same, checked before anything else is communicated (rank_agreement.h).
    // Every check that could fail on one rank alone runs inside, so that no
    // rank is left waiting for one that gave up.
    agree::agree_on_config(*comm_, [&] {
        config_ = config::parse(config_json, batch_world_size_);
        config::check_supported(config_);
        device_ = check_device(options, config_, world_size_);  // engine_device.cpp
        resolved_json_ = config::to_json(config_);
        // Rank 0 creates the monitors' files here, so a failure reaches every rank.
        monitors_ = std::make_unique<monitor::MonitorHub>(
            config_, options.monitor_rank >= 0 ? options.monitor_rank : rank_, world_size_, logger_);
        const auto& cl = config_.sections.comms_logger;
        for (size_t i = 0; i < cl.prof_ops.size(); ++i)
            DS_CHECK(comm::is_comm_op_name(cl.prof_ops[i]), DS_ERR_INVALID_CONFIG,
                     "comms_logger.prof_ops[%zu]: \"%s\" is not a communication operation (known: %s)", i,
                     cl.prof_ops[i].c_str(), comm::comm_op_names_list());
        return resolved_json_;
    }, [&] {
        const bool on_device = device_.is_cuda() && !config_.zero_optimization.offloads_optimizer();
        return on_device ? agree::Placement::Device : agree::Placement::Host;
    });
    for (const config::IgnoredSetting& i : config::ignored_settings(config_))  // once per engine
        if (!honoured_on_device(i.key))
            DS_LOG(logger_, DS_LOG_WARN, "config: %s = %s is ignored: %s", i.key.c_str(), i.value.c_str(), i.why.c_str());
    working_dtype_ = config_.model_dtype();
    grad_dtype_ = config_.grad_accum_dtype();
    zero::StrategyContext zc;
    zc.comm = comm_;
    zc.config = &config_;
    zc.working_dtype = working_dtype_;
    zc.grad_dtype = grad_dtype_;
    zc.alloc = &alloc_;
    // ZeRO-Offload (offload_optimizer set) keeps the strategy's buffers in host
    // memory on every device; without it an engine on cuda:N keeps them there.
    const bool offload = config_.zero_optimization.offloads_optimizer();
    zc.device = device_.is_cuda() && !offload ? device_ : Device::cpu();
    zc.kernels = kernels_for(zc.device);
    // Pinned: the host working weights a GPU reads (ZeRO-Offload's, or a
    // device-resident ZeRO-3's partitions with offload_param "cpu").
    const config::ZeroConfig& zcfg = config_.zero_optimization;
    zc.pin_working = device_.is_cuda() && (offload ? pins_weight_copies(zcfg)
                                                   : zcfg.stage == 3 && zcfg.offloads_params_to("cpu") &&
                                                         zcfg.offload_param->pin_memory);
    if (zc.device.is_cuda() && needs_data_comm(config_, world_size_)) data_comm_ = make_data_comm();
    zc.data_comm = data_comm_;
    strategy_ = zero::Strategy::create(zc);
    if (device_.is_cuda() && offload)
        front_ = std::make_unique<DeviceFront>(device_, zcfg.offload_optimizer->pin_memory, zc.pin_working, alloc_);
    stream_ = options.cuda_stream;
    scaler_ = precision::LossScaler::from_config(config_.fp16);
    if (config_.sections.comms_logger.enabled) {
        const auto& cl = config_.sections.comms_logger;
        comm::CommsLoggerOptions o;
        o.verbose = cl.verbose;
        o.prof_all = cl.prof_all;
        o.prof_ops = cl.prof_ops;
        o.debug = cl.debug;
        comms_logger_ = std::make_shared<comm::CommsLogger>(o, logger_, rank_, world_size_);
        comm_->set_comms_logger(comms_logger_);
        if (data_comm_) data_comm_->set_comms_logger(comms_logger_);
    }
    DS_LOG(logger_, DS_LOG_INFO,
           "engine created: world_size=%d train_batch_size=%lld micro=%lld gas=%lld dtype=%s",
           world_size_, static_cast<long long>(config_.train_batch_size),
           static_cast<long long>(config_.train_micro_batch_size_per_gpu),
           static_cast<long long>(config_.gradient_accumulation_steps), dtype_name(working_dtype_));
}

Engine::~Engine() {
    // The communicator may outlive this engine (a shared one): stop logging into it.
    if (comms_logger_ && comm_->comms_logger() == comms_logger_) comm_->set_comms_logger(nullptr);
}

void Engine::attach_pipeline(std::unique_ptr<pipe::PipeEngine> p) {
    DS_CHECK(model_ != nullptr && !pipe_, DS_ERR_INTERNAL, "attach_pipeline: the engine needs its stage's model, once");
    pipe_ = std::move(p);
}

void Engine::require_not_pipeline(const char* call) const {
    DS_CHECK(!pipe_, DS_ERR_INVALID_STATE,
             "%s on a pipeline stage's engine (the model spec's pipeline.stages > 1): train with ds_train_batch "
             "and evaluate with ds_eval_batch, which run the pipeline schedule on every stage",
             call);
}

void Engine::require_initialized(const char* call, uint32_t needs) const {
    DS_CHECK(initialized_, DS_ERR_INVALID_STATE,
             "%s called before ds_engine_init: add parameters, then call ds_engine_init first", call);
    if (!state_swaps_.empty()) require_states_resident(call, needs);  // engine_offload_states.cpp
}

void Engine::add_param(const char* name, const DLTensor* init, uint32_t flags) {
    DS_CHECK(!initialized_, DS_ERR_INVALID_STATE,
             "ds_engine_add_param('%s') after ds_engine_init: every parameter must be added before init",
             name);
    DS_CHECK((flags & DS_PARAM_EXPERT) == 0, DS_ERR_UNSUPPORTED,
             "parameter '%s': DS_PARAM_EXPERT is reported for the built-in MoE layers' experts; expert "
             "parameters of a host's own layers (reduced over an expert-data-parallel group) are not built",
             name);
    DS_CHECK((flags & ~DS_PARAM_TRAINABLE) == 0, DS_ERR_INVALID_ARGUMENT,
             "parameter '%s': unknown flag bits 0x%x (only DS_PARAM_TRAINABLE is defined)", name,
             flags & ~DS_PARAM_TRAINABLE);
    std::string what = std::string("init (parameter '") + name + "')";
    Tensor t = from_dltensor(init, what.c_str(), /*require_contiguous=*/false);
    if (t.device().is_cuda()) t = device_init_to_host(t, init, what.c_str());
    // What a checkpoint can hold, with the limits its readers apply.
    const uint64_t entry = ckpt::check_param_entry(name, t.shape(), ckpt_header_bytes_);
    params_.add(name, t, (flags & DS_PARAM_TRAINABLE) != 0, working_dtype_, alloc_);
    ckpt_header_bytes_ += entry;
}

void Engine::init() {
    const size_t trainable = params_.trainable_count();
    // Collective: every rank checks its own state, then all agree on the
    // call and on the registered parameters before any other collective.
    agree::agree_on_init(*comm_, params_, [&] {
        DS_CHECK(!initialized_, DS_ERR_INVALID_STATE, "ds_engine_init called twice");
        DS_CHECK(params_.size() > 0, DS_ERR_INVALID_STATE,
                 "ds_engine_init: no parameters were added (call ds_engine_add_param first)");
        DS_CHECK(!config_.sections.flops_profiler.enabled || model_, DS_ERR_UNSUPPORTED,
                 "flops_profiler.enabled: the flops profiler profiles a built-in model's forward, and this engine has "
                 "none (create it with ds_engine_create_with_model and run ds_forward)");
        if (trainable > 0) {
            DS_CHECK(config_.optimizer.has_value(), DS_ERR_INVALID_CONFIG,
                     "optimizer: the config has no \"optimizer\" section but %zu parameters are trainable",
                     trainable);
        }
    });
    size_t n_states = 0;
    DType state_dtype = DType::F32;
    if (config_.optimizer) {
        optimizer_ = optim::Optimizer::create(*config_.optimizer, config_.model_dtype());
        n_states = optimizer_->state_names().size();
        state_dtype = dtype_from_kernel(optimizer_->state_dtype());
        lr_ = optimizer_->lr();
        beta1_ = optimizer_->beta1();
        beta2_ = optimizer_->beta2();
        if (config_.scheduler) {
            scheduler_ = sched::LrScheduler::create(*config_.scheduler, optimizer_->lr(),
                                                    optimizer_->has_betas());
            apply_schedule();
        }
    }
    strategy_->broadcast_initial(params_);  // rank 0's values everywhere, as DeepSpeed broadcasts the model
    {
        const auto on = device_scope();  // a device-resident engine's kernels run on its device
        strategy_->materialize(params_, n_states, state_dtype);
    }
    if (front_) {
        front_->materialize(params_, strategy_->flat_working());
        // ZeRO-Offload: the updated weights go to the GPU piece by piece while the CPU steps.
        if (front_->mirrors_flat())
            strategy_->set_step_sink([f = front_.get()](int64_t begin, int64_t count) { f->upload_range(begin, count); });
    }
    initialized_ = true;
    DS_LOG(logger_, DS_LOG_INFO, "engine initialized: %zu parameters (%zu trainable), optimizer %s",
           params_.size(), trainable, optimizer_ ? optimizer_->name() : "none");
}

// The schedule's value at its current index becomes the optimizer's lr (and
// betas while OneCycle cycles momentum), as DeepSpeed's schedulers write
// them into the param groups.
void Engine::apply_schedule() {
    if (!scheduler_) return;
    sched::LrValues v = scheduler_->current();
    lr_ = v.lr;
    if (v.has_beta1) {
        beta1_ = v.beta1;
        beta2_ = v.beta2;
    }
}

void Engine::restore_hyperparameters(double lr, double beta1, double beta2) noexcept {
    lr_ = lr;
    beta1_ = beta1;
    beta2_ = beta2;
}

void Engine::restore_schedule(int64_t last_batch_iteration, bool take_lr) noexcept {
    if (!scheduler_) return;
    scheduler_->set_last_batch_iteration(last_batch_iteration);
    if (take_lr) apply_schedule();
}

void Engine::set_lr(double lr) {
    DS_CHECK(std::isfinite(lr) && lr >= 0.0, DS_ERR_INVALID_ARGUMENT,
             "lr = %g: the learning rate must be finite and >= 0", lr);
    lr_ = lr;
}

void Engine::param_view(const char* name, DLTensor* out) {
    require_initialized("ds_engine_param_view", DS_OFFLOAD_LP_PARAMS);
    require_on_device();
    const Param& p = params_.get(name);
    DS_CHECK(p.working.defined() && !strategy_->released(p), DS_ERR_INVALID_STATE,
             "ds_engine_param_view('%s'): the parameter is partitioned across ranks (ZeRO stage 3); "
             "call ds_engine_gather for it first (and ds_engine_release after use)",
             name);
    fill_view(front_ ? front_->weights(p) : p.working, out);
}

Param& Engine::trainable_param(const char* name, const char* what) {
    Param& p = params_.get(name);
    DS_CHECK(p.trainable, DS_ERR_INVALID_ARGUMENT,
             "parameter '%s' is frozen (added without DS_PARAM_TRAINABLE): it has no %s", name, what);
    return p;
}

void Engine::grad_view(const char* name, DLTensor* out) {
    require_initialized("ds_engine_grad_view", DS_OFFLOAD_LP_GRADS);
    require_on_device();
    Param& p = trainable_param(name, "gradient");
    DS_CHECK(!front_, DS_ERR_UNSUPPORTED,
             "ds_engine_grad_view('%s') on a ZeRO-Offload engine on %s: its gradients are accumulated in host "
             "memory; hand them over with ds_engine_accumulate_grad",
             name, device_.str().c_str());
    DS_CHECK(p.grad.defined(), DS_ERR_UNSUPPORTED,
             "ds_engine_grad_view('%s'): at ZeRO stage 2 gradients are reduced into partitions as they "
             "arrive; hand them over with ds_engine_accumulate_grad",
             name);
    ParamStore::clear_if_stale(p);  // the host may add into it directly
    p.norm_cached = false;
    p.grad_viewed = true;  // from now on the step reads the buffer for the norm
    fill_view(p.grad, out);
}

}  // namespace ds
