#include "config/json_reader.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <unordered_set>

#include "config/json_writer.h"
#include "core/error.h"

namespace ds::config::detail {

namespace {

std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

}  // namespace

JsonPtr parse_json_text(std::string_view text) {
    check_json_syntax(text);  // precise line/column; cJSON then cannot fail on syntax
    std::string buf(text);    // NUL-terminated copy
    const char* end = nullptr;
    cJSON* root = cJSON_ParseWithLengthOpts(buf.c_str(), buf.size() + 1, &end, 1);
    // The syntax check accepts only what cJSON parses, so a failure here is
    // cJSON's own allocation failing or a syntax case the check missed; either
    // way the position is the useful part (never report it as out of memory).
    if (!root) {
        const size_t at = end && end >= buf.c_str() ? static_cast<size_t>(end - buf.c_str()) : 0;
        fail(DS_ERR_INVALID_CONFIG, "config JSON could not be parsed (stopped at byte offset %zu)", at);
    }
    JsonPtr doc(root);
    check_duplicate_keys(root, "");
    return doc;
}

std::string short_key(std::string_view key) {
    constexpr size_t kShown = 64;
    if (key.size() <= kShown) return std::string(key);
    return std::string(key.substr(0, kShown)) + format("...(%zu bytes)", key.size());
}

std::string join_path(const std::string& parent, std::string_view key) {
    if (parent.empty()) return std::string(key);
    std::string p = parent;
    p += '.';
    p += key;
    return p;
}

size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
        cur[0] = i;
        for (size_t j = 1; j <= b.size(); ++j) {
            size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
            cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
        }
        std::swap(prev, cur);
    }
    return prev[b.size()];
}

std::string closest_match(std::string_view word, const std::vector<std::string>& candidates) {
    // The distance is at least the length difference: a candidate whose
    // length alone rules it out is skipped, and the word is lower-cased only
    // if some candidate is left, so a 50 MB key costs O(size), not
    // O(size x candidates).
    auto may_qualify = [&](const std::string& c) {
        const size_t diff = c.size() > word.size() ? c.size() - word.size() : word.size() - c.size();
        return diff <= 2 || diff * 3 <= word.size();
    };
    if (std::none_of(candidates.begin(), candidates.end(), may_qualify)) return {};
    const std::string lw = lower(word);
    for (const auto& c : candidates)
        if (c.size() == word.size() && lower(c) == lw) return c;
    // Distance ignoring case: "sgdd" is one edit from "SGD".
    std::string best;
    size_t best_d = SIZE_MAX;
    for (const auto& c : candidates) {
        if (!may_qualify(c)) continue;
        size_t d = edit_distance(lw, lower(c));
        if (d < best_d) {
            best_d = d;
            best = c;
        }
    }
    if (best_d <= 2 || best_d * 3 <= word.size()) return best;
    return {};
}

std::string describe(const cJSON* v) {
    if (!v) return "nothing";
    if (cJSON_IsBool(v)) return cJSON_IsTrue(v) ? "true" : "false";
    if (cJSON_IsNull(v)) return "null";
    if (cJSON_IsNumber(v)) {
        const double d = v->valuedouble;
        if (std::isfinite(d) && std::floor(d) == d && std::fabs(d) < 1e15)
            return format("%lld", static_cast<long long>(d));
        return format_number(d);
    }
    if (cJSON_IsString(v)) return format("\"%s\"", v->valuestring);
    if (cJSON_IsArray(v)) return "an array";
    if (cJSON_IsObject(v)) return "an object";
    return "an invalid value";
}

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
    if (d < lo || d > hi) {
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

// The path of the value at the top of `chain` (a parent's key, or its index
// in an array), built only when an error is reported: building it per level
// would copy every ancestor key at every depth.
struct Link {
    const Link* parent;
    const char* key;  // nullptr => array element `index`
    int index;
};

std::string link_path(const std::string& root, const Link* l) {
    if (!l) return root;
    std::string p = link_path(root, l->parent);
    if (l->key) return join_path(p, short_key(l->key));
    return p + format("[%d]", l->index);
}

void check_duplicates(const cJSON* v, const std::string& root, const Link* at) {
    if (cJSON_IsObject(v)) {
        std::unordered_set<std::string_view> seen;
        for (const cJSON* c = v->child; c; c = c->next) {
            const Link here{at, c->string, 0};
            if (!seen.insert(c->string).second)
                fail(DS_ERR_INVALID_CONFIG, "%s: duplicate key", link_path(root, &here).c_str());
            check_duplicates(c, root, &here);
        }
    } else if (cJSON_IsArray(v)) {
        int i = 0;
        for (const cJSON* c = v->child; c; c = c->next, ++i) {
            const Link here{at, nullptr, i};
            check_duplicates(c, root, &here);
        }
    }
}

}  // namespace

void check_duplicate_keys(const cJSON* v, const std::string& path) { check_duplicates(v, path, nullptr); }

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

bool ObjectReader::read(const char* key, std::optional<std::string>& out) {
    const cJSON* v = get(key);
    if (!v) return false;
    if (cJSON_IsNull(v))
        out.reset();
    else
        out = as_string(v, key_path(key));
    return true;
}

bool ObjectReader::read(const char* key, std::optional<int64_t>& out, int64_t lo, int64_t hi) {
    const cJSON* v = get(key);
    if (!v) return false;
    if (cJSON_IsNull(v))
        out.reset();
    else
        out = as_int(v, key_path(key), lo, hi);
    return true;
}

bool ObjectReader::read(const char* key, std::optional<bool>& out) {
    const cJSON* v = get(key);
    if (!v) return false;
    if (cJSON_IsNull(v))
        out.reset();
    else
        out = as_bool(v, key_path(key));
    return true;
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
