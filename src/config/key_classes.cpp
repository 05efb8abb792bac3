// classify_key(): how every config key the parser reads is handled (see
// KeyClass in config.h). supported.cpp's policy() rows are the keys that are
// unsupported when set to a non-default value, its ignored() rows the tuning
// knobs accepted with no effect; the rows here cover the rest: the keys the
// engine implements, keys rejected while parsing (sections outside scope),
// keys that only act through an unsupported switch, and aliases. The keys of
// whole unsupported sections and the section objects themselves come from
// the field declarations (field_visitor.h), not from rows.
// tests/unit/test_config_key_audit.cpp walks every parser key against this.
#include <algorithm>
#include <cstring>

#include "config/config.h"
#include "config/field_visitor.h"
#include "config/parse_internal.h"

namespace ds::config {

namespace {

struct Row {
    const char* key;
    KeyClass cls;
};

constexpr KeyClass I = KeyClass::Implemented;
constexpr KeyClass U = KeyClass::Unsupported;
constexpr KeyClass G = KeyClass::Ignored;

// Sections (objects): their own keys are classified one by one. Every
// object the declarations hold (field_visitor.h) and the two param objects
// of the hand-read optimizer and scheduler; an object with a row below
// (amp, elasticity, ...) or in supported.cpp's tables takes that class.
const std::vector<std::string>& sections() {
    static const std::vector<std::string> v = [] {
        std::vector<std::string> out = {"optimizer", "optimizer.params", "scheduler", "scheduler.params"};
        Config def;
        detail::FieldTexts t(true);
        detail::visit(t, def);
        for (const detail::FieldText& r : t.rows())
            if (r.is_object) out.push_back(r.path);
        return out;
    }();
    return v;
}

const Row kRows[] = {
    // Implemented: the engine does what DeepSpeed does.
    {"train_batch_size", I}, {"train_micro_batch_size_per_gpu", I}, {"gradient_accumulation_steps", I},
    {"managed_gradient_accumulation", I}, {"steps_per_print", I}, {"gradient_clipping", I},
    {"prescale_gradients", I}, {"gradient_predivide_factor", I}, {"gradient_allreduce_op", I},
    {"zero_allow_untested_optimizer", I},
    {"ignored", I},  // to_json()'s own list of ignored settings, accepted back and dropped
    {"fp16.enabled", I}, {"fp16.loss_scale", I}, {"fp16.initial_scale_power", I}, {"fp16.loss_scale_window", I},
    {"fp16.hysteresis", I}, {"fp16.consecutive_hysteresis", I}, {"fp16.min_loss_scale", I},
    {"bf16.enabled", I},
    // Built-in models (engine/engine_model.cpp); no effect on a host-driven engine.
    {"activation_checkpointing.cpu_checkpointing", I}, {"activation_checkpointing.number_checkpoints", I},
    {"zero_optimization.stage", I},
    // Optimizer state on NVMe (zero/offload_optimizer.h) and its I/O engine (zero/aio_file.h).
    // offload_optimizer.device: "nvme" at every stage; "cpu" is also an ignored row (state in host memory).
    {"zero_optimization.offload_optimizer.device", I},
    // offload_param's NVMe knobs, honoured with device "nvme" at ZeRO-3 (zero/param_swapper.h);
    // ignored rows otherwise.
    {"zero_optimization.offload_param.nvme_path", I}, {"zero_optimization.offload_param.buffer_count", I},
    {"zero_optimization.offload_param.buffer_size", I}, {"zero_optimization.offload_param.max_in_cpu", I},
    {"zero_optimization.offload_optimizer.nvme_path", I}, {"zero_optimization.offload_optimizer.buffer_count", I},
    {"zero_optimization.offload_optimizer.pipeline_read", I},
    {"zero_optimization.offload_optimizer.pipeline_write", I}, {"zero_optimization.offload_optimizer.ratio", I},
    {"zero_optimization.offload_optimizer.dsc_atomic_step", I},  // deepspeed_c's extension
    {"aio.block_size", I}, {"aio.queue_depth", I}, {"aio.single_submit", I}, {"zero_optimization.reduce_bucket_size", I},
    {"zero_optimization.allgather_bucket_size", I}, {"zero_optimization.overlap_comm", I},
    {"zero_optimization.load_from_fp32_weights", I}, {"zero_optimization.sub_group_size", I},
    {"zero_optimization.param_persistence_threshold", I},
    {"wall_clock_breakdown", I},  // monitoring (src/monitor)
    {"tensorboard.enabled", I}, {"tensorboard.output_path", I}, {"tensorboard.job_name", I},
    {"csv_monitor.enabled", I}, {"csv_monitor.output_path", I}, {"csv_monitor.job_name", I},
    {"comms_logger.enabled", I}, {"comms_logger.verbose", I}, {"comms_logger.prof_all", I},
    {"comms_logger.prof_ops", I}, {"comms_logger.debug", I},
    {"flops_profiler.enabled", I}, {"flops_profiler.recompute_fwd_factor", I},
    {"flops_profiler.profile_step", I}, {"flops_profiler.module_depth", I}, {"flops_profiler.top_modules", I},
    {"flops_profiler.detailed", I}, {"flops_profiler.output_file", I},
    {"zero_optimization.stage3_param_persistence_threshold", I},
    {"zero_optimization.model_persistence_threshold", I},
    {"zero_optimization.stage3_model_persistence_threshold", I},
    {"zero_optimization.gather_16bit_weights_on_model_save", I},
    {"zero_optimization.stage3_gather_16bit_weights_on_model_save", I},
    {"zero_optimization.stage3_gather_fp16_weights_on_model_save", I},
    {"zero_optimization.legacy_stage1", I},  // true is refused, as DeepSpeed does
    {"optimizer.params.lr", I}, {"optimizer.params.betas", I}, {"optimizer.params.eps", I},
    {"optimizer.params.weight_decay", I}, {"optimizer.params.bias_correction", I},
    {"optimizer.params.adam_w_mode", I}, {"optimizer.params.amsgrad", I},  // amsgrad: false only, as DeepSpeed
    {"optimizer.params.fp32_optimizer_states", I}, {"optimizer.params.max_coeff", I},
    {"optimizer.params.min_coeff", I}, {"optimizer.params.eps_inside_sqrt", I}, {"optimizer.params.momentum", I},
    {"optimizer.params.dampening", I}, {"optimizer.params.nesterov", I},
    {"optimizer.params.max_grad_norm", I},  // refused, as DeepSpeed does
    {"scheduler.type", I}, {"scheduler.params.cos_min_ratio", I}, {"scheduler.params.cycle_first_stair_count", I},
    {"scheduler.params.cycle_first_step_size", I}, {"scheduler.params.cycle_max_lr", I},
    {"scheduler.params.cycle_max_mom", I}, {"scheduler.params.cycle_min_lr", I},
    {"scheduler.params.cycle_min_mom", I}, {"scheduler.params.cycle_momentum", I},
    {"scheduler.params.cycle_second_stair_count", I}, {"scheduler.params.cycle_second_step_size", I},
    {"scheduler.params.decay_lr_rate", I}, {"scheduler.params.decay_mom_rate", I},
    {"scheduler.params.decay_step_size", I}, {"scheduler.params.last_batch_iteration", I},
    {"scheduler.params.lr_range_test_min_lr", I}, {"scheduler.params.lr_range_test_staircase", I},
    {"scheduler.params.lr_range_test_step_rate", I}, {"scheduler.params.lr_range_test_step_size", I},
    {"scheduler.params.total_num_steps", I}, {"scheduler.params.warmup_max_lr", I},
    {"scheduler.params.warmup_min_lr", I}, {"scheduler.params.warmup_min_ratio", I},
    {"scheduler.params.warmup_num_steps", I}, {"scheduler.params.warmup_type", I},
    {"data_types.grad_accum_dtype", I}, {"checkpoint.tag_validation", I},

    // Unsupported while parsing (anything but the disabled default is
    // DS_ERR_UNSUPPORTED): sections outside this library's scope.
    {"sequence_parallel_size", U}, {"zero_optimization.leaf_module", U}, {"zero_optimization.zenflow", U},
    {"amp", U}, {"elasticity", U}, {"progressive_layer_drop", U}, {"eigenvalue", U},
    {"hybrid_engine", U}, {"compression_training", U}, {"data_efficiency", U}, {"curriculum_learning", U},
    {"sparse_attention", U}, {"weight_quantization", U}, {"compile", U}, {"tensor_parallel.autotp_size", I},
    {"expert_parallel", U}, {"nebula", U}, {"datastates", U}, {"autotuning", U}, {"quantize_training", U},

    // Unsupported through a switch: they act only when an unsupported
    // setting is on (the switch's policy row rejects it).
    // optimizer.type (types the engine does not build: 1-bit Adam/Lamb, 0/1 Adam, Adagrad):
    {"optimizer.params.coeff_beta", U}, {"optimizer.params.comm_backend_name", U},
    {"optimizer.params.cuda_aware", U}, {"optimizer.params.factor_max", U}, {"optimizer.params.factor_min", U},
    {"optimizer.params.factor_threshold", U}, {"optimizer.params.freeze_step", U},
    {"optimizer.params.var_freeze_step", U}, {"optimizer.params.var_update_scaler", U},
    {"optimizer.params.local_step_scaler", U}, {"optimizer.params.local_step_clipper", U},
    {"optimizer.params.lr_decay", U}, {"optimizer.params.initial_accumulator_value", U},
    // ZeRO-3 prefetch and reuse (zero/prefetch_plan.h); ignored() lists them with parameters on NVMe:
    {"zero_optimization.prefetch_bucket_size", I}, {"zero_optimization.stage3_prefetch_bucket_size", I},
    {"zero_optimization.max_live_parameters", I}, {"zero_optimization.stage3_max_live_parameters", I},
    {"zero_optimization.allgather_sequential", I}, {"zero_optimization.stage3_allgather_sequential", I},
    {"zero_optimization.max_reuse_distance", I}, {"zero_optimization.stage3_max_reuse_distance", I},
    // zero_optimization.offload_*.device (deprecated booleans mapped onto it):
    {"zero_optimization.cpu_offload", I}, {"zero_optimization.cpu_offload_param", I},

    // Ignored: aliases of supported.cpp's ignored() rows, and a key DeepSpeed
    // itself ignores (deprecated, its value never read).
    {"zero_optimization.module_granularity_threshold", G},
    {"zero_optimization.use_all_reduce_for_fetch_params", G},
    {"zero_optimization.cpu_offload_use_pin_memory", G}, {"aio.thread_count", G},
};

// Sections whose every declared key is unsupported: refused while parsing
// unless disabled (amp, elasticity, progressive_layer_drop, eigenvalue), or
// acting only through a switch whose policy row rejects it (wandb's, comet's
// and torch_autocast's `enabled`, checkpoint.writer, zeropp_loco_param).
const char* const kUnsupportedSections[] = {
    "amp", "elasticity", "progressive_layer_drop", "eigenvalue", "checkpoint.writer",
    "zero_optimization.zeropp_loco_param", "wandb", "comet", "torch_autocast"};

bool under_unsupported_section(std::string_view key) {
    for (const char* s : kUnsupportedSections) {
        const size_t n = std::strlen(s);
        if (key.size() > n && key.compare(0, n, s) == 0 && key[n] == '.') return true;
    }
    return false;
}

// The declared keys below kUnsupportedSections (field_visitor.h).
const std::vector<std::string>& unsupported_section_keys() {
    static const std::vector<std::string> v = [] {
        std::vector<std::string> out;
        Config def;
        detail::FieldTexts t(true);
        detail::visit(t, def);
        for (const detail::FieldText& r : t.rows())
            if (under_unsupported_section(r.path)) out.push_back(r.path);
        return out;
    }();
    return v;
}

bool contains(const std::vector<std::string>& v, std::string_view k) {
    return std::find(v.begin(), v.end(), k) != v.end();
}

}  // namespace

KeyClass classify_key(std::string_view path) {
    // bfloat16 is the older name of the bf16 section: same keys.
    std::string key(path);
    if (key == "bfloat16" || key.rfind("bfloat16.", 0) == 0) key = "bf16" + key.substr(8);
    static const std::vector<std::string> policy = detail::policy_keys();
    static const std::vector<std::string> ignored = detail::ignored_keys();
    // A key in both tables (offload_param.device: "cpu" ignored, "nvme"
    // refused) is classed by its policy row ("partial" in the docs); one
    // ignored for one value and run for the others (offload_optimizer.device:
    // "cpu" ignored, "nvme" built) by its row here.
    if (contains(policy, key)) return KeyClass::Unsupported;
    for (const Row& r : kRows)
        if (key == r.key) return r.cls;
    if (contains(ignored, key)) return KeyClass::Ignored;
    if (contains(unsupported_section_keys(), key)) return KeyClass::Unsupported;
    if (contains(sections(), key)) return KeyClass::Implemented;
    return KeyClass::Unclassified;
}

std::vector<std::string> classified_keys() {
    std::vector<std::string> out = detail::policy_keys();
    for (const std::string& k : detail::ignored_keys()) out.push_back(k);
    for (const std::string& s : sections()) out.push_back(s);
    for (const std::string& k : unsupported_section_keys()) out.push_back(k);
    for (const Row& r : kRows) out.emplace_back(r.key);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

}  // namespace ds::config
