// Internal interface between the config parser's files: one parse function
// per section (each fills its typed struct from a cJSON value, validating
// keys, types and ranges) and the writers to_json() shares with them.
#pragma once

#include <cjson/cJSON.h>

#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/json_reader.h"
#include "config/json_writer.h"

namespace ds::config::detail {

// dtype names: data_types / torch_autocast accept DeepSpeed's aliases
// ("fp32", "float32", "torch.float32", "float", "half", "bfloat16", ...);
// communication dtypes accept "fp32" | "fp16" | "bf16" in any case.
DType parse_dtype_alias(const cJSON* v, const std::string& path);
DType parse_comm_dtype(const cJSON* v, const std::string& path);

// Precision and ZeRO (parse_precision_zero.cpp).
void parse_fp16(const cJSON* v, const std::string& path, Fp16Config& out);
void parse_bf16(const cJSON* v, const std::string& path, Bf16Config& out);
void parse_zero(const cJSON* v, const std::string& path, ZeroConfig& out);

// Optimizer and scheduler (optimizer_config.cpp, scheduler_config.cpp).
// A JSON null gives nullopt.
std::optional<OptimizerConfig> parse_optimizer(const cJSON* v, const std::string& path);
std::optional<SchedulerConfig> parse_scheduler(const cJSON* v, const std::string& path);
void write_optimizer(JsonWriter& w, const char* key, const std::optional<OptimizerConfig>& o);
void write_scheduler(JsonWriter& w, const char* key, const std::optional<SchedulerConfig>& s);
bool is_deepspeed_scheduler(const std::string& type);

// Everything else (parse_sections.cpp, parse_sections_disabled.cpp).
void parse_data_types(const cJSON* v, const std::string& path, DataTypesConfig& out);
void parse_activation_checkpointing(const cJSON* v, const std::string& path,
                                    ActivationCheckpointingConfig& out);
void parse_flops_profiler(const cJSON* v, const std::string& path, FlopsProfilerConfig& out);
void parse_file_monitor(const cJSON* v, const std::string& path, FileMonitorConfig& out);
void parse_wandb(const cJSON* v, const std::string& path, WandbConfig& out);
void parse_comet(const cJSON* v, const std::string& path, CometConfig& out);
void parse_comms_logger(const cJSON* v, const std::string& path, CommsLoggerConfig& out);
void parse_timers(const cJSON* v, const std::string& path, TimersConfig& out);
void parse_checkpoint(const cJSON* v, const std::string& path, CheckpointConfig& out);
void parse_aio(const cJSON* v, const std::string& path, AioConfig& out);
void parse_pipeline(const cJSON* v, const std::string& path, PipelineConfig& out);
void parse_torch_autocast(const cJSON* v, const std::string& path, TorchAutocastConfig& out);

// Sections accepted only in their disabled default form: parsed and
// validated, then any value other than the default is DS_ERR_UNSUPPORTED.
void parse_amp(const cJSON* v, const std::string& path, AmpConfig& out);
void parse_elasticity(const cJSON* v, const std::string& path, ElasticityConfig& out);
void parse_progressive_layer_drop(const cJSON* v, const std::string& path,
                                  ProgressiveLayerDropConfig& out);
void parse_eigenvalue(const cJSON* v, const std::string& path, EigenvalueConfig& out);
// Top-level DeepSpeed keys outside this library's scope (hybrid_engine,
// compile, ...): only {} or {"enabled": false} is accepted.
bool is_out_of_scope_key(const char* key);
void check_out_of_scope(const cJSON* v, const std::string& path);

// Writers of the sections above (config_to_json.cpp uses them).
void write_sections(JsonWriter& w, const SectionsConfig& s);

// The keys of supported.cpp's policy (unsupported when non-default) and
// ignored tables, for classify_key() (key_classes.cpp).
std::vector<std::string> policy_keys();
std::vector<std::string> ignored_keys();

// Compact JSON text of a value (for opaque params).
std::string compact_json(const cJSON* v);

}  // namespace ds::config::detail
