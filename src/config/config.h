// Typed DeepSpeed configuration (DeepSpeed 0.19.6 keys and defaults).
// parse() turns JSON text into a Config, validates it strictly and resolves
// the batch-size triple against the world size; to_json() writes the fully
// resolved config back out. Errors are ds::Error with DS_ERR_INVALID_CONFIG
// and a message that starts with the dotted key path.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace ds::config {

// Working/communication/accumulation dtypes named in the config are the
// library's one DType (core/dtype.h); the config only ever holds F32, F16
// or BF16.

struct Fp16Config {
    bool enabled = false;
    bool auto_cast = false;
    double loss_scale = 0.0;          // 0 => dynamic
    int64_t initial_scale_power = 16;
    int64_t loss_scale_window = 1000;
    int64_t hysteresis = 2;
    bool consecutive_hysteresis = false;
    double min_loss_scale = 1.0;
    bool fp16_master_weights_and_grads = false;
};

struct Bf16Config {
    bool enabled = false;
    bool immediate_grad_update = false;
    bool check_grad_overflow = true;
    bool bf16_master_weights_and_grads = false;
    bool bf16_optimizer_states = false;
};

struct OffloadParamConfig {
    std::string device = "none";      // none | cpu | nvme
    std::optional<std::string> nvme_path;
    int64_t buffer_count = 5;
    int64_t buffer_size = 100000000;
    int64_t max_in_cpu = 1000000000;
    bool pin_memory = false;  // DeepSpeed's DeepSpeedZeroOffloadParamConfig default
};

struct OffloadOptimizerConfig {
    std::string device = "none";
    std::optional<std::string> nvme_path;
    int64_t buffer_count = 4;
    bool pin_memory = false;  // DeepSpeed's DeepSpeedZeroOffloadOptimizerConfig default
    bool pipeline_read = false;
    bool pipeline_write = false;
    bool dsc_atomic_step = true;  // our extension: two slots per sub-group (zero/nvme_swapper.h)
    bool fast_init = false;
    double ratio = 1.0;
    bool super_offload = false;
    double cpuadam_cores_perc = 0.8;
};

struct ZeroConfig {
    int64_t stage = 0;
    bool contiguous_gradients = true;
    bool reduce_scatter = true;
    int64_t reduce_bucket_size = 500000000;
    bool use_multi_rank_bucket_allreduce = true;
    bool allgather_partitions = true;
    int64_t allgather_bucket_size = 500000000;
    bool overlap_comm = false;        // resolved: true only for stage 3 unless given
    bool load_from_fp32_weights = true;
    bool elastic_checkpoint = false;
    std::optional<OffloadParamConfig> offload_param;
    std::optional<OffloadOptimizerConfig> offload_optimizer;
    // offload_optimizer with a device other than "none" (on cuda:N: ZeRO-Offload).
    bool offloads_optimizer() const { return offload_optimizer && offload_optimizer->device != "none"; }
    bool offloads_params_to(const char* device) const { return offload_param && offload_param->device == device; }
    // offload_param.device "cpu" or "nvme" (not "none").
    bool offloads_params() const { return offloads_params_to("cpu") || offloads_params_to("nvme"); }
    int64_t sub_group_size = 1000000000;
    int64_t prefetch_bucket_size = 50000000;
    int64_t param_persistence_threshold = 100000;
    int64_t model_persistence_threshold = INT64_MAX;
    int64_t max_live_parameters = 1000000000;
    int64_t max_reuse_distance = 1000000000;
    bool gather_16bit_weights_on_model_save = false;
    int64_t module_granularity_threshold = 0;
    bool use_all_reduce_for_fetch_params = false;
    bool allgather_sequential = false;
    bool ignore_unused_parameters = true;
    bool round_robin_gradients = false;
    int64_t zero_hpz_partition_size = 1;
    bool zero_quantized_weights = false;
    bool zero_quantized_nontrainable_weights = false;
    bool zero_quantized_gradients = false;
    int64_t mics_shard_size = -1;
    bool mics_hierarchical_params_gather = false;
    bool memory_efficient_linear = true;
    bool pipeline_loading_checkpoint = false;
    bool override_module_apply = true;
    bool log_trace_cache_warnings = false;
    bool enable_sanity_checks = false;
    bool save_muon_momentum_buffer_in_memory = false;
    // ZeRO++ LoCo error feedback; None when not given.
    struct LocoParams {
        double err_beta = 0.8;
        int64_t reset_T = 1024;
    };
    std::optional<LocoParams> zeropp_loco_param;
    // `leaf_module` (accepted only empty), `zenflow` (only null) and
    // `legacy_stage1` (only false) are not stored: parse() rejects other values.
};

// Optimizer: `type` is canonical lower case for DeepSpeed names ("adam",
// "adamw", "lamb", "lion", ...) and exact case for torch.optim names ("SGD").
struct OptimizerConfig {
    std::string type;                 // as resolved (DEEPSPEED_SEMANTICS.md §1.7)
    bool adamw_mode = true;           // effective decoupled weight decay (adam/adamw)
    bool torch_adam = false;
    bool fp32_optimizer_states = true;
    double lr = 1e-3;
    double beta1 = 0.9, beta2 = 0.999;
    double eps = 1e-8;
    double weight_decay = 0.0;
    bool bias_correction = true;
    // Lamb
    double max_coeff = 10.0, min_coeff = 0.01;
    bool eps_inside_sqrt = false;
    // SGD
    double momentum = 0.0, dampening = 0.0;
    bool nesterov = false;
    bool maximize = false;
    bool legacy_fusion = false;       // optimizer.legacy_fusion (next to type/params)
    // Adagrad (DeepSpeedCPUAdagrad / torch.optim.Adagrad)
    double lr_decay = 0.0;
    double initial_accumulator_value = 0.0;
    // 1-bit family (OnebitAdam, ZeroOneAdam, OnebitLamb)
    int64_t freeze_step = 100000;
    bool cuda_aware = false;
    std::string comm_backend_name = "nccl";
    int64_t var_freeze_step = 100000;
    int64_t var_update_scaler = 16;
    int64_t local_step_scaler = 32678;
    int64_t local_step_clipper = 16;
    double coeff_beta = 0.9;
    double factor_max = 4.0, factor_min = 0.5, factor_threshold = 0.1;
    // Types whose params this library does not model (muadam, muadamw, musgd,
    // muon, torch.optim classes other than SGD): params kept verbatim as
    // compact JSON ("{}" when none). Empty for modelled types.
    std::string opaque_params_json;
};

struct SchedulerConfig {
    std::string type;                 // LRRangeTest | OneCycle | WarmupLR | WarmupDecayLR | WarmupCosineLR
    // LRRangeTest
    double lr_range_test_min_lr = 1e-3;
    int64_t lr_range_test_step_size = 2000;
    double lr_range_test_step_rate = 1.0;
    bool lr_range_test_staircase = false;
    // OneCycle
    double cycle_min_lr = 0.0, cycle_max_lr = 0.0;
    double decay_lr_rate = 0.0;
    int64_t cycle_first_step_size = 2000;
    std::optional<int64_t> cycle_second_step_size;    // None => first
    int64_t cycle_first_stair_count = 0;
    std::optional<int64_t> cycle_second_stair_count;  // None => first
    int64_t decay_step_size = 0;
    bool cycle_momentum = true;
    double cycle_min_mom = 0.8, cycle_max_mom = 0.9;
    double decay_mom_rate = 0.0;
    // WarmupLR / WarmupDecayLR / WarmupCosineLR
    double warmup_min_lr = 0.0;
    std::optional<double> warmup_max_lr;  // WarmupLR: None => optimizer lr; WarmupDecayLR default 0.001
    int64_t warmup_num_steps = 1000;
    std::string warmup_type = "log";      // log | linear
    std::optional<int64_t> total_num_steps;
    double warmup_min_ratio = 0.0;
    double cos_min_ratio = 0.0001;
    int64_t last_batch_iteration = -1;    // every DeepSpeed scheduler takes it
    // torch.optim.lr_scheduler classes: params kept verbatim as compact JSON.
    std::string opaque_params_json;
};

struct DataTypesConfig {
    std::optional<DType> grad_accum_dtype;  // None => model dtype
    std::optional<DType> param_dtype;
    std::optional<DType> buffer_dtype;
};

// Sections the engine does not drive yet are parsed into these too (see
// config_sections.h, written by the config module).
struct Config;

}  // namespace ds::config

#include "config/config_sections.h"

namespace ds::config {

struct Config {
    // Batch triple, resolved (DEEPSPEED_SEMANTICS.md §1.6).
    int64_t train_batch_size = 0;
    int64_t train_micro_batch_size_per_gpu = 0;
    int64_t gradient_accumulation_steps = 0;
    int64_t world_size = 1;           // the data-parallel size used to resolve

    bool managed_gradient_accumulation = true;
    std::optional<int64_t> steps_per_print;
    bool wall_clock_breakdown = false;
    bool memory_breakdown = false;
    bool dump_state = false;
    double gradient_clipping = 1.0;
    bool prescale_gradients = false;
    double gradient_predivide_factor = 1.0;
    std::string gradient_allreduce_op = "mean";   // mean | sum (lower-cased)
    std::optional<DType> communication_data_type; // None => model dtype
    DType seq_parallel_communication_data_type = DType::F32;
    bool sparse_gradients = false;
    bool disable_allgather = false;
    bool zero_allow_untested_optimizer = false;
    bool zero_force_ds_cpu_optimizer = true;
    bool dataloader_drop_last = false;
    std::optional<int64_t> vocabulary_size;
    bool use_data_before_expert_parallelism = false;
    bool graph_harvesting = false;
    std::optional<std::string> log_level;

    std::optional<OptimizerConfig> optimizer;
    std::optional<SchedulerConfig> scheduler;
    Fp16Config fp16;
    Bf16Config bf16;
    ZeroConfig zero_optimization;
    DataTypesConfig data_types;
    SectionsConfig sections;          // everything else (config_sections.h)

    // Model (working) dtype: fp16 if fp16.enabled, bf16 if bf16.enabled, else fp32.
    DType model_dtype() const {
        return fp16.enabled ? DType::F16 : bf16.enabled ? DType::BF16 : DType::F32;
    }
    DType grad_accum_dtype() const { return data_types.grad_accum_dtype.value_or(model_dtype()); }
};

// Parse, validate and resolve (world_size >= 1, else DS_ERR_INVALID_ARGUMENT).
// Throws ds::Error:
//   DS_ERR_INVALID_CONFIG  syntax (with line and column), unknown key (with a
//                          "did you mean" suggestion), duplicate key, wrong
//                          type, out-of-range value, inconsistent batch sizes;
//   DS_ERR_UNSUPPORTED     a DeepSpeed key outside this library's scope
//                          (see supported.cpp), named by its path.
Config parse(std::string_view json_text, int64_t world_size);

// The fully resolved config as pretty JSON with every key and default.
std::string to_json(const Config& c);

// Reject (DS_ERR_UNSUPPORTED, naming the key) settings that parse but that
// this build of the engine does not implement yet. Called by the engine after
// parse(); the list shrinks as features land.
void check_supported(const Config& c);

// How each config key is handled (supported.cpp; audited over every key the
// parser reads by tests/unit/test_config_key_audit.cpp):
//   Implemented  — the engine does what DeepSpeed does with it;
//   Unsupported  — a non-default value is DS_ERR_UNSUPPORTED naming the key
//                  (it would change what is computed, stored, or where state lives);
//   Ignored      — a tuning knob with no effect here: accepted, logged once at
//                  warning level, and listed under "ignored" in to_json().
enum class KeyClass { Implemented, Unsupported, Ignored, Unclassified };
KeyClass classify_key(std::string_view dotted_path);
std::vector<std::string> classified_keys();  // every key of the tables

// The ignored keys set to a non-default value in `c`, with the reason each has no effect.
struct IgnoredSetting {
    std::string key;    // dotted path
    std::string value;  // as JSON text
    std::string why;
};
std::vector<IgnoredSetting> ignored_settings(const Config& c);

using ds::dtype_name;  // "fp32" | "fp16" | "bf16" for the config's dtypes

}  // namespace ds::config
