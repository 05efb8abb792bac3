// check_supported(): what this build of the engine can run. Each row of
// policy() names a config key and the reason it is not built; a row with no
// test is unsupported when the key's value differs from its declared
// default (field_visitor.h: values and defaults come from the one field
// declaration), a row with a test returns the offending value as text for
// what a default comparison cannot say. Shrink the table as features land.
// ignored(): the tuning knobs accepted with no effect here (same row shape;
// listed under "ignored" in to_json() and logged once by the engine).
// key_classes.cpp classifies every other key; the audit test checks all.
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/field_visitor.h"
#include "config/parse_internal.h"
#include "core/error.h"

namespace ds::config {

namespace {

using Value = std::optional<std::string>;  // the unsupported value, as text
using Texts = std::map<std::string, std::string>;

struct Rule {
    Rule(const char* k, const char* w, std::function<Value(const Config&)> t = nullptr, const char* f = nullptr,
         bool (*only_if)(const Config&) = nullptr)
        : key(k), why(w), test(std::move(t)), field(f), when(only_if) {}
    const char* key;                           // dotted config key
    const char* why;                           // what is missing / why it has no effect
    std::function<Value(const Config&)> test;  // empty: the value differs from its declared default
    const char* field;                         // the declared key compared when `test` is empty (default: key)
    bool (*when)(const Config&);               // null: always; else the row applies only where it holds
};

// A row for a key compared with its declared default (`field`: the canonical
// key when `key` is an alias). Absent from `t` (a knob of an optional section
// not given): nothing to report.
Value differs(const Rule& r, const Texts& t) {
    const char* field = r.field ? r.field : r.key;
    const auto got = t.find(field);
    if (got == t.end()) return std::nullopt;
    const auto def = detail::default_texts().find(field);
    DS_CHECK(def != detail::default_texts().end(), DS_ERR_INTERNAL, "config: %s is not a declared key", field);
    if (detail::same_value_text(got->second, def->second)) return std::nullopt;
    return got->second;
}

Value eval(const Rule& r, const Config& c, const Texts& t) {
    if (r.when && !r.when(c)) return std::nullopt;
    return r.test ? r.test(c) : differs(r, t);
}

Value quoted(const std::string& s) { return "\"" + s + "\""; }

bool engine_optimizer(const std::string& t) {
    return t == "adam" || t == "adamw" || t == "lamb" || t == "lion" || t == "SGD";
}
bool engine_scheduler(const std::string& t) {
    return t == "LRRangeTest" || t == "OneCycle" || t == "WarmupLR" || t == "WarmupDecayLR" ||
           t == "WarmupCosineLR";
}

const char* const kNoAC =
    "partitioning saved activations across tensor-model-parallel ranks is not built (there is no tensor "
    "parallelism)";
// DeepSpeed's PipelineModule takes its stages, partition method and
// checkpoint interval as constructor arguments; ours are the model spec's
// "pipeline" object, so this section is only accepted at its defaults.
const char* const kNoPipe =
    "the config's pipeline section is not read: a built-in model's stages, partition_method and "
    "activation_checkpoint_interval are its spec's \"pipeline\" object (docs/PIPELINE.md), and activations are "
    "sent whole (no pipe/grad partitioning across tensor-parallel ranks)";
const char* const kNoZeroPP = "ZeRO++ (quantized weights/gradients, hierarchical partitioning) is not built";
const char* const kNoMiCS = "MiCS sub-group sharding is not built (ZeRO partitions over the whole world)";

const std::vector<Rule>& policy() {
    static const std::vector<Rule> rules = {
        {"optimizer.type",
         "Lamb's per-tensor trust ratio over a ZeRO-partitioned flat buffer is not built (use ZeRO stage 0)",
         [](const Config& c) {
             return c.optimizer && c.optimizer->type == "lamb" && c.zero_optimization.stage >= 1 && c.world_size > 1
                        ? quoted(c.optimizer->type)
                        : Value();
         }},
        {"communication_data_type",
         "gradients are reduced in the gradient accumulation dtype; a different communication dtype is not built",
         [](const Config& c) {
             return c.communication_data_type && *c.communication_data_type != c.grad_accum_dtype()
                        ? quoted(dtype_name(*c.communication_data_type))
                        : Value();
         }},
        {"zero_optimization.offload_param.device",
         "parameters on NVMe are swapped per ZeRO-3 partition: offload_param \"nvme\" needs zero_optimization.stage 3",
         [](const Config& c) {
             const auto& o = c.zero_optimization.offload_param;
             return o && o->device == "nvme" && c.zero_optimization.stage != 3 ? quoted(o->device) : Value();
         }},
        {"aio.use_gds", "GPUDirect Storage reads into GPU memory; this engine's state lives in host memory"},
        {"fp16.fp16_master_weights_and_grads", "only fp32 master weights are built"},
        {"bf16.bf16_master_weights_and_grads", "only fp32 master weights are built"},
        {"bf16.bf16_optimizer_states", "only fp32 optimizer states are built"},
        {"fp16.auto_cast", "input auto-cast is not built in this version"},
        {"optimizer.type", "the engine builds adam, adamw, lamb, lion and SGD",
         [](const Config& c) {
             return c.optimizer && !engine_optimizer(c.optimizer->type) ? quoted(c.optimizer->type) : Value();
         }},
        {"optimizer.params.maximize", "SGD maximize is not built in this version",
         [](const Config& c) { return c.optimizer && c.optimizer->maximize ? Value("true") : Value(); }},
        {"scheduler.type", "only DeepSpeed's five schedulers are built; torch.optim.lr_scheduler classes are not",
         [](const Config& c) {
             return c.scheduler && !engine_scheduler(c.scheduler->type) ? quoted(c.scheduler->type) : Value();
         }},
        {"wandb.enabled", "the WandB monitor is not built (it needs the wandb Python service); use csv_monitor or tensorboard"},
        {"comet.enabled", "the Comet monitor is not built (it needs the comet_ml service); use csv_monitor or tensorboard"},
        {"torch_autocast.enabled", "torch autocast is not built in this version"},
        {"activation_checkpointing.partition_activations", kNoAC},
        {"activation_checkpointing.contiguous_memory_optimization", kNoAC},
        {"activation_checkpointing.profile", "timing checkpointed regions is not built in this version"},
        {"checkpoint.load_universal", "universal checkpoints are not built in this version"},
        {"checkpoint.writer", "checkpoint writer engines are not built in this version"},
        {"sparse_gradients", "sparse gradients are not built in this version"},
        {"bf16.check_grad_overflow",
         "the engine always checks gradients for inf/NaN and skips such a step; DeepSpeed with false would apply it"},
        {"zero_optimization.elastic_checkpoint",
         "legacy elastic (unpadded, merged-at-load) ZeRO checkpoints are not built"},
        {"zero_optimization.zero_quantized_weights", kNoZeroPP},
        {"zero_optimization.zero_quantized_nontrainable_weights", kNoZeroPP},
        {"zero_optimization.zero_quantized_gradients", kNoZeroPP},
        {"zero_optimization.zero_hpz_partition_size", kNoZeroPP},
        {"zero_optimization.zeropp_loco_param", kNoZeroPP},
        {"zero_optimization.mics_shard_size", kNoMiCS},
        {"zero_optimization.mics_hierarchical_params_gather", kNoMiCS},
        {"checkpoint.use_node_local_storage",
         "node-local checkpoint writers are not built (checkpoints are written to the shared save_dir)"},
        {"data_types.param_dtype", "the parameter dtype follows fp16/bf16.enabled; a different one is not built",
         [](const Config& c) {
             const auto& d = c.data_types.param_dtype;
             return d && *d != c.model_dtype() ? quoted(dtype_name(*d)) : Value();
         }},
        {"data_types.buffer_dtype",
         "module buffers belong to the host; a buffer dtype other than the model's is not built",
         [](const Config& c) {
             const auto& d = c.data_types.buffer_dtype;
             return d && *d != c.model_dtype() ? quoted(dtype_name(*d)) : Value();
         }},
        {"pipeline.stages", kNoPipe},
        {"pipeline.partition", kNoPipe},
        {"pipeline.seed_layers", kNoPipe},
        {"pipeline.activation_checkpoint_interval", kNoPipe},
        {"pipeline.pipe_partitioned", kNoPipe},
        {"pipeline.grad_partitioned", kNoPipe},
        {"tensor_parallel.preset_model",
         "the built-in GPT's tensor-parallel split is fixed (Megatron's: q/k/v and c_fc column-parallel, both c_proj "
         "row-parallel); presets choose splits for HuggingFace models"},
        {"tensor_parallel.autotp_size", "AutoTP training supports ZeRO stages 0, 1 and 2 (as DeepSpeed's)",
         [](const Config& c) {
             return c.sections.tensor_parallel.autotp_size > 1 && c.zero_optimization.stage == 3
                        ? Value(std::to_string(c.sections.tensor_parallel.autotp_size))
                        : Value();
         }},
    };
    return rules;
}

// ---- ignored: tuning knobs with no effect in this library ----------------

const char* const kNoPrefetch =
    "with offload_param.device \"nvme\" the next buffer_count partitions are read ahead from the disk instead; the "
    "all-gathers run on request and every release frees";
const char* const kSameResult = "the engine picks its own collectives; the values reduced or gathered are the same";
const char* const kNoOffload =
    "tunes parameter swapping to NVMe, which only offload_param.device \"nvme\" does (device \"cpu\" is what the CPU "
    "engine does already)";

// offload_param's NVMe knobs: ignored unless device is "nvme" (then honoured:
// zero/param_swapper.h); `get` gives the value as text when it differs from
// its default.
std::function<Value(const Config&)> param_knob(std::function<Value(const OffloadParamConfig&)> get) {
    return [get](const Config& c) -> Value {
        const auto& o = c.zero_optimization.offload_param;
        if (!o || o->device == "nvme") return Value();
        return get(*o);
    };
}
const char* const kNoPin =
    "page-locking host memory speeds up copies to and from a GPU; this engine copies nothing to a GPU (an engine on "
    "cuda:N with ZeRO-Offload honours it)";
const char* const kOneIoThread = "the NVMe swapper runs one I/O thread; requests are split by block_size and queued to queue_depth";
const char* const kLogOnly = "only adds log output in DeepSpeed; not built here";
const char* const kHost = "concerns the host's model or data pipeline, not the engine";

// Parameters on NVMe: the ZeRO-3 prefetch and reuse knobs have no effect.
bool params_on_nvme(const Config& c) { return c.zero_optimization.offloads_params_to("nvme"); }

// A stage3_* alias row: compared through the canonical key it sets.
Rule alias(const char* key, const char* field, const char* why, bool (*when)(const Config&) = nullptr) {
    return {key, why, nullptr, field, when};
}

const std::vector<Rule>& ignored() {
    static const std::vector<Rule> rules = {
        {"memory_breakdown", kLogOnly},
        {"tensor_parallel.tp_overlap_comm",
         "the row-parallel all-reduces run in place of the layers' outputs; the values are the same"},
        {"dump_state", kLogOnly},
        {"seq_parallel_communication_data_type", "used only by sequence parallelism, whose size is fixed at 1"},
        {"disable_allgather", "a legacy switch DeepSpeed no longer reads"},
        {"zero_force_ds_cpu_optimizer", "checks the optimizer class under CPU offload, which is not built"},
        {"dataloader_drop_last", "the host feeds the batches; there is no DeepSpeed dataloader"},
        {"vocabulary_size", kHost},
        {"use_data_before_expert_parallelism",
         "without experts split over ranks (moe.ep_size 1) it has no effect; with moe.ep_size > 1, true is refused "
         "by the engine (the D + E layout is not built)"},
        {"graph_harvesting", "CUDA graphs: the engine runs on the CPU"},
        {"log_level", "the log level comes from ds_engine_options_t.log_level or DS_LOG_LEVEL"},
        {"activation_checkpointing.synchronize_checkpoint_boundary",
         "a device synchronize around checkpointed regions: the engine runs on the CPU"},
        {"bf16.immediate_grad_update",
         "gradients are accumulated when the host hands them over; there are no backward hooks"},
        {"zero_optimization.contiguous_gradients", "gradients always live in one contiguous flat buffer"},
        {"zero_optimization.reduce_scatter", kSameResult},
        {"zero_optimization.use_multi_rank_bucket_allreduce", kSameResult},
        {"zero_optimization.allgather_partitions",
         "false asks for a series of broadcasts instead of an all-gather: the gathered values are the same"},
        // The prefetch and reuse knobs (zero/prefetch_plan.h): honoured, except with parameters on NVMe.
        alias("zero_optimization.stage3_prefetch_bucket_size", "zero_optimization.prefetch_bucket_size", kNoPrefetch,
              params_on_nvme),
        alias("zero_optimization.stage3_max_live_parameters", "zero_optimization.max_live_parameters", kNoPrefetch,
              params_on_nvme),
        alias("zero_optimization.stage3_max_reuse_distance", "zero_optimization.max_reuse_distance", kNoPrefetch,
              params_on_nvme),
        alias("zero_optimization.stage3_module_granularity_threshold",
              "zero_optimization.module_granularity_threshold",
              "no module hooks: the engine sees parameters, not modules"),
        alias("zero_optimization.stage3_use_all_reduce_for_fetch_params",
              "zero_optimization.use_all_reduce_for_fetch_params", kSameResult),
        alias("zero_optimization.stage3_allgather_sequential", "zero_optimization.allgather_sequential", kNoPrefetch,
              params_on_nvme),
        {"zero_optimization.ignore_unused_parameters",
         "a parameter that got no gradient steps with zeros (DeepSpeed with false would raise)"},
        {"zero_optimization.round_robin_gradients", "orders gradient copies for CPU offload, which is not built"},
        {"zero_optimization.memory_efficient_linear", kHost},
        {"zero_optimization.pipeline_loading_checkpoint", "pipeline parallelism is not built"},
        {"zero_optimization.override_module_apply", kHost},
        {"zero_optimization.log_trace_cache_warnings", "there is no ZeRO-3 trace cache"},
        {"zero_optimization.enable_sanity_checks",
         "extra debug assertions of DeepSpeed's ZeRO-3 hooks, which do not exist here"},
        {"zero_optimization.save_muon_momentum_buffer_in_memory", "the Muon optimizer is not built"},
        {"zero_optimization.offload_param.device",
         "parameters in host memory: on this CPU engine they already live there, so device \"cpu\" changes nothing "
         "(a ZeRO-Offload engine on cuda:N honours it: its ZeRO-3 partitions stay in host memory)",
         [](const Config& c) {
             const auto& o = c.zero_optimization.offload_param;
             return o && o->device == "cpu" ? quoted(o->device) : Value();
         }},
        {"zero_optimization.offload_param.nvme_path", kNoOffload,
         param_knob([](const OffloadParamConfig& o) { return o.nvme_path ? quoted(*o.nvme_path) : Value(); })},
        {"zero_optimization.offload_param.buffer_count", kNoOffload,
         param_knob([](const OffloadParamConfig& o) {
             return o.buffer_count != 5 ? Value(std::to_string(o.buffer_count)) : Value();
         })},
        {"zero_optimization.offload_param.buffer_size", kNoOffload,
         param_knob([](const OffloadParamConfig& o) {
             return o.buffer_size != 100000000 ? Value(std::to_string(o.buffer_size)) : Value();
         })},
        {"zero_optimization.offload_param.max_in_cpu", kNoOffload,
         param_knob([](const OffloadParamConfig& o) {
             return o.max_in_cpu != 1000000000 ? Value(std::to_string(o.max_in_cpu)) : Value();
         })},
        {"zero_optimization.offload_param.pin_memory",
         "page-locking host memory speeds up copies to and from a GPU; only an engine on cuda:N at ZeRO-3 with "
         "offload_param \"cpu\" copies offloaded parameters to its GPU (and honours it)",
         [](const Config& c) {
             const auto& o = c.zero_optimization.offload_param;
             return o && o->device != "none" && o->pin_memory ? Value("true") : Value();
         }},
        {"zero_optimization.offload_optimizer.device",
         "state in host memory: on this CPU engine the fp32 master weights and optimizer state already live in host "
         "memory, so device \"cpu\" changes nothing (an engine on cuda:N honours it: ZeRO-Offload)",
         [](const Config& c) {
             const auto& o = c.zero_optimization.offload_optimizer;
             return o && o->device == "cpu" ? quoted(o->device) : Value();
         }},
        {"zero_optimization.offload_optimizer.pin_memory", kNoPin,
         [](const Config& c) {  // with no offload there is nothing to pin, in DeepSpeed too
             const auto& z = c.zero_optimization;
             return z.offloads_optimizer() && z.offload_optimizer->pin_memory ? Value("true") : Value();
         }},
        {"zero_optimization.offload_optimizer.fast_init", "swap files are written at engine creation, sub-group by sub-group"},
        {"zero_optimization.offload_optimizer.super_offload", "SuperOffload targets GPU superchips; not built"},
        {"zero_optimization.offload_optimizer.cpuadam_cores_perc", "the fused CPU kernels use the engine's threads"},
        {"optimizer.legacy_fusion", "selects between two fused kernels in DeepSpeed; the engine has one",
         [](const Config& c) { return c.optimizer && c.optimizer->legacy_fusion ? Value("true") : Value(); }},
        {"optimizer.params.torch_adam",
         "selects torch.optim.Adam over the fused kernel; the engine runs the fused kernel's arithmetic (1 - beta in "
         "fp32, as DeepSpeedCPUAdam/FusedAdam), which differs from torch.optim's by ~1e-5 relative in exp_avg_sq at "
         "beta2 0.999",
         [](const Config& c) { return c.optimizer && c.optimizer->torch_adam ? Value("true") : Value(); }},
        {"timers.throughput.enabled", kLogOnly},
        {"timers.throughput.synchronized", kLogOnly},
        {"checkpoint.parallel_write.pipeline_stage", "pipeline parallelism is not built"},
        {"checkpoint.checkpoint_serialization",
         "a torch.save option; checkpoints here are safetensors (docs/CHECKPOINTS.md)"},
        {"aio.intra_op_parallelism", kOneIoThread},
        {"aio.overlap_events", "submission and completion always overlap in the swapper's I/O thread"},
    };
    return rules;
}

}  // namespace

std::vector<IgnoredSetting> ignored_settings(const Config& c) {
    const Texts t = detail::value_texts(c);
    std::vector<IgnoredSetting> out;
    for (const Rule& r : ignored())
        if (Value v = eval(r, c, t)) out.push_back({r.key, *v, r.why});
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
    const Texts t = detail::value_texts(c);
    for (const Rule& r : policy()) {
        if (Value v = eval(r, c, t))
            fail(DS_ERR_UNSUPPORTED, "%s: %s is not supported yet (%s)", r.key, v->c_str(), r.why);
    }
}

}  // namespace ds::config
