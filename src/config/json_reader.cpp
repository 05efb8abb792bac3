#include "config/json_reader.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string_view>

#include "core/json/json_writer.h"
#include "core/error.h"

namespace ds::config::detail {

bool is_auto(const cJSON* v) {
    return v && cJSON_IsString(v) && std::strcmp(v->valuestring, "auto") == 0;
}

void fail_auto(const std::string& path) {
    fail(DS_ERR_INVALID_CONFIG,
         "%s: \"auto\" is not accepted here: no value can be derived for this key", path.c_str());
}

void fail_type(const std::string& path, const char* expected, const cJSON* got) {
    if (is_auto(got)) fail_auto(path);
    fail(DS_ERR_INVALID_CONFIG, "%s: expected %s, got %s", path.c_str(), expected,
         describe(got).c_str());
}

bool as_bool(const cJSON* v, const std::string& path) {
    if (!cJSON_IsBool(v)) fail_type(path, "a boolean (true or false)", v);
    return cJSON_IsTrue(v);
}

int64_t as_int(const cJSON* v, const std::string& path, int64_t lo, int64_t hi) {
    if (!cJSON_IsNumber(v)) fail_type(path, "an integer", v);
    const double d = v->valuedouble;
    if (!std::isfinite(d) || std::floor(d) != d) fail_type(path, "an integer", v);
    constexpr double two63 = 9223372036854775808.0;
    if (d < -two63 || d > two63)
        fail(DS_ERR_INVALID_CONFIG, "%s: %s is outside the 64-bit integer range", path.c_str(),
             describe(v).c_str());
    // 2^63 is what 9223372036854775807 (sys.maxsize) becomes as a double.
    const int64_t i = d == two63 ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(d);
    if (i < lo || i > hi) {
        if (hi == std::numeric_limits<int64_t>::max())
            fail(DS_ERR_INVALID_CONFIG, "%s: must be >= %lld, got %lld", path.c_str(),
                 static_cast<long long>(lo), static_cast<long long>(i));
        fail(DS_ERR_INVALID_CONFIG, "%s: must be in [%lld, %lld], got %lld", path.c_str(),
             static_cast<long long>(lo), static_cast<long long>(hi), static_cast<long long>(i));
    }
    return i;
}

double as_double(const cJSON* v, const std::string& path, double lo, double hi) {
    if (!cJSON_IsNumber(v)) fail_type(path, "a number", v);
    const double d = v->valuedouble;
    if (!std::isfinite(d))
        fail(DS_ERR_INVALID_CONFIG, "%s: must be finite, got %s", path.c_str(), describe(v).c_str());
    if (!json::in_range(d, lo, hi)) {
        if (std::isinf(hi))
            fail(DS_ERR_INVALID_CONFIG, "%s: must be >= %s, got %s", path.c_str(),
                 format_number(lo).c_str(), format_number(d).c_str());
        fail(DS_ERR_INVALID_CONFIG, "%s: must be in [%s, %s], got %s", path.c_str(),
             format_number(lo).c_str(), format_number(hi).c_str(), format_number(d).c_str());
    }
    return d;
}

std::string as_string(const cJSON* v, const std::string& path) {
    if (!cJSON_IsString(v)) fail_type(path, "a string", v);
    return v->valuestring;
}

std::vector<std::string> as_string_list(const cJSON* v, const std::string& path) {
    if (!cJSON_IsArray(v)) fail_type(path, "an array of strings", v);
    std::vector<std::string> out;
    int i = 0;
    for (const cJSON* e = v->child; e; e = e->next, ++i)
        out.push_back(as_string(e, format("%s[%d]", path.c_str(), i)));
    return out;
}

// ---------------------------------------------------------------------------

ObjectReader::ObjectReader(const cJSON* obj, std::string path, AutoRule rule)
    : obj_(obj), path_(std::move(path)), rule_(rule) {
    if (!cJSON_IsObject(obj_)) fail_type(path_, "an object", obj_);
}

namespace {
thread_local KeyObserver t_observer = nullptr;
thread_local void* t_observer_ctx = nullptr;
}  // namespace

void set_key_observer(KeyObserver fn, void* ctx) {
    t_observer = fn;
    t_observer_ctx = ctx;
}

const cJSON* ObjectReader::get_raw(const char* key) {
    if (t_observer) t_observer(key_path(key), t_observer_ctx);
    if (std::find(known_.begin(), known_.end(), key) == known_.end()) known_.emplace_back(key);
    for (const cJSON* c = obj_->child; c; c = c->next)
        if (std::strcmp(c->string, key) == 0) return c;
    return nullptr;
}

const cJSON* ObjectReader::get(const char* key) {
    const cJSON* v = get_raw(key);
    if (is_auto(v)) {
        if (rule_ == AutoRule::Default) return nullptr;
        fail_auto(key_path(key));
    }
    return v;
}

bool ObjectReader::read(const char* key, bool& out) {
    const cJSON* v = get(key);
    if (!v) return false;
    out = as_bool(v, key_path(key));
    return true;
}

bool ObjectReader::read(const char* key, int64_t& out, int64_t lo, int64_t hi) {
    const cJSON* v = get(key);
    if (!v) return false;
    out = as_int(v, key_path(key), lo, hi);
    return true;
}

bool ObjectReader::read(const char* key, double& out, double lo, double hi) {
    const cJSON* v = get(key);
    if (!v) return false;
    out = as_double(v, key_path(key), lo, hi);
    return true;
}

bool ObjectReader::read(const char* key, std::string& out) {
    const cJSON* v = get(key);
    if (!v) return false;
    out = as_string(v, key_path(key));
    return true;
}

namespace {

// The std::optional reads: false when absent; a JSON null => nullopt;
// otherwise `convert(value, key path)`.
template <class T, class Convert>
bool read_optional(ObjectReader& r, const char* key, std::optional<T>& out, Convert convert) {
    const cJSON* v = r.get(key);
    if (!v) return false;
    if (cJSON_IsNull(v))
        out.reset();
    else
        out = convert(v, r.key_path(key));
    return true;
}

}  // namespace

bool ObjectReader::read(const char* key, std::optional<std::string>& out) {
    return read_optional(*this, key, out, [](const cJSON* v, const std::string& p) { return as_string(v, p); });
}

bool ObjectReader::read(const char* key, std::optional<int64_t>& out, int64_t lo, int64_t hi) {
    return read_optional(*this, key, out,
                         [&](const cJSON* v, const std::string& p) { return as_int(v, p, lo, hi); });
}

bool ObjectReader::read(const char* key, std::optional<bool>& out) {
    return read_optional(*this, key, out, [](const cJSON* v, const std::string& p) { return as_bool(v, p); });
}

void ObjectReader::finish() const {
    for (const cJSON* c = obj_->child; c; c = c->next) {
        // string_view: its length is taken once (comparing std::string with
        // a char* would strlen a 50 MB key once per known key).
        const std::string_view name(c->string);
        if (std::find(known_.begin(), known_.end(), name) != known_.end()) continue;
        const std::string p = key_path(short_key(c->string));
        const std::string best = closest_match(c->string, known_);
        if (!best.empty())
            fail(DS_ERR_INVALID_CONFIG, "%s: unknown key; did you mean %s?", p.c_str(),
                 key_path(best).c_str());
        if (path_.empty())
            fail(DS_ERR_INVALID_CONFIG, "%s: unknown key (not a DeepSpeed config key)", p.c_str());
        fail(DS_ERR_INVALID_CONFIG, "%s: unknown key in %s", p.c_str(), path_.c_str());
    }
}

}  // namespace ds::config::detail
