// check_supported(): what this build of the engine can run. Each row of
// kPolicy names a config key and returns, for a Config that parses, the
// offending value as text (or nothing when the setting is supported). Shrink
// the table as features land; every row must name the key it tests.
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "config/config.h"
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
        {"wall_clock_breakdown", [](const Config& c) { return if_true(c.wall_clock_breakdown); },
         "wall-clock timers are not built in this version"},
        {"memory_breakdown", [](const Config& c) { return if_true(c.memory_breakdown); },
         "memory breakdown logging is not built in this version"},
        {"dump_state", [](const Config& c) { return if_true(c.dump_state); },
         "state dumps are not built in this version"},
        {"sparse_gradients", [](const Config& c) { return if_true(c.sparse_gradients); },
         "sparse gradients are not built in this version"},
        differs("pipeline.stages", &PC::stages, pipe, kNoPipe),
        differs("pipeline.partition", &PC::partition, pipe, kNoPipe),
        differs("pipeline.seed_layers", &PC::seed_layers, pipe, kNoPipe),
        differs("pipeline.activation_checkpoint_interval", &PC::activation_checkpoint_interval, pipe, kNoPipe),
        differs("pipeline.pipe_partitioned", &PC::pipe_partitioned, pipe, kNoPipe),
        differs("pipeline.grad_partitioned", &PC::grad_partitioned, pipe, kNoPipe),
    };
    return rules;
}

}  // namespace

void check_supported(const Config& c) {
    for (const Rule& r : policy()) {
        if (Value v = r.test(c))
            fail(DS_ERR_UNSUPPORTED, "%s: %s is not supported yet (%s)", r.key, v->c_str(), r.why);
    }
}

}  // namespace ds::config
