// fp16, bf16 and zero_optimization (with offload_param / offload_optimizer):
// DeepSpeed's pydantic sections, so "auto" means "keep the default"
// (reference §1.3, §1.4).
#include <cmath>
#include <cstring>

#include "config/parse_internal.h"
#include "core/error.h"

namespace ds::config::detail {

namespace {

void parse_offload_device(ObjectReader& r, std::string& device, std::optional<std::string>& nvme_path) {
    if (const cJSON* d = r.get("device")) {
        device = as_string(d, r.key_path("device"));
        if (device != "none" && device != "cpu" && device != "nvme")
            fail(DS_ERR_INVALID_CONFIG, "%s: must be \"none\", \"cpu\" or \"nvme\", got \"%s\"",
                 r.key_path("device").c_str(), device.c_str());
    }
    r.read("nvme_path", nvme_path);
}

void check_nvme_path(const ObjectReader& r, const std::string& device,
                     const std::optional<std::string>& nvme_path) {
    if (device == "nvme" && (!nvme_path || nvme_path->empty()))
        fail(DS_ERR_INVALID_CONFIG, "%s: device \"nvme\" requires nvme_path",
             r.key_path("nvme_path").c_str());
}

OffloadParamConfig parse_offload_param(const cJSON* v, const std::string& path) {
    OffloadParamConfig o;
    ObjectReader r(v, path, AutoRule::Default);
    parse_offload_device(r, o.device, o.nvme_path);
    r.read("buffer_count", o.buffer_count, 0);
    r.read("buffer_size", o.buffer_size, 0);
    r.read("max_in_cpu", o.max_in_cpu, 0);
    r.read("pin_memory", o.pin_memory);
    r.finish();
    check_nvme_path(r, o.device, o.nvme_path);
    return o;
}

OffloadOptimizerConfig parse_offload_optimizer(const cJSON* v, const std::string& path) {
    OffloadOptimizerConfig o;
    ObjectReader r(v, path, AutoRule::Default);
    parse_offload_device(r, o.device, o.nvme_path);
    r.read("buffer_count", o.buffer_count, 0);
    r.read("pin_memory", o.pin_memory);
    r.read("pipeline_read", o.pipeline_read);
    r.read("pipeline_write", o.pipeline_write);
    r.read("fast_init", o.fast_init);
    r.read("ratio", o.ratio, 0.0, 1.0);
    r.read("super_offload", o.super_offload);
    r.read("cpuadam_cores_perc", o.cpuadam_cores_perc, 0.0, 1.0);
    r.finish();
    check_nvme_path(r, o.device, o.nvme_path);
    return o;
}

// A key with a second accepted spelling (pydantic alias): either may be
// given, not both. Returns the value under whichever was given.
const cJSON* get_aliased(ObjectReader& r, const char* name, const char* alias) {
    const cJSON* a = r.get(name);
    const cJSON* b = r.get(alias);
    if (a && b)
        fail(DS_ERR_INVALID_CONFIG, "%s: same setting as %s; give only one",
             r.key_path(alias).c_str(), r.key_path(name).c_str());
    return a ? a : b;
}

const char* given_name(ObjectReader& r, const char* name, const char* alias) {
    return r.get(name) ? name : alias;
}

void read_aliased(ObjectReader& r, const char* name, const char* alias, int64_t& out, int64_t lo) {
    if (const cJSON* v = get_aliased(r, name, alias))
        out = as_int(v, r.key_path(given_name(r, name, alias)), lo);
}

void read_aliased(ObjectReader& r, const char* name, const char* alias, bool& out) {
    if (const cJSON* v = get_aliased(r, name, alias))
        out = as_bool(v, r.key_path(given_name(r, name, alias)));
}

// A deprecated boolean (cpu_offload, cpu_offload_param) that maps onto an
// offload section: true => device cpu, false/null => no offload.
template <class Offload>
void map_deprecated_offload(ObjectReader& r, const char* dep, const char* repl,
                            std::optional<Offload>& out) {
    const cJSON* v = r.get(dep);
    if (!v) return;
    if (r.get(repl))
        fail(DS_ERR_INVALID_CONFIG, "%s: deprecated key given together with its replacement %s",
             r.key_path(dep).c_str(), r.key_path(repl).c_str());
    if (cJSON_IsNull(v)) return;
    if (as_bool(v, r.key_path(dep))) {
        out.emplace();
        out->device = "cpu";
    }
}

// A size that later divides or sizes a buffer: 0 is refused here rather than
// failing at the first step on several ranks.
void read_bucket_size(ObjectReader& r, const char* key, int64_t& out, const char* why) {
    if (!r.read(key, out, 0)) return;
    DS_CHECK(out > 0, DS_ERR_INVALID_CONFIG, "%s: must be > 0, got 0 (%s)", r.key_path(key).c_str(), why);
}

}  // namespace

void parse_fp16(const cJSON* v, const std::string& path, Fp16Config& out) {
    ObjectReader r(v, path, AutoRule::Default);
    r.read("enabled", out.enabled);
    r.read("auto_cast", out.auto_cast);
    r.read("loss_scale", out.loss_scale, 0.0);
    r.read("initial_scale_power", out.initial_scale_power, 0, 127);
    r.read("loss_scale_window", out.loss_scale_window);
    r.read("hysteresis", out.hysteresis);
    r.read("consecutive_hysteresis", out.consecutive_hysteresis);
    // An integer (reference §1.3) held as a double scale: bounded by 2^53 so
    // that it is exact as a double and writes back as the same integer.
    if (const cJSON* m = r.get("min_loss_scale"))
        out.min_loss_scale = static_cast<double>(
            as_int(m, r.key_path("min_loss_scale"), std::numeric_limits<int64_t>::min(), int64_t{1} << 53));
    r.read("fp16_master_weights_and_grads", out.fp16_master_weights_and_grads);
    r.finish();
    if (out.enabled && out.loss_scale == 0.0) {  // dynamic scaling
        DS_CHECK(out.loss_scale_window > 0, DS_ERR_INVALID_CONFIG,
                 "%s: must be > 0 with dynamic loss scaling, got %lld",
                 r.key_path("loss_scale_window").c_str(), static_cast<long long>(out.loss_scale_window));
        DS_CHECK(out.min_loss_scale > 0, DS_ERR_INVALID_CONFIG,
                 "%s: must be > 0 with dynamic loss scaling, got %lld",
                 r.key_path("min_loss_scale").c_str(), static_cast<long long>(out.min_loss_scale));
        DS_CHECK(out.hysteresis > 0, DS_ERR_INVALID_CONFIG,
                 "%s: must be > 0 with dynamic loss scaling, got %lld",
                 r.key_path("hysteresis").c_str(), static_cast<long long>(out.hysteresis));
    }
}

void parse_bf16(const cJSON* v, const std::string& path, Bf16Config& out) {
    ObjectReader r(v, path, AutoRule::Default);
    r.read("enabled", out.enabled);
    r.read("immediate_grad_update", out.immediate_grad_update);
    r.read("check_grad_overflow", out.check_grad_overflow);
    r.read("bf16_master_weights_and_grads", out.bf16_master_weights_and_grads);
    r.read("bf16_optimizer_states", out.bf16_optimizer_states);
    r.finish();
    DS_CHECK(!out.bf16_optimizer_states || out.bf16_master_weights_and_grads, DS_ERR_INVALID_CONFIG,
             "%s: requires %s.bf16_master_weights_and_grads true",
             r.key_path("bf16_optimizer_states").c_str(), path.c_str());
}

void parse_zero(const cJSON* v, const std::string& path, ZeroConfig& out) {
    if (cJSON_IsBool(v)) {  // deprecated form: true => stage 1
        out.stage = cJSON_IsTrue(v) ? 1 : 0;
        out.overlap_comm = false;
        return;
    }
    ObjectReader r(v, path, AutoRule::Default);
    r.read("stage", out.stage, 0, 3);
    r.read("contiguous_gradients", out.contiguous_gradients);
    r.read("reduce_scatter", out.reduce_scatter);
    read_bucket_size(r, "reduce_bucket_size", out.reduce_bucket_size,
                     "it sizes the gradient reduction bucket (DeepSpeed's stage-3 bucket buffer would be empty)");
    r.read("use_multi_rank_bucket_allreduce", out.use_multi_rank_bucket_allreduce);
    r.read("allgather_partitions", out.allgather_partitions);
    read_bucket_size(r, "allgather_bucket_size", out.allgather_bucket_size,
                     "ZeRO-1/2 divide the partition by it to shard the all-gather (a division by zero in DeepSpeed too)");
    std::optional<bool> overlap;
    r.read("overlap_comm", overlap);
    r.read("load_from_fp32_weights", out.load_from_fp32_weights);
    r.read("elastic_checkpoint", out.elastic_checkpoint);
    if (const cJSON* p = r.get("offload_param"))
        if (!cJSON_IsNull(p)) out.offload_param = parse_offload_param(p, r.key_path("offload_param"));
    if (const cJSON* p = r.get("offload_optimizer"))
        if (!cJSON_IsNull(p))
            out.offload_optimizer = parse_offload_optimizer(p, r.key_path("offload_optimizer"));
    map_deprecated_offload(r, "cpu_offload", "offload_optimizer", out.offload_optimizer);
    map_deprecated_offload(r, "cpu_offload_param", "offload_param", out.offload_param);
    // Deprecated with no replacement applied (DeepSpeed ignores its value).
    if (const cJSON* p = r.get("cpu_offload_use_pin_memory"))
        if (!cJSON_IsNull(p)) as_bool(p, r.key_path("cpu_offload_use_pin_memory"));
    r.read("sub_group_size", out.sub_group_size, 0);
    read_aliased(r, "prefetch_bucket_size", "stage3_prefetch_bucket_size", out.prefetch_bucket_size, 0);
    read_aliased(r, "param_persistence_threshold", "stage3_param_persistence_threshold",
                 out.param_persistence_threshold, 0);
    read_aliased(r, "model_persistence_threshold", "stage3_model_persistence_threshold",
                 out.model_persistence_threshold, 0);
    read_aliased(r, "max_live_parameters", "stage3_max_live_parameters", out.max_live_parameters, 0);
    read_aliased(r, "max_reuse_distance", "stage3_max_reuse_distance", out.max_reuse_distance, 0);
    read_aliased(r, "gather_16bit_weights_on_model_save", "stage3_gather_16bit_weights_on_model_save",
                 out.gather_16bit_weights_on_model_save);
    if (const cJSON* dep = r.get("stage3_gather_fp16_weights_on_model_save")) {
        const char* repl = r.get("stage3_gather_16bit_weights_on_model_save")
                               ? "stage3_gather_16bit_weights_on_model_save"
                               : "gather_16bit_weights_on_model_save";
        if (r.get(repl))
            fail(DS_ERR_INVALID_CONFIG, "%s: deprecated key given together with its replacement %s",
                 r.key_path("stage3_gather_fp16_weights_on_model_save").c_str(),
                 r.key_path(repl).c_str());
        out.gather_16bit_weights_on_model_save =
            as_bool(dep, r.key_path("stage3_gather_fp16_weights_on_model_save"));
    }
    read_aliased(r, "module_granularity_threshold", "stage3_module_granularity_threshold",
                 out.module_granularity_threshold, 0);
    read_aliased(r, "use_all_reduce_for_fetch_params", "stage3_use_all_reduce_for_fetch_params",
                 out.use_all_reduce_for_fetch_params);
    read_aliased(r, "allgather_sequential", "stage3_allgather_sequential", out.allgather_sequential);
    r.read("ignore_unused_parameters", out.ignore_unused_parameters);
    bool legacy_stage1 = false;
    r.read("legacy_stage1", legacy_stage1);
    DS_CHECK(!legacy_stage1, DS_ERR_INVALID_CONFIG,
             "%s: true is not accepted (the legacy ZeRO stage 1 implementation was removed from DeepSpeed)",
             r.key_path("legacy_stage1").c_str());
    r.read("round_robin_gradients", out.round_robin_gradients);
    r.read("zero_hpz_partition_size", out.zero_hpz_partition_size, 1);
    r.read("zero_quantized_weights", out.zero_quantized_weights);
    r.read("zero_quantized_nontrainable_weights", out.zero_quantized_nontrainable_weights);
    r.read("zero_quantized_gradients", out.zero_quantized_gradients);
    if (const cJSON* l = r.get("zeropp_loco_param")) {
        if (!cJSON_IsNull(l)) {
            ObjectReader lr(l, r.key_path("zeropp_loco_param"), AutoRule::Default);
            ZeroConfig::LocoParams loco;
            lr.read("err_beta", loco.err_beta, 0.0, 1.0);
            lr.read("reset_T", loco.reset_T, 1);
            lr.finish();
            out.zeropp_loco_param = loco;
        }
    }
    r.read("mics_shard_size", out.mics_shard_size, -1);
    r.read("mics_hierarchical_params_gather", out.mics_hierarchical_params_gather);
    r.read("memory_efficient_linear", out.memory_efficient_linear);
    r.read("pipeline_loading_checkpoint", out.pipeline_loading_checkpoint);
    r.read("override_module_apply", out.override_module_apply);
    r.read("log_trace_cache_warnings", out.log_trace_cache_warnings);
    r.read("enable_sanity_checks", out.enable_sanity_checks);
    r.read("save_muon_momentum_buffer_in_memory", out.save_muon_momentum_buffer_in_memory);
    if (const cJSON* l = r.get("leaf_module")) {
        const bool empty = cJSON_IsNull(l) || (cJSON_IsObject(l) && l->child == nullptr);
        DS_CHECK(empty, DS_ERR_UNSUPPORTED,
                 "%s: ZeRO-3 leaf modules are outside this library's scope (only {} is accepted)",
                 r.key_path("leaf_module").c_str());
    }
    if (const cJSON* z = r.get("zenflow"))
        DS_CHECK(cJSON_IsNull(z), DS_ERR_UNSUPPORTED,
                 "%s: ZenFlow is outside this library's scope (only null is accepted)",
                 r.key_path("zenflow").c_str());
    r.finish();

    DS_CHECK(out.allgather_bucket_size % 2 == 0, DS_ERR_INVALID_CONFIG,
             "%s: must be a multiple of 2, got %lld", r.key_path("allgather_bucket_size").c_str(),
             static_cast<long long>(out.allgather_bucket_size));
    out.overlap_comm = overlap.value_or(out.stage == 3);
    if (out.offload_optimizer && out.offload_optimizer->ratio < 1.0)
        DS_CHECK(out.stage == 3, DS_ERR_INVALID_CONFIG,
                 "%s.offload_optimizer.ratio: partial offload (ratio < 1) requires ZeRO stage 3, got stage %lld",
                 path.c_str(), static_cast<long long>(out.stage));
}

}  // namespace ds::config::detail
