// Typed, path-aware reading of a parsed JSON document whose every defect is
// DS_ERR_FORMAT "<file>: key '<dotted.path>' ..." (checkpoint manifests).
#pragma once

#include <cjson/cJSON.h>

#include <cstdint>
#include <string>

namespace ds::ckpt {

class JsonIn {
public:
    JsonIn(const cJSON* node, std::string file, std::string path)
        : node_(node), file_(std::move(file)), path_(std::move(path)) {}

    const cJSON* node() const { return node_; }
    const std::string& path() const { return path_; }
    bool is_null() const { return cJSON_IsNull(node_); }

    // A member of this object (which must be an object); missing: FORMAT.
    JsonIn at(const char* key) const;
    bool has(const char* key) const;
    // Elements of an array / members of an object, in order.
    JsonIn element(const cJSON* child, size_t index) const;
    JsonIn member(const cJSON* child) const;

    void expect_object() const;
    void expect_array() const;
    // f(member, key) for each member of this object (which must be one), in order.
    template <class F>
    void each_member(F&& f) const {
        expect_object();
        for (const cJSON* c = node_->child; c; c = c->next) f(member(c), c->string);
    }
    // f(element) for each element of this array (which must be one), in order.
    template <class F>
    void each_element(F&& f) const {
        expect_array();
        size_t i = 0;
        for (const cJSON* c = node_->child; c; c = c->next, ++i) f(element(c, i));
    }
    int64_t as_int(int64_t lo, int64_t hi) const;  // integral JSON number within [lo, hi]
    double as_double() const;                      // finite number
    bool as_bool() const;
    std::string as_string() const;
    // The value re-serialised compactly.
    std::string as_compact_json() const;

    [[noreturn]] void fail_here(const char* why) const;

private:
    const cJSON* node_;
    std::string file_;
    std::string path_;
};

}  // namespace ds::ckpt
