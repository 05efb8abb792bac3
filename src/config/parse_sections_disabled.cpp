// DeepSpeed sections outside this library's scope. amp, elasticity,
// progressive_layer_drop and eigenvalue are parsed (types and keys checked)
// and accepted only when every value equals its disabled default; the other
// out-of-scope top-level keys (hybrid_engine, compile, ...) only as {} or
// {"enabled": false}. Anything else is DS_ERR_UNSUPPORTED naming the key.
#include <cstring>
#include <vector>

#include "config/parse_internal.h"
#include "core/error.h"

namespace ds::config::detail {

namespace {

// Collects which keys were given with a non-default value; reports the
// first after all keys were type-checked (unknown keys take precedence).
class DisabledOnly {
public:
    DisabledOnly(ObjectReader& r, const char* what) : r_(r), what_(what) {}
    template <class T>
    void note(const char* key, const T& got, const T& def) {
        if (!(got == def) && first_.empty()) first_ = key;
    }
    void check(bool enabled) {
        r_.finish();
        if (enabled)
            fail(DS_ERR_UNSUPPORTED, "%s: true is not supported: %s is outside this library's scope",
                 r_.key_path("enabled").c_str(), what_);
        if (!first_.empty())
            fail(DS_ERR_UNSUPPORTED,
                 "%s: %s is outside this library's scope; only its disabled default is accepted",
                 r_.key_path(first_).c_str(), what_);
    }

private:
    ObjectReader& r_;
    const char* what_;
    std::string first_;
};

}  // namespace

void parse_amp(const cJSON* v, const std::string& path, AmpConfig& out) {
    ObjectReader r(v, path, AutoRule::Reject);
    r.read("enabled", out.enabled);
    // Every other key would go to apex's amp.initialize: outside scope, not unknown.
    for (const cJSON* c = v->child; c; c = c->next)
        if (std::strcmp(c->string, "enabled") != 0)
            fail(DS_ERR_UNSUPPORTED,
                 "%s: Apex AMP is outside this library's scope (only {\"enabled\": false} is accepted)",
                 r.key_path(c->string).c_str());
    DS_CHECK(!out.enabled, DS_ERR_UNSUPPORTED,
             "%s: true is not supported: Apex AMP is outside this library's scope (use fp16 or bf16)",
             r.key_path("enabled").c_str());
}

void parse_elasticity(const cJSON* v, const std::string& path, ElasticityConfig& out) {
    const ElasticityConfig def;
    ObjectReader r(v, path, AutoRule::Reject);
    DisabledOnly d(r, "elasticity");
    r.read("enabled", out.enabled);
    r.read("max_train_batch_size", out.max_train_batch_size, 1);
    if (const cJSON* m = r.get("micro_batch_sizes")) {
        if (!cJSON_IsArray(m)) fail_type(r.key_path("micro_batch_sizes"), "an array of integers", m);
        out.micro_batch_sizes.clear();
        int i = 0;
        for (const cJSON* e = m->child; e; e = e->next, ++i)
            out.micro_batch_sizes.push_back(
                as_int(e, format("%s[%d]", r.key_path("micro_batch_sizes").c_str(), i), 1));
    }
    r.read("min_gpus", out.min_gpus, 1);
    r.read("max_gpus", out.max_gpus, 1);
    r.read("num_gpus_per_node", out.num_gpus_per_node, 1);
    r.read("model_parallel_size", out.model_parallel_size, 1);
    r.read("min_time", out.min_time, 0.0);
    r.read("prefer_larger_batch", out.prefer_larger_batch);
    r.read("ignore_non_elastic_batch_info", out.ignore_non_elastic_batch_info);
    r.read("version", out.version, 0.0);
    d.note("max_train_batch_size", out.max_train_batch_size, def.max_train_batch_size);
    d.note("micro_batch_sizes", out.micro_batch_sizes, def.micro_batch_sizes);
    d.note("min_gpus", out.min_gpus, def.min_gpus);
    d.note("max_gpus", out.max_gpus, def.max_gpus);
    d.note("num_gpus_per_node", out.num_gpus_per_node, def.num_gpus_per_node);
    d.note("model_parallel_size", out.model_parallel_size, def.model_parallel_size);
    d.note("min_time", out.min_time, def.min_time);
    d.note("prefer_larger_batch", out.prefer_larger_batch, def.prefer_larger_batch);
    d.note("ignore_non_elastic_batch_info", out.ignore_non_elastic_batch_info,
           def.ignore_non_elastic_batch_info);
    d.note("version", out.version, def.version);
    d.check(out.enabled);
}

void parse_progressive_layer_drop(const cJSON* v, const std::string& path,
                                  ProgressiveLayerDropConfig& out) {
    const ProgressiveLayerDropConfig def;
    ObjectReader r(v, path, AutoRule::Reject);
    DisabledOnly d(r, "progressive_layer_drop");
    r.read("enabled", out.enabled);
    r.read("theta", out.theta);
    r.read("gamma", out.gamma);
    d.note("theta", out.theta, def.theta);
    d.note("gamma", out.gamma, def.gamma);
    d.check(out.enabled);
}

void parse_eigenvalue(const cJSON* v, const std::string& path, EigenvalueConfig& out) {
    const EigenvalueConfig def;
    ObjectReader r(v, path, AutoRule::Reject);
    DisabledOnly d(r, "eigenvalue");
    r.read("enabled", out.enabled);
    r.read("verbose", out.verbose);
    r.read("max_iter", out.max_iter, 1);
    r.read("tol", out.tol, 0.0);
    r.read("stability", out.stability, 0.0);
    r.read("gas_boundary_resolution", out.gas_boundary_resolution, 1);
    r.read("layer_name", out.layer_name);
    r.read("layer_num", out.layer_num, 0);
    d.note("verbose", out.verbose, def.verbose);
    d.note("max_iter", out.max_iter, def.max_iter);
    d.note("tol", out.tol, def.tol);
    d.note("stability", out.stability, def.stability);
    d.note("gas_boundary_resolution", out.gas_boundary_resolution, def.gas_boundary_resolution);
    d.note("layer_name", out.layer_name, def.layer_name);
    d.note("layer_num", out.layer_num, def.layer_num);
    d.check(out.enabled);
}

bool is_out_of_scope_key(const char* key) {
    static const char* const keys[] = {
        "hybrid_engine", "compression_training", "data_efficiency", "curriculum_learning",
        "sparse_attention", "weight_quantization", "compile", "tensor_parallel", "expert_parallel",
        "nebula", "datastates", "autotuning", "quantize_training"};
    for (const char* k : keys)
        if (std::strcmp(k, key) == 0) return true;
    return false;
}

void check_out_of_scope(const cJSON* v, const std::string& path) {
    // DeepSpeed turns sparse attention on whenever the section is present.
    DS_CHECK(path != "sparse_attention", DS_ERR_UNSUPPORTED,
             "%s: sparse attention is outside this library's scope (DeepSpeed enables it whenever "
             "this section is present)",
             path.c_str());
    bool disabled = false;
    if (cJSON_IsObject(v)) {
        const cJSON* c = v->child;
        disabled = c == nullptr ||
                   (c->next == nullptr && std::strcmp(c->string, "enabled") == 0 && cJSON_IsFalse(c));
    }
    DS_CHECK(disabled, DS_ERR_UNSUPPORTED,
             "%s: this DeepSpeed feature is outside this library's scope (only {} or "
             "{\"enabled\": false} is accepted)",
             path.c_str());
}

}  // namespace ds::config::detail
