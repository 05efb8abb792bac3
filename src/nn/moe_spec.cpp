// The GPT spec's "moe" object (model_spec.h GptMoeSpec): strict like the
// rest of the spec, every bad key or value named by its path "moe.<key>".
#include <cjson/cJSON.h>

#include <cmath>

#include "config/json_reader.h"
#include "core/error.h"
#include "nn/model_spec.h"

namespace ds::nn {

namespace {

const std::vector<std::string> kMoeKeys = {
    "num_experts", "ep_size",      "k",           "capacity_factor", "eval_capacity_factor",
    "min_capacity", "noisy_gate_policy", "drop_tokens", "use_rts", "use_residual",
    "top2_2nd_expert_sampling", "aux_loss_coef", "every", "enable_expert_tensor_parallelism"};

void read_factor(config::detail::ObjectReader& r, const char* key, double& out) {
    if (!r.read(key, out)) return;
    DS_CHECK(std::isfinite(out) && out > 0.0, DS_ERR_INVALID_CONFIG, "%s: %g must be finite and > 0",
             r.key_path(key).c_str(), out);
}

}  // namespace

GptMoeSpec parse_gpt_moe(const cJSON* obj, int64_t n_layer) {
    DS_CHECK(cJSON_IsObject(obj), DS_ERR_INVALID_CONFIG, "moe: expected an object, got %s",
             json::describe(obj).c_str());
    check_spec_keys(obj, "moe", kMoeKeys, "the gpt spec's moe object");
    config::detail::ObjectReader r(obj, "moe", config::detail::AutoRule::Reject);
    GptMoeSpec m;
    m.enabled = true;
    DS_CHECK(r.read("num_experts", m.num_experts, 1, 65536), DS_ERR_INVALID_CONFIG, "moe.num_experts: required key is missing");
    r.read("ep_size", m.ep_size, 1, 65536);
    DS_CHECK(m.num_experts % m.ep_size == 0, DS_ERR_INVALID_CONFIG,
             "moe.ep_size: %lld does not divide num_experts = %lld", static_cast<long long>(m.ep_size),
             static_cast<long long>(m.num_experts));
    r.read("k", m.k, 1, 2);
    DS_CHECK(m.k == 1 || m.num_experts >= 2, DS_ERR_INVALID_CONFIG, "moe.k: 2 needs num_experts >= 2, got %lld",
             static_cast<long long>(m.num_experts));
    read_factor(r, "capacity_factor", m.capacity_factor);
    read_factor(r, "eval_capacity_factor", m.eval_capacity_factor);
    r.read("min_capacity", m.min_capacity, 0, int64_t{1} << 40);
    // DeepSpeed accepts None (JSON null), "None", "Jitter" and "RSample".
    if (const cJSON* p = cJSON_GetObjectItemCaseSensitive(obj, "noisy_gate_policy"); p && !cJSON_IsNull(p)) {
        r.read("noisy_gate_policy", m.noisy_gate_policy);
        DS_CHECK(m.noisy_gate_policy == "None" || m.noisy_gate_policy == "Jitter" || m.noisy_gate_policy == "RSample",
                 DS_ERR_INVALID_CONFIG, "moe.noisy_gate_policy: \"%s\" is not \"None\", \"Jitter\" or \"RSample\"",
                 m.noisy_gate_policy.c_str());
    }
    r.read("drop_tokens", m.drop_tokens);
    r.read("use_rts", m.use_rts);
    r.read("use_residual", m.use_residual);
    r.read("top2_2nd_expert_sampling", m.top2_2nd_expert_sampling);
    // true is refused by an engine with tensor parallelism (tp::shard_model);
    // without it DeepSpeed ignores the flag too.
    r.read("enable_expert_tensor_parallelism", m.enable_expert_tensor_parallelism);
    if (r.read("aux_loss_coef", m.aux_loss_coef))
        DS_CHECK(std::isfinite(m.aux_loss_coef) && m.aux_loss_coef >= 0.0, DS_ERR_INVALID_CONFIG,
                 "moe.aux_loss_coef: %g must be finite and >= 0", m.aux_loss_coef);
    r.read("every", m.every, 1, 4096);
    DS_CHECK(m.every <= n_layer, DS_ERR_INVALID_CONFIG,
             "moe.every: %lld is larger than n_layer = %lld, so no layer would get an MoE layer",
             static_cast<long long>(m.every), static_cast<long long>(n_layer));
    return m;
}

}  // namespace ds::nn
