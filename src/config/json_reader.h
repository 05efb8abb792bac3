// Strict reading of a cJSON tree for the config parser: exact-case key
// lookup, typed value conversion with range checks, "auto" handling, and
// unknown-key reports with a "did you mean" suggestion. Every error is
// ds::Error(DS_ERR_INVALID_CONFIG) whose message starts with the dotted key
// path. Parsing the text, the message helpers and the writer live in
// core/json/ (shared with the checkpoint code); the config code names them
// through the using-declarations below.
#pragma once

#include <cjson/cJSON.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/json/json_messages.h"
#include "core/json/json_text.h"
#include "core/json/json_writer.h"

namespace ds::config::detail {

using json::closest_match;
using json::CJsonDeleter;
using json::describe;
using json::edit_distance;
using json::join_path;
using json::JsonPtr;
using json::short_key;
using json::format_number;
using json::JsonWriter;

// How the config reports a JSON text defect: DS_ERR_INVALID_CONFIG,
// "config JSON syntax error at line L, column C: <reason>",
// "<path>: duplicate key".
inline json::TextErrors config_text_errors() { return {DS_ERR_INVALID_CONFIG, "", "config JSON"}; }

inline void check_json_syntax(std::string_view text) { json::check_syntax(text, config_text_errors()); }
inline JsonPtr parse_json_text(std::string_view text) { return json::parse_text(text, config_text_errors()); }
inline void check_duplicate_keys(const cJSON* v, const std::string& path) {
    json::check_duplicate_keys(v, path, config_text_errors());
}

bool is_auto(const cJSON* v);

// Typed conversions; `path` names the value in error messages. Booleans are
// never numbers and numbers never booleans; integral doubles (5e8) are
// integers; "auto" reaching these is reported as "no value can be derived".
bool as_bool(const cJSON* v, const std::string& path);
int64_t as_int(const cJSON* v, const std::string& path,
               int64_t lo = std::numeric_limits<int64_t>::min(),
               int64_t hi = std::numeric_limits<int64_t>::max());
double as_double(const cJSON* v, const std::string& path,
                 double lo = -std::numeric_limits<double>::infinity(),
                 double hi = std::numeric_limits<double>::infinity());
std::string as_string(const cJSON* v, const std::string& path);
std::vector<std::string> as_string_list(const cJSON* v, const std::string& path);

[[noreturn]] void fail_auto(const std::string& path);
[[noreturn]] void fail_type(const std::string& path, const char* expected, const cJSON* got);

// Test hook for the config-key audit (tests/unit/test_config_key_audit.cpp):
// while set on this thread, every key path an ObjectReader asks for is
// passed to `fn`. Null turns it off.
using KeyObserver = void (*)(const std::string& path, void* ctx);
void set_key_observer(KeyObserver fn, void* ctx);

// How a reader treats the string "auto" as a value:
//   Default — DeepSpeed's pydantic sections drop it: the key reads as absent (default kept);
//   Reject  — plain-dict sections: "auto" is an error (no value can be derived).
enum class AutoRule { Default, Reject };

// One JSON object being read (duplicate keys were rejected by
// parse_json_text). Each key asked for through get()/read() becomes
// a known key; finish() reports every other key as unknown (with a
// suggestion among the known ones).
class ObjectReader {
public:
    ObjectReader(const cJSON* obj, std::string path, AutoRule rule);

    const std::string& path() const { return path_; }
    std::string key_path(std::string_view key) const { return join_path(path_, key); }

    // The value under `key` (exact case) or nullptr when absent (or "auto"
    // under AutoRule::Default). Under AutoRule::Reject "auto" throws.
    const cJSON* get(const char* key);
    // As get() but "auto" is returned as-is whatever the rule.
    const cJSON* get_raw(const char* key);
    // True when `key` is present with a value other than a dropped "auto".
    bool has(const char* key) { return get(key) != nullptr; }

    // Typed reads: leave `out` untouched when the key is absent. A JSON null
    // is a type error except for the std::optional overloads (null => nullopt).
    bool read(const char* key, bool& out);
    bool read(const char* key, int64_t& out,
              int64_t lo = std::numeric_limits<int64_t>::min(),
              int64_t hi = std::numeric_limits<int64_t>::max());
    bool read(const char* key, double& out,
              double lo = -std::numeric_limits<double>::infinity(),
              double hi = std::numeric_limits<double>::infinity());
    bool read(const char* key, std::string& out);
    bool read(const char* key, std::optional<std::string>& out);
    bool read(const char* key, std::optional<int64_t>& out,
              int64_t lo = std::numeric_limits<int64_t>::min(),
              int64_t hi = std::numeric_limits<int64_t>::max());
    bool read(const char* key, std::optional<bool>& out);

    // Report the first key that was never asked for.
    void finish() const;

private:
    const cJSON* obj_;
    std::string path_;
    AutoRule rule_;
    std::vector<std::string> known_;
};

}  // namespace ds::config::detail
