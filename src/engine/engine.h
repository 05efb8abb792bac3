// The training engine (host-driven mode, DESIGN.md §4): owns the resolved
// config, the parameters, the loss scaler, the LR schedule, the micro-step
// state machine and the counters, and orchestrates a step; what the ZeRO
// stage decides (the flat buffers, gradient reduction, the norm across
// ranks, the partitioned optimizer step, weight all-gather, ZeRO-3
// gathering, checkpoint fragments) is its zero::Strategy's.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <dlpack/dlpack.h>

#include "comm/communicator.h"
#include "config/config.h"
#include "core/allocator.h"
#include "core/device_memory.h"
#include "core/log.h"
#include "engine/engine_options.h"
#include "monitor/monitor_hub.h"
#include "optim/optimizer.h"
#include "precision/loss_scaler.h"
#include "sched/lr_scheduler.h"
#include "zero/param_store.h"
#include "zero/strategy.h"

namespace ds {

namespace nn {
class Model;
class Module;
}  // namespace nn
class ModelBinding;  // engine/engine_model.h
class DeviceFront;   // engine/device_front.h
class ShardLayout;   // engine/shard_layout.h
namespace pipe {
class PipeEngine;  // engine/pipeline_engine.h
}  // namespace pipe

// DeepSpeed's engine counters (DEEPSPEED_SEMANTICS.md §5.1).
struct Counters {
    int64_t micro_steps = 0;      // ds_step calls
    int64_t global_steps = 0;     // boundaries, skipped ones included
    int64_t global_samples = 0;
    int64_t skipped_steps = 0;
    int64_t optimizer_steps = 0;  // applied optimizer steps (the optimizer's t)
};

struct StepResult {
    bool stepped = false;
    bool skipped = false;
    double grad_norm = 0.0;
    double lr = 0.0;
};

class Engine {
public:
    // Parse, validate and resolve `config_json`; throws ds::Error.
    // `comm`: the communicator to join; null: the world this process was
    // started in (MPI_COMM_WORLD under mpirun/srun, else a world of one).
    Engine(const std::string& config_json, const EngineOptions& options,
           std::shared_ptr<comm::Communicator> comm = nullptr);
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    const config::Config& config() const { return config_; }
    const std::string& resolved_config_json() const { return resolved_json_; }
    int32_t rank() const { return rank_; }
    int32_t world_size() const { return world_size_; }
    int zero_stage() const { return strategy_->stage(); }
    const Logger& logger() const { return logger_; }
    Allocator& allocator() { return alloc_; }
    const Allocator& allocator() const { return alloc_; }  // byte counters (ds_engine_memory_report)
    // Bytes of master weights / optimizer state in NVMe swap files (ds_engine_disk_report).
    void disk_bytes(int64_t* params, int64_t* optimizer_state) const {
        *params = *optimizer_state = 0;
        if (strategy_) strategy_->disk_bytes(params, optimizer_state);
    }
    // ds_engine_offload_states / reload_states / empty_partition_cache
    // (engine_offload_states.cpp): `which` DS_OFFLOAD_* flags (0 = all),
    // `device` DS_OFFLOAD_DEVICE_*, `nvme_path` NULL = the config's.
    void offload_states(uint32_t which, int32_t device, const char* nvme_path);
    void reload_states();
    void empty_partition_cache();
    uint32_t offloaded_states() const;  // DS_OFFLOAD_* flags now out of memory
    // Bytes of offloaded states on disk / released from memory (these, and
    // offload_param "nvme" pages out), per category.
    int64_t offloaded_disk_bytes(MemCategory c) const;
    int64_t offloaded_released_bytes(MemCategory c) const;
    DType working_dtype() const { return working_dtype_; }  // of every parameter's working copy
    DType grad_dtype() const { return grad_dtype_; }        // of the gradient buffers

    // ---- parameters (engine.cpp) ----
    void add_param(const char* name, const DLTensor* init, uint32_t flags);
    void init();
    void param_view(const char* name, DLTensor* out);
    void grad_view(const char* name, DLTensor* out);
    void get_full(FullTensor which, const char* name, const char* key, const DLTensor* out);
    void set_full(FullTensor which, const char* name, const char* key, const DLTensor* value);
    const ParamStore& params() const { return params_; }
    ParamStore& params() { return params_; }
    // ZeRO-3 (engine_gather.cpp): whole working weights of `names` on every
    // rank until released (DeepSpeed's GatheredParameters). Collective.
    void gather(const char* const* names, int32_t n);
    void release(const char* const* names, int32_t n);

    // ---- training (engine_step.cpp) ----
    // flags: 0 or DS_GRAD_PREDIVIDED (the host already divided by the
    // accumulation steps: its loss was multiplied by loss_multiplier()).
    void accumulate_grad(const char* name, const DLTensor* grad, uint32_t flags = 0);
    // A built-in model's gradient (ModelBinding), pre-divided. On a
    // ZeRO-Offload engine on a GPU its copy to the host is queued
    // (engine/grad_pipe.h) and accumulated later; returns the copy's ticket
    // for fence_model_grad (0: accumulated already).
    uint64_t accumulate_model_grad(const char* name, const DLTensor* grad);
    bool queues_model_grads() const { return front_ != nullptr; }
    // The device's later work runs after copy `ticket` read its source.
    void fence_model_grad(uint64_t ticket);
    void drain_model_grads();               // every queued gradient accumulated, in order
    void discard_model_grads() noexcept;    // the queued ones dropped (a failed backward)
    void backward(const DLTensor* out_grad);
    StepResult step();

    // ---- built-in model (engine_model.cpp) ----
    // Registers the model's parameters under its names, then init().
    void attach_model(std::shared_ptr<nn::Model> model);
    // ds_forward / ds_engine_eval: DS_ERR_INVALID_STATE without a model.
    void forward(const DLTensor* inputs, int32_t n_inputs, DLTensor* out);
    void set_eval(bool on);
    ModelBinding* model_binding() { return model_.get(); }
    const ModelBinding* model_binding() const { return model_.get(); }
    // The model's root module (the flops profiler walks it), or nullptr.
    nn::Module* model();
    bool initialized() const { return initialized_; }
    // ---- device (engine_device.cpp) ----
    // Where the working weights the host computes with live: cpu, or cuda:N
    // (ZeRO-Offload: engine/device_front.h).
    Device device() const { return device_; }
    // The working weights a model computing on device() reads: p.working,
    // or on a ZeRO-Offload engine their device copy (DeviceFront).
    const Tensor& model_weights(const Param& p) const;
    // ZeRO-3 on a ZeRO-Offload engine: frees the device copies of the
    // parameters released since (after any release of gathered weights).
    void drop_released_device_weights();
    // Gathers `ps` all or nothing (a failure part-way releases what it
    // gathered) and, on a ZeRO-Offload engine at ZeRO-3, starts their device
    // copies (DeviceFront::stage_gathered). ds_engine_gather and the
    // built-in model's per-layer gathers.
    // `ahead`: the weights are a layer the built-in model gathers before the
    // current one's kernels are queued (ModelBinding's prefetch), so their
    // device copies run while those kernels do (DeviceFront::stage_gathered).
    void gather_params(const std::vector<Param*>& ps, bool ahead = false);
    // ZeRO-Offload at ZeRO-3 on a GPU: a gather also starts the gathered
    // weights' copies to the device (gather_params).
    bool stages_gathered_weights() const;
    // DS_ERR_UNSUPPORTED naming `call` on an engine on cuda:N.
    void require_cpu_engine(const char* call) const;
    // A communicator of device buffers over `host`'s ranks, on GPU
    // `device_index`: NCCL (collective over `host`; DS_ERR_UNSUPPORTED in a
    // build without NCCL), or `host` itself on the host-backed test device.
    static std::shared_ptr<comm::Communicator> device_comm_over(const std::shared_ptr<comm::Communicator>& host,
                                                                int32_t device_index);
    // ds_engine_set_stream: DS_ERR_INVALID_STATE on a CPU engine.
    void set_stream(void* cuda_stream);
    // Around every exclusive ds_* call on the engine (api/handles.cpp): with a
    // stream set, the engine's device work (on the legacy default stream) is
    // ordered after the work queued on the caller's stream before the call,
    // and the caller's later work after the engine's (no host wait).
    void call_begins();
    void call_ends();
    comm::Communicator& comm() { return *comm_; }

    double loss_scale() const { return scaler_.scale(); }
    // What DeepSpeed's backward multiplies the loss by: scale / accumulation steps.
    double loss_multiplier() const;
    double lr() const { return lr_; }
    double beta1() const { return beta1_; }  // as scheduled (OneCycle cycles it)
    double beta2() const { return beta2_; }
    void set_lr(double lr);
    const Counters& counters() const { return counters_; }
    bool is_gradient_accumulation_boundary() const;
    void set_gradient_accumulation_boundary(bool value);

    // ---- pipeline stage (engine/pipeline_engine.h) ----
    // An engine that trains one stage of a pipeline: ds_train_batch /
    // ds_eval_batch run its schedule; ds_forward, ds_backward and ds_step
    // are refused (DeepSpeed's PipelineEngine allows only train_batch).
    void attach_pipeline(std::unique_ptr<pipe::PipeEngine> p);
    pipe::PipeEngine* pipeline() { return pipe_.get(); }
    const pipe::PipeEngine* pipeline() const { return pipe_.get(); }
    // DS_ERR_INVALID_STATE naming `call` on a pipeline stage's engine.
    void require_not_pipeline(const char* call) const;
    // Called at every boundary with the gradient's sum of squares and
    // overflow over this engine's ranks: a pipeline stage adds the other
    // stages' (the norm clipped and reported is the whole model's, and one
    // stage's overflow skips every stage's step).
    void set_norm_combiner(std::function<void(double* sumsq, bool* overflow)> f) { norm_combiner_ = std::move(f); }
    // A part of a larger model (a pipeline stage, a tensor- or
    // expert-parallel shard; engine/shard_layout.h): its checkpoints and
    // 16-bit exports describe the logical model, written and read
    // collectively over the layout's world (engine_checkpoint_sharded.cpp).
    void set_shard_layout(std::shared_ptr<const ShardLayout> layout) { shard_layout_ = std::move(layout); }
    const ShardLayout* shard_layout() const { return shard_layout_.get(); }
    // The ranks a checkpoint call is collective over: the layout's world for
    // a sharded engine, else the engine's own communicator.
    comm::Communicator& checkpoint_comm() const;
    // Called at every boundary before the strategy reduces the gradients
    // (ZeRO 0/1: they are whole in each parameter's buffer): an
    // expert-parallel engine reduces them over its expert group first.
    void set_pre_reduce(std::function<void()> f) { pre_reduce_ = std::move(f); }

    // ---- checkpoints (engine_checkpoint.cpp; format: docs/CHECKPOINTS.md) ----
    void save_checkpoint(const char* save_dir, const char* tag, const char* client_state_json);
    // Returns the checkpoint's client state JSON ("{}" when none was saved);
    // the string lives until the next load on this engine.
    const std::string& load_checkpoint(const char* load_dir, const char* tag, uint32_t flags);
    void save_16bit_model(const char* save_dir, const char* filename, uint32_t flags = 0);
    // DS_ERR_INVALID_STATE (naming `call`) inside a gradient accumulation window.
    void require_window_boundary(const char* call) const;

    // ---- component state, saved and restored by the checkpoint code ----
    const optim::Optimizer* optimizer() const { return optimizer_.get(); }
    const sched::LrScheduler* scheduler() const { return scheduler_.get(); }
    const precision::LossScaler& scaler() const { return scaler_; }
    zero::Strategy& strategy() { return *strategy_; }
    // Restores (cannot fail): the optimizer's hyper-parameters as scheduled,
    // the counters, the loss scaler, the schedule's position (`take_lr`:
    // its value there becomes the lr).
    void restore_hyperparameters(double lr, double beta1, double beta2) noexcept;
    void restore_counters(const Counters& c) noexcept { counters_ = c; }
    void restore_scaler(const precision::LossScaler& s) noexcept { scaler_ = s; }
    void restore_schedule(int64_t last_batch_iteration, bool take_lr) noexcept;
    // Forgets the accumulation window in flight (its gradients and backward calls).
    void reset_window() noexcept;

    // ---- monitoring (src/monitor): csv/tensorboard events, wall-clock timers, throughput ----
    monitor::MonitorHub& monitors() { return *monitors_; }
    // The comms logger this engine installed on its communicator (comms_logger.enabled); null: none.
    const std::shared_ptr<comm::CommsLogger>& comms_logger() const { return comms_logger_; }
    // ds_engine_comms_log_summary: the table (rank 0 logs it); the text lives
    // until the next call. DS_ERR_INVALID_STATE without a comms logger.
    const std::string& log_comms_summary();

private:
    std::string loaded_client_state_;
    // Why the last ds_load_checkpoint failed after it began writing the
    // engine's state (a swap file write), or empty: the state is then a mix
    // of the old and the checkpoint's, and training is refused until a load
    // succeeds.
    std::string load_failed_;
    uint64_t ckpt_header_bytes_ = 0;  // bound of the model file's safetensors header (add_param)

    // DS_ERR_INVALID_STATE before ds_engine_init, or while a state in
    // `needs` (DS_OFFLOAD_* flags; default: every state) is offloaded.
    void require_initialized(const char* call, uint32_t needs = 0xffffffffu) const;
    void require_states_resident(const char* call, uint32_t needs) const;
    // DS_ERR_INVALID_STATE while the optimizer state is lost (Strategy::state_lost)
    // or a checkpoint load failed half-way (load_failed_).
    void require_state_whole(const char* call) const;
    Param& trainable_param(const char* name, const char* what);
    // options.device and options.cuda_stream checked against the config and
    // the world size (engine_device.cpp).
    static Device check_device(const EngineOptions& o, const config::Config& c, int32_t world);
    // The communicator that moves a device-resident engine's buffers between
    // its ranks: NCCL over comm_'s ranks on this engine's GPU (collective).
    std::shared_ptr<comm::Communicator> make_data_comm() const;
    // Whether a device-resident engine makes one (several ranks; ZeRO-3 with
    // offload_param "cpu" in a world of one too).
    static bool needs_data_comm(const config::Config& c, int32_t world);
    // A device-resident engine (cuda:N without offload): its buffers are the strategy's, on the device.
    bool resident() const { return device_.is_cuda() && !front_; }
    // A device-resident engine's checkpoint calls run on host copies of its
    // buffers (zero::Strategy::park_on_host) for their scope; `write_back`:
    // the call changes them. A failed return to the device is logged and
    // retried by require_on_device().
    class HostParking {
    public:
        HostParking(Engine& e, bool write_back);
        ~HostParking();
        HostParking(const HostParking&) = delete;
        HostParking& operator=(const HostParking&) = delete;

    private:
        Engine& e_;
        bool write_back_;
    };
    // The training calls of a device-resident engine need its buffers on the
    // device: a parked engine goes back (throws if it cannot).
    void require_on_device();
    // A device-resident engine's device made current while it lives (the
    // caller's restored after), for the kernels it runs; nothing otherwise.
    std::optional<device_memory::DeviceScope> device_scope() const;
    // Any engine on cuda:N: its device current while a built-in model runs.
    std::optional<device_memory::DeviceScope> model_device_scope() const;
    // A config key the CPU engine ignores that an engine on cuda:N honours.
    bool honoured_on_device(const std::string& key) const;
    // ZeRO-Offload: whether the host memory the working weights cross to the
    // GPU from is page-locked: offload_param.pin_memory at ZeRO-3 with
    // offload_param "cpu", else offload_optimizer.pin_memory.
    static bool pins_weight_copies(const config::ZeroConfig& z);
    // A ZeRO-Offload engine's device weights after the host's changed: the
    // trainable ones after a step (`trained_only`), all after a load.
    void refresh_device_weights(bool trained_only);
    // ... and one parameter's, after a set_full.
    void refresh_device_weight(const Param& p);
    // An initial value in device memory (the engine's device), as a host tensor.
    Tensor device_init_to_host(const Tensor& t, const DLTensor* init, const char* what);
    StepResult optimizer_step();
    StepResult timed_step(bool boundary);  // step() under the step timers
    const void* stage_gradient(const DLTensor* grad, size_t es, int64_t numel);
    uint64_t accumulate_grad_impl(const char* name, const DLTensor* grad, uint32_t flags, bool queue);
    void apply_schedule();
    void drop_gradients() noexcept;

    std::shared_ptr<comm::Communicator> comm_;
    // A device-resident engine with several ranks: the communicator of its
    // device buffers (engine_device.cpp); null otherwise.
    std::shared_ptr<comm::Communicator> data_comm_;
    int32_t rank_ = 0;
    int32_t world_size_ = 1;
    int32_t batch_world_size_ = 1;  // EngineOptions::batch_world_size
    Logger logger_;
    config::Config config_;
    std::string resolved_json_;
    Allocator alloc_;
    DType working_dtype_ = DType::F32;
    DType grad_dtype_ = DType::F32;

    ParamStore params_;
    std::unique_ptr<zero::Strategy> strategy_;  // the ZeRO stage (zero/strategy.h)
    bool initialized_ = false;
    std::unique_ptr<optim::Optimizer> optimizer_;
    std::unique_ptr<sched::LrScheduler> scheduler_;
    precision::LossScaler scaler_;

    double lr_ = 0.0;
    double beta1_ = 0.9, beta2_ = 0.999;
    Counters counters_;
    bool backward_since_step_ = false;
    int64_t backward_calls_since_step_ = 0;
    int32_t forced_boundary_ = -1;  // -1: not forced; else 0/1 (persists)
    std::vector<float> grad_stage_;  // strided/misaligned gradients, row-major (grows, then reused)
    std::unique_ptr<monitor::MonitorHub> monitors_;
    std::shared_ptr<comm::CommsLogger> comms_logger_;
    std::string comms_summary_;  // the last ds_engine_comms_log_summary text
    std::vector<std::unique_ptr<zero::StateSwap>> state_swaps_;  // ds_engine_offload_states, oldest first
    std::function<void(double*, bool*)> norm_combiner_;
    std::shared_ptr<const ShardLayout> shard_layout_;
    std::function<void()> pre_reduce_;
    Device device_;                        // EngineOptions::device_type/index
    std::unique_ptr<DeviceFront> front_;   // cuda:N: the device copies of the working weights
    void* stream_ = nullptr;               // cuda:N: the caller's stream (options.cuda_stream, set_stream)
    std::unique_ptr<ModelBinding> model_;  // released before the strategy it uses
    std::unique_ptr<pipe::PipeEngine> pipe_;  // last: released before the model binding it drives
};

}  // namespace ds
