#include "ckpt/json_in.h"

#include <cmath>
#include <cstdlib>
#include <memory>

#include "core/error.h"
#include "core/json/json_messages.h"

namespace ds::ckpt {

void JsonIn::fail_here(const char* why) const {
    fail(DS_ERR_FORMAT, "%s: key '%s' %s (got %s)", file_.c_str(), path_.empty() ? "<root>" : path_.c_str(), why,
         json::describe(node_).c_str());
}

void JsonIn::expect_object() const {
    if (!cJSON_IsObject(node_)) fail_here("must be an object");
}

void JsonIn::expect_array() const {
    if (!cJSON_IsArray(node_)) fail_here("must be an array");
}

bool JsonIn::has(const char* key) const {
    expect_object();
    return cJSON_GetObjectItemCaseSensitive(node_, key) != nullptr;
}

JsonIn JsonIn::at(const char* key) const {
    expect_object();
    const cJSON* c = cJSON_GetObjectItemCaseSensitive(node_, key);
    const std::string p = json::join_path(path_, key);
    DS_CHECK(c != nullptr, DS_ERR_FORMAT, "%s: key '%s' is missing", file_.c_str(), p.c_str());
    return JsonIn(c, file_, p);
}

JsonIn JsonIn::element(const cJSON* child, size_t index) const {
    return JsonIn(child, file_, path_ + "[" + std::to_string(index) + "]");
}

JsonIn JsonIn::member(const cJSON* child) const {
    return JsonIn(child, file_, json::join_path(path_, child->string));
}

int64_t JsonIn::as_int(int64_t lo, int64_t hi) const {
    if (!cJSON_IsNumber(node_)) fail_here("must be an integer");
    const double d = node_->valuedouble;
    // Beyond 2^53 a JSON number read as a double is no longer exact.
    if (!(std::floor(d) == d && std::fabs(d) <= 9007199254740992.0)) fail_here("must be an exact integer");
    const auto v = static_cast<int64_t>(d);
    if (v < lo || v > hi) fail_here(format("must be in [%lld, %lld]", static_cast<long long>(lo),
                                           static_cast<long long>(hi)).c_str());
    return v;
}

double JsonIn::as_double() const {
    if (!cJSON_IsNumber(node_) || !std::isfinite(node_->valuedouble)) fail_here("must be a finite number");
    return node_->valuedouble;
}

bool JsonIn::as_bool() const {
    if (!cJSON_IsBool(node_)) fail_here("must be true or false");
    return cJSON_IsTrue(node_);
}

std::string JsonIn::as_string() const {
    if (!cJSON_IsString(node_)) fail_here("must be a string");
    return node_->valuestring;
}

std::string JsonIn::as_compact_json() const {
    std::unique_ptr<char, void (*)(void*)> s(cJSON_PrintUnformatted(node_), cJSON_free);
    DS_CHECK(s != nullptr, DS_ERR_OUT_OF_MEMORY, "%s: out of memory printing key '%s'", file_.c_str(),
             path_.c_str());
    return s.get();
}

}  // namespace ds::ckpt
