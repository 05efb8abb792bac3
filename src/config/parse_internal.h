// Internal interface between the config parser's files. The sections are
// declared once in config_fields_*.cpp (field_visitor.h); this header has
// what the declarations share with the hand-written parts: dtype
// spellings, the optimizer/scheduler readers and writers, the out-of-scope
// keys and supported.cpp's key lists.
#pragma once

#include <cjson/cJSON.h>

#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/json_reader.h"
#include "core/json/json_writer.h"

namespace ds::config::detail {

// dtype names: data_types / torch_autocast accept DeepSpeed's aliases
// ("fp32", "float32", "torch.float32", "float", "half", "bfloat16", ...);
// communication dtypes accept "fp32" | "fp16" | "bf16" in any case.
DType parse_dtype_alias(const cJSON* v, const std::string& path);
DType parse_comm_dtype(const cJSON* v, const std::string& path);

// Optimizer and scheduler (optimizer_config.cpp, scheduler_config.cpp).
// A JSON null gives nullopt.
std::optional<OptimizerConfig> parse_optimizer(const cJSON* v, const std::string& path);
std::optional<SchedulerConfig> parse_scheduler(const cJSON* v, const std::string& path);
void write_optimizer(JsonWriter& w, const char* key, const std::optional<OptimizerConfig>& o);
void write_scheduler(JsonWriter& w, const char* key, const std::optional<SchedulerConfig>& s);
bool is_deepspeed_scheduler(const std::string& type);

// Every top-level key, in to_json order (from the declarations, config_fields_top.cpp).
const std::vector<std::string>& top_level_keys();

// Top-level DeepSpeed keys outside this library's scope (hybrid_engine,
// compile, ...): only {} or {"enabled": false} is accepted.
const std::vector<const char*>& out_of_scope_keys();
bool is_out_of_scope_key(const char* key);
void check_out_of_scope(const cJSON* v, const std::string& path);

// The keys of supported.cpp's policy (unsupported when non-default) and
// ignored tables, for classify_key() (key_classes.cpp).
std::vector<std::string> policy_keys();
std::vector<std::string> ignored_keys();

// Compact JSON text of a value (for opaque params).
std::string compact_json(const cJSON* v);

}  // namespace ds::config::detail
