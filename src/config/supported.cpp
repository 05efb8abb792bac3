// check_supported(): what this build of the engine can run. Each row of
// policy() names a config key and returns, for a Config that parses, the
// offending value as text (or nothing when the setting is supported). Shrink
// the table as features land; every row must name the key it tests.
// ignored(): the tuning knobs accepted with no effect here (same row shape;
// listed under "ignored" in to_json() and logged once by the engine).
// key_classes.cpp classifies every other key; the audit test checks all.
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "config/config.h"
#include "config/json_writer.h"
#include "config/parse_internal.h"
#include "core/error.h"

namespace ds::config {

namespace {

using Value = std::optional<std::string>;  // the unsupported value, as text

struct Rule {
    const char* key;                           // dotted config key
    std::function<Value(const Config&)> test;  // non-empty => unsupported
    const char* why;                           // what is missing
};

Value when(bool unsupported, const char* text) { return unsupported ? Value(text) : std::nullopt; }
Value if_true(bool v) { return when(v, "true"); }
Value quoted(const std::string& s) { return "\"" + s + "\""; }

bool engine_optimizer(const std::string& t) {
    return t == "adam" || t == "adamw" || t == "lamb" || t == "lion" || t == "SGD";
}
bool engine_scheduler(const std::string& t) {
    return t == "LRRangeTest" || t == "OneCycle" || t == "WarmupLR" || t == "WarmupDecayLR" ||
           t == "WarmupCosineLR";
}

// Rows for one activation_checkpointing / pipeline key that differs from its default.
template <class Section, class T>
Rule differs(const char* key, T Section::*m, const Section& (*get)(const Config&), const char* why) {
    return {key,
            [m, get](const Config& c) -> Value {
                static const Section def{};
                const T& v = get(c).*m;
                if (v == def.*m) return std::nullopt;
                if constexpr (std::is_same_v<T, bool>) return v ? "true" : "false";
                else if constexpr (std::is_same_v<T, int64_t>) return std::to_string(v);
                else if constexpr (std::is_same_v<T, std::string>) return "\"" + v + "\"";
                else if constexpr (std::is_same_v<T, std::optional<int64_t>>)
                    return v ? std::to_string(*v) : std::string("null");
                else return std::string("a non-default value");
            },
            why};
}

const ActivationCheckpointingConfig& ac(const Config& c) { return c.sections.activation_checkpointing; }
const PipelineConfig& pipe(const Config& c) { return c.sections.pipeline; }

const char* const kNoAC = "activation checkpointing is not built in this version";
const char* const kNoPipe = "pipeline parallelism is not built in this version";
const char* const kNoZeroPP = "ZeRO++ (quantized weights/gradients, hierarchical partitioning) is not built";
const char* const kNoMiCS = "MiCS sub-group sharding is not built (ZeRO partitions over the whole world)";

const std::vector<Rule>& policy() {
    using AC = ActivationCheckpointingConfig;
    using PC = PipelineConfig;
    static const std::vector<Rule> rules = {
        {"optimizer.type",
         [](const Config& c) {
             return c.optimizer && c.optimizer->type == "lamb" && c.zero_optimization.stage >= 1 && c.world_size > 1
                        ? quoted(c.optimizer->type)
                        : Value();
         },
         "Lamb's per-tensor trust ratio over a ZeRO-partitioned flat buffer is not built (use ZeRO stage 0)"},
        {"communication_data_type",
         [](const Config& c) {
             return c.communication_data_type && *c.communication_data_type != c.grad_accum_dtype()
                        ? quoted(dtype_name(*c.communication_data_type))
                        : Value();
         },
         "gradients are reduced in the gradient accumulation dtype; a different communication dtype is not built"},
        {"zero_optimization.offload_optimizer.device",
         [](const Config& c) {
             const auto& o = c.zero_optimization.offload_optimizer;
             return o && o->device != "none" ? quoted(o->device) : Value();
         },
         "optimizer offload is not built in this version"},
        {"zero_optimization.offload_param.device",
         [](const Config& c) {
             const auto& o = c.zero_optimization.offload_param;
             return o && o->device != "none" ? quoted(o->device) : Value();
         },
         "parameter offload is not built in this version"},
        {"fp16.fp16_master_weights_and_grads",
         [](const Config& c) { return if_true(c.fp16.fp16_master_weights_and_grads); },
         "only fp32 master weights are built"},
        {"bf16.bf16_master_weights_and_grads",
         [](const Config& c) { return if_true(c.bf16.bf16_master_weights_and_grads); },
         "only fp32 master weights are built"},
        {"bf16.bf16_optimizer_states", [](const Config& c) { return if_true(c.bf16.bf16_optimizer_states); },
         "only fp32 optimizer states are built"},
        {"fp16.auto_cast", [](const Config& c) { return if_true(c.fp16.auto_cast); },
         "input auto-cast is not built in this version"},
        {"optimizer.type",
         [](const Config& c) {
             return c.optimizer && !engine_optimizer(c.optimizer->type) ? quoted(c.optimizer->type) : Value();
         },
         "the engine builds adam, adamw, lamb, lion and SGD"},
        {"optimizer.params.maximize",
         [](const Config& c) { return if_true(c.optimizer && c.optimizer->maximize); },
         "SGD maximize is not built in this version"},
        {"scheduler.type",
         [](const Config& c) {
             return c.scheduler && !engine_scheduler(c.scheduler->type) ? quoted(c.scheduler->type) : Value();
         },
         "only DeepSpeed's five schedulers are built; torch.optim.lr_scheduler classes are not"},
        {"flops_profiler.enabled", [](const Config& c) { return if_true(c.sections.flops_profiler.enabled); },
         "the flops profiler is not built in this version"},
        {"tensorboard.enabled", [](const Config& c) { return if_true(c.sections.tensorboard.enabled); },
         "the TensorBoard monitor is not built in this version"},
        {"csv_monitor.enabled", [](const Config& c) { return if_true(c.sections.csv_monitor.enabled); },
         "the CSV monitor is not built in this version"},
        {"wandb.enabled", [](const Config& c) { return if_true(c.sections.wandb.enabled); },
         "the WandB monitor is not built in this version"},
        {"comet.enabled", [](const Config& c) { return if_true(c.sections.comet.enabled); },
         "the Comet monitor is not built in this version"},
        {"comms_logger.enabled", [](const Config& c) { return if_true(c.sections.comms_logger.enabled); },
         "the comms logger is not built in this version"},
        {"torch_autocast.enabled", [](const Config& c) { return if_true(c.sections.torch_autocast.enabled); },
         "torch autocast is not built in this version"},
        differs("activation_checkpointing.partition_activations", &AC::partition_activations, ac, kNoAC),
        differs("activation_checkpointing.cpu_checkpointing", &AC::cpu_checkpointing, ac, kNoAC),
        differs("activation_checkpointing.contiguous_memory_optimization",
                &AC::contiguous_memory_optimization, ac, kNoAC),
        differs("activation_checkpointing.number_checkpoints", &AC::number_checkpoints, ac, kNoAC),
        differs("activation_checkpointing.synchronize_checkpoint_boundary",
                &AC::synchronize_checkpoint_boundary, ac, kNoAC),
        differs("activation_checkpointing.profile", &AC::profile, ac, kNoAC),
        {"checkpoint.load_universal", [](const Config& c) { return if_true(c.sections.checkpoint.load_universal); },
         "universal checkpoints are not built in this version"},
        {"checkpoint.writer",
         [](const Config& c) { return when(c.sections.checkpoint.writer.has_value(), "an object"); },
         "checkpoint writer engines are not built in this version"},
        {"sparse_gradients", [](const Config& c) { return if_true(c.sparse_gradients); },
         "sparse gradients are not built in this version"},
        {"bf16.check_grad_overflow", [](const Config& c) { return when(!c.bf16.check_grad_overflow, "false"); },
         "the engine always checks gradients for inf/NaN and skips such a step; DeepSpeed with false would apply it"},
        {"zero_optimization.elastic_checkpoint",
         [](const Config& c) { return if_true(c.zero_optimization.elastic_checkpoint); },
         "legacy elastic (unpadded, merged-at-load) ZeRO checkpoints are not built"},
        {"zero_optimization.zero_quantized_weights",
         [](const Config& c) { return if_true(c.zero_optimization.zero_quantized_weights); }, kNoZeroPP},
        {"zero_optimization.zero_quantized_nontrainable_weights",
         [](const Config& c) { return if_true(c.zero_optimization.zero_quantized_nontrainable_weights); }, kNoZeroPP},
        {"zero_optimization.zero_quantized_gradients",
         [](const Config& c) { return if_true(c.zero_optimization.zero_quantized_gradients); }, kNoZeroPP},
        {"zero_optimization.zero_hpz_partition_size",
         [](const Config& c) {
             const int64_t v = c.zero_optimization.zero_hpz_partition_size;
             return v != 1 ? Value(std::to_string(v)) : Value();
         },
         kNoZeroPP},
        {"zero_optimization.zeropp_loco_param",
         [](const Config& c) { return when(c.zero_optimization.zeropp_loco_param.has_value(), "an object"); },
         kNoZeroPP},
        {"zero_optimization.mics_shard_size",
         [](const Config& c) {
             const int64_t v = c.zero_optimization.mics_shard_size;
             return v != -1 ? Value(std::to_string(v)) : Value();
         },
         kNoMiCS},
        {"zero_optimization.mics_hierarchical_params_gather",
         [](const Config& c) { return if_true(c.zero_optimization.mics_hierarchical_params_gather); }, kNoMiCS},
        {"checkpoint.use_node_local_storage",
         [](const Config& c) { return if_true(c.sections.checkpoint.use_node_local_storage); },
         "node-local checkpoint writers are not built (checkpoints are written to the shared save_dir)"},
        {"data_types.param_dtype",
         [](const Config& c) {
             const auto& d = c.data_types.param_dtype;
             return d && *d != c.model_dtype() ? quoted(dtype_name(*d)) : Value();
         },
         "the parameter dtype follows fp16/bf16.enabled; a different one is not built"},
        {"data_types.buffer_dtype",
         [](const Config& c) {
             const auto& d = c.data_types.buffer_dtype;
             return d && *d != c.model_dtype() ? quoted(dtype_name(*d)) : Value();
         },
         "module buffers belong to the host; a buffer dtype other than the model's is not built"},
        differs("pipeline.stages", &PC::stages, pipe, kNoPipe),
        differs("pipeline.partition", &PC::partition, pipe, kNoPipe),
        differs("pipeline.seed_layers", &PC::seed_layers, pipe, kNoPipe),
        differs("pipeline.activation_checkpoint_interval", &PC::activation_checkpoint_interval, pipe, kNoPipe),
        differs("pipeline.pipe_partitioned", &PC::pipe_partitioned, pipe, kNoPipe),
        differs("pipeline.grad_partitioned", &PC::grad_partitioned, pipe, kNoPipe),
    };
    return rules;
}

// ---- ignored: tuning knobs with no effect in this library ----------------

std::string text(bool v) { return v ? "true" : "false"; }
std::string text(int64_t v) { return std::to_string(v); }
std::string text(double v) { return detail::format_number(v); }
std::string text(const std::string& v) { return "\"" + v + "\""; }
std::string text(DType v) { return std::string("\"") + dtype_name(v) + "\""; }
template <class T>
std::string text(const std::optional<T>& v) { return v ? text(*v) : std::string("null"); }

template <class T>
Value ne(const T& v, const T& def) { return v == def ? Value() : Value(text(v)); }

// A knob of an optional section (offload): only when the section was given.
template <class S, class T>
Value ne_in(const std::optional<S>& s, T S::*m) {
    static const S def{};
    return s ? ne((*s).*m, def.*m) : Value();
}

const char* const kNoPrefetch = "no prefetching: ZeRO-3 parameters are gathered on request";
const char* const kNoStage3Cache = "no parameter cache: ZeRO-3 parameters are released when the host releases them";
const char* const kSameResult = "the engine picks its own collectives; the values reduced or gathered are the same";
const char* const kNoOffload = "tunes CPU/NVMe offload, which is not built (its device is \"none\")";
const char* const kNoNvme = "tunes the NVMe I/O engine; there is no NVMe offload in this library";
const char* const kLogOnly = "only adds log output in DeepSpeed; not built here";
const char* const kHost = "concerns the host's model or data pipeline, not the engine";

#define DS_IGNORED(key, expr, def, why) \
    Rule { key, [](const Config& c) { return ne(c.expr, decltype(c.expr)(def)); }, why }
#define DS_IGNORED_IN(key, section, type, member, why) \
    Rule { key, [](const Config& c) { return ne_in(c.zero_optimization.section, &type::member); }, why }

const std::vector<Rule>& ignored() {
    static const ZeroConfig z{};
    static const AioConfig a{};
    static const std::vector<Rule> rules = {
        DS_IGNORED("wall_clock_breakdown", wall_clock_breakdown, false, kLogOnly),
        DS_IGNORED("memory_breakdown", memory_breakdown, false, kLogOnly),
        DS_IGNORED("dump_state", dump_state, false, kLogOnly),
        DS_IGNORED("seq_parallel_communication_data_type", seq_parallel_communication_data_type, DType::F32,
                   "used only by sequence parallelism, whose size is fixed at 1"),
        DS_IGNORED("disable_allgather", disable_allgather, false, "a legacy switch DeepSpeed no longer reads"),
        DS_IGNORED("zero_force_ds_cpu_optimizer", zero_force_ds_cpu_optimizer, true,
                   "checks the optimizer class under CPU offload, which is not built"),
        DS_IGNORED("dataloader_drop_last", dataloader_drop_last, false,
                   "the host feeds the batches; there is no DeepSpeed dataloader"),
        DS_IGNORED("vocabulary_size", vocabulary_size, std::nullopt, kHost),
        DS_IGNORED("use_data_before_expert_parallelism", use_data_before_expert_parallelism, false,
                   "mixture-of-experts is not built; without experts it has no effect"),
        DS_IGNORED("graph_harvesting", graph_harvesting, false, "CUDA graphs: the engine runs on the CPU"),
        DS_IGNORED("log_level", log_level, std::nullopt,
                   "the log level comes from ds_engine_options_t.log_level or DS_LOG_LEVEL"),
        DS_IGNORED("bf16.immediate_grad_update", bf16.immediate_grad_update, false,
                   "gradients are accumulated when the host hands them over; there are no backward hooks"),
        DS_IGNORED("zero_optimization.contiguous_gradients", zero_optimization.contiguous_gradients, true,
                   "gradients always live in one contiguous flat buffer"),
        DS_IGNORED("zero_optimization.reduce_scatter", zero_optimization.reduce_scatter, true, kSameResult),
        DS_IGNORED("zero_optimization.use_multi_rank_bucket_allreduce",
                   zero_optimization.use_multi_rank_bucket_allreduce, true, kSameResult),
        DS_IGNORED("zero_optimization.allgather_partitions", zero_optimization.allgather_partitions, true,
                   "false asks for a series of broadcasts instead of an all-gather: the gathered values are the "
                   "same"),
        DS_IGNORED("zero_optimization.stage3_prefetch_bucket_size", zero_optimization.prefetch_bucket_size,
                   z.prefetch_bucket_size, kNoPrefetch),
        DS_IGNORED("zero_optimization.stage3_max_live_parameters", zero_optimization.max_live_parameters,
                   z.max_live_parameters, kNoStage3Cache),
        DS_IGNORED("zero_optimization.stage3_max_reuse_distance", zero_optimization.max_reuse_distance,
                   z.max_reuse_distance, kNoStage3Cache),
        DS_IGNORED("zero_optimization.stage3_module_granularity_threshold",
                   zero_optimization.module_granularity_threshold, z.module_granularity_threshold,
                   "no module hooks: the engine sees parameters, not modules"),
        DS_IGNORED("zero_optimization.stage3_use_all_reduce_for_fetch_params",
                   zero_optimization.use_all_reduce_for_fetch_params, false, kSameResult),
        DS_IGNORED("zero_optimization.stage3_allgather_sequential", zero_optimization.allgather_sequential, false,
                   kSameResult),
        DS_IGNORED("zero_optimization.ignore_unused_parameters", zero_optimization.ignore_unused_parameters, true,
                   "a parameter that got no gradient steps with zeros (DeepSpeed with false would raise)"),
        DS_IGNORED("zero_optimization.round_robin_gradients", zero_optimization.round_robin_gradients, false,
                   "orders gradient copies for CPU offload, which is not built"),
        DS_IGNORED("zero_optimization.memory_efficient_linear", zero_optimization.memory_efficient_linear, true,
                   kHost),
        DS_IGNORED("zero_optimization.pipeline_loading_checkpoint", zero_optimization.pipeline_loading_checkpoint,
                   false, "pipeline parallelism is not built"),
        DS_IGNORED("zero_optimization.override_module_apply", zero_optimization.override_module_apply, true,
                   kHost),
        DS_IGNORED("zero_optimization.log_trace_cache_warnings", zero_optimization.log_trace_cache_warnings, false,
                   "there is no ZeRO-3 trace cache"),
        DS_IGNORED("zero_optimization.enable_sanity_checks", zero_optimization.enable_sanity_checks, false,
                   "extra debug assertions of DeepSpeed's ZeRO-3 hooks, which do not exist here"),
        DS_IGNORED("zero_optimization.save_muon_momentum_buffer_in_memory",
                   zero_optimization.save_muon_momentum_buffer_in_memory, false, "the Muon optimizer is not built"),
        DS_IGNORED_IN("zero_optimization.offload_param.nvme_path", offload_param, OffloadParamConfig, nvme_path,
                      kNoOffload),
        DS_IGNORED_IN("zero_optimization.offload_param.buffer_count", offload_param, OffloadParamConfig,
                      buffer_count, kNoOffload),
        DS_IGNORED_IN("zero_optimization.offload_param.buffer_size", offload_param, OffloadParamConfig, buffer_size,
                      kNoOffload),
        DS_IGNORED_IN("zero_optimization.offload_param.max_in_cpu", offload_param, OffloadParamConfig, max_in_cpu,
                      kNoOffload),
        DS_IGNORED_IN("zero_optimization.offload_param.pin_memory", offload_param, OffloadParamConfig, pin_memory,
                      kNoOffload),
        DS_IGNORED_IN("zero_optimization.offload_optimizer.nvme_path", offload_optimizer, OffloadOptimizerConfig,
                      nvme_path, kNoOffload),
        DS_IGNORED_IN("zero_optimization.offload_optimizer.buffer_count", offload_optimizer, OffloadOptimizerConfig,
                      buffer_count, kNoOffload),
        DS_IGNORED_IN("zero_optimization.offload_optimizer.pin_memory", offload_optimizer, OffloadOptimizerConfig,
                      pin_memory, kNoOffload),
        DS_IGNORED_IN("zero_optimization.offload_optimizer.pipeline_read", offload_optimizer, OffloadOptimizerConfig,
                      pipeline_read, kNoOffload),
        DS_IGNORED_IN("zero_optimization.offload_optimizer.pipeline_write", offload_optimizer,
                      OffloadOptimizerConfig, pipeline_write, kNoOffload),
        DS_IGNORED_IN("zero_optimization.offload_optimizer.fast_init", offload_optimizer, OffloadOptimizerConfig,
                      fast_init, kNoOffload),
        DS_IGNORED_IN("zero_optimization.offload_optimizer.ratio", offload_optimizer, OffloadOptimizerConfig, ratio,
                      kNoOffload),
        DS_IGNORED_IN("zero_optimization.offload_optimizer.super_offload", offload_optimizer,
                      OffloadOptimizerConfig, super_offload, kNoOffload),
        DS_IGNORED_IN("zero_optimization.offload_optimizer.cpuadam_cores_perc", offload_optimizer,
                      OffloadOptimizerConfig, cpuadam_cores_perc, kNoOffload),
        {"optimizer.legacy_fusion",
         [](const Config& c) { return c.optimizer ? ne(c.optimizer->legacy_fusion, false) : Value(); },
         "selects between two fused kernels in DeepSpeed; the engine has one"},
        {"optimizer.params.torch_adam",
         [](const Config& c) { return c.optimizer ? ne(c.optimizer->torch_adam, false) : Value(); },
         "selects torch.optim.Adam over the fused kernel; the engine runs the fused kernel's arithmetic (1 - beta in fp32, as DeepSpeedCPUAdam/FusedAdam), which differs from torch.optim's by ~1e-5 relative in exp_avg_sq at beta2 0.999"},
        DS_IGNORED("timers.throughput.enabled", sections.timers.throughput_enabled, true, kLogOnly),
        DS_IGNORED("timers.throughput.synchronized", sections.timers.throughput_synchronized, true, kLogOnly),
        DS_IGNORED("checkpoint.parallel_write.pipeline_stage", sections.checkpoint.parallel_write_pipeline_stage,
                   false, "pipeline parallelism is not built"),
        DS_IGNORED("checkpoint.checkpoint_serialization", sections.checkpoint.checkpoint_serialization, true,
                   "a torch.save option; checkpoints here are safetensors (docs/CHECKPOINTS.md)"),
        DS_IGNORED("aio.block_size", sections.aio.block_size, a.block_size, kNoNvme),
        DS_IGNORED("aio.queue_depth", sections.aio.queue_depth, a.queue_depth, kNoNvme),
        DS_IGNORED("aio.intra_op_parallelism", sections.aio.intra_op_parallelism, a.intra_op_parallelism, kNoNvme),
        DS_IGNORED("aio.single_submit", sections.aio.single_submit, false, kNoNvme),
        DS_IGNORED("aio.overlap_events", sections.aio.overlap_events, true, kNoNvme),
        DS_IGNORED("aio.use_gds", sections.aio.use_gds, false, kNoNvme),
    };
    return rules;
}

#undef DS_IGNORED
#undef DS_IGNORED_IN

}  // namespace

std::vector<IgnoredSetting> ignored_settings(const Config& c) {
    std::vector<IgnoredSetting> out;
    for (const Rule& r : ignored())
        if (Value v = r.test(c)) out.push_back({r.key, *v, r.why});
    return out;
}

namespace detail {

std::vector<std::string> policy_keys() {
    std::vector<std::string> k;
    for (const Rule& r : policy()) k.push_back(r.key);
    return k;
}

std::vector<std::string> ignored_keys() {
    std::vector<std::string> k;
    for (const Rule& r : ignored()) k.push_back(r.key);
    return k;
}

}  // namespace detail

void check_supported(const Config& c) {
    for (const Rule& r : policy()) {
        if (Value v = r.test(c))
            fail(DS_ERR_UNSUPPORTED, "%s: %s is not supported yet (%s)", r.key, v->c_str(), r.why);
    }
}

}  // namespace ds::config
