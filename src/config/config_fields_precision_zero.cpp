// Field declarations of fp16, bf16 and zero_optimization (with
// offload_param / offload_optimizer / zeropp_loco_param): DeepSpeed's
// pydantic sections, so "auto" means "keep the default" (DEEPSPEED_SEMANTICS.md §1.3,
// §1.4). zero_optimization also takes the stage3_* aliases and deprecated
// keys, declared here as aliased and custom fields.
#include <cmath>
#include <cstring>

#include "config/field_visitor.h"
#include "config/parse_internal.h"
#include "core/error.h"

namespace ds::config::detail {

AutoRule auto_rule(const Fp16Config&) { return AutoRule::Default; }
AutoRule auto_rule(const Bf16Config&) { return AutoRule::Default; }
AutoRule auto_rule(const OffloadParamConfig&) { return AutoRule::Default; }
AutoRule auto_rule(const OffloadOptimizerConfig&) { return AutoRule::Default; }
AutoRule auto_rule(const ZeroConfig::LocoParams&) { return AutoRule::Default; }
AutoRule auto_rule(const ZeroConfig&) { return AutoRule::Default; }

void visit(FieldVisitor& v, Fp16Config& s) {
    v.flag("enabled", s.enabled);
    v.flag("auto_cast", s.auto_cast);
    v.real("loss_scale", s.loss_scale, 0.0);
    v.integer("initial_scale_power", s.initial_scale_power, 0, 127);
    v.integer("loss_scale_window", s.loss_scale_window);
    v.integer("hysteresis", s.hysteresis);
    v.flag("consecutive_hysteresis", s.consecutive_hysteresis);
    // An integer (DEEPSPEED_SEMANTICS.md §1.3) held as a double scale: bounded by 2^53 so
    // that it is exact as a double and writes back as the same integer.
    v.integral_real("min_loss_scale", s.min_loss_scale, kMinI, int64_t{1} << 53);
    v.flag("fp16_master_weights_and_grads", s.fp16_master_weights_and_grads);
}

void validate(const ObjectReader& r, Fp16Config& s) {
    if (s.enabled && s.loss_scale == 0.0) {  // dynamic scaling
        DS_CHECK(s.loss_scale_window > 0, DS_ERR_INVALID_CONFIG,
                 "%s: must be > 0 with dynamic loss scaling, got %lld",
                 r.key_path("loss_scale_window").c_str(), static_cast<long long>(s.loss_scale_window));
        DS_CHECK(s.min_loss_scale > 0, DS_ERR_INVALID_CONFIG,
                 "%s: must be > 0 with dynamic loss scaling, got %lld",
                 r.key_path("min_loss_scale").c_str(), static_cast<long long>(s.min_loss_scale));
        DS_CHECK(s.hysteresis > 0, DS_ERR_INVALID_CONFIG,
                 "%s: must be > 0 with dynamic loss scaling, got %lld",
                 r.key_path("hysteresis").c_str(), static_cast<long long>(s.hysteresis));
    }
}

void visit(FieldVisitor& v, Bf16Config& s) {
    v.flag("enabled", s.enabled);
    v.flag("immediate_grad_update", s.immediate_grad_update);
    v.flag("check_grad_overflow", s.check_grad_overflow);
    v.flag("bf16_master_weights_and_grads", s.bf16_master_weights_and_grads);
    v.flag("bf16_optimizer_states", s.bf16_optimizer_states);
}

void validate(const ObjectReader& r, Bf16Config& s) {
    DS_CHECK(!s.bf16_optimizer_states || s.bf16_master_weights_and_grads, DS_ERR_INVALID_CONFIG,
             "%s: requires %s.bf16_master_weights_and_grads true",
             r.key_path("bf16_optimizer_states").c_str(), r.path().c_str());
}

// ---- offload sections -----------------------------------------------------

namespace {

void offload_device(FieldVisitor& v, std::string& device, std::optional<std::string>& nvme_path) {
    if (v.text("device", device) && device != "none" && device != "cpu" && device != "nvme")
        fail(DS_ERR_INVALID_CONFIG, "%s: must be \"none\", \"cpu\" or \"nvme\", got \"%s\"",
             v.key_path("device").c_str(), device.c_str());
    v.opt_text("nvme_path", nvme_path);
}

void check_nvme_path(const ObjectReader& r, const std::string& device,
                     const std::optional<std::string>& nvme_path) {
    if (device == "nvme" && (!nvme_path || nvme_path->empty()))
        fail(DS_ERR_INVALID_CONFIG, "%s: device \"nvme\" requires nvme_path",
             r.key_path("nvme_path").c_str());
}

}  // namespace

void visit(FieldVisitor& v, OffloadParamConfig& s) {
    offload_device(v, s.device, s.nvme_path);
    v.integer("buffer_count", s.buffer_count, 0);
    v.integer("buffer_size", s.buffer_size, 0);
    v.integer("max_in_cpu", s.max_in_cpu, 0);
    v.flag("pin_memory", s.pin_memory);
}
void validate(const ObjectReader& r, OffloadParamConfig& s) { check_nvme_path(r, s.device, s.nvme_path); }

void visit(FieldVisitor& v, OffloadOptimizerConfig& s) {
    offload_device(v, s.device, s.nvme_path);
    v.integer("buffer_count", s.buffer_count, 0);
    v.flag("pin_memory", s.pin_memory);
    v.flag("pipeline_read", s.pipeline_read);
    v.flag("pipeline_write", s.pipeline_write);
    v.flag("dsc_atomic_step", s.dsc_atomic_step);  // deepspeed_c extension (CONFIG.md)
    v.flag("fast_init", s.fast_init);
    v.real("ratio", s.ratio, 0.0, 1.0);
    v.flag("super_offload", s.super_offload);
    v.real("cpuadam_cores_perc", s.cpuadam_cores_perc, 0.0, 1.0);
}
void validate(const ObjectReader& r, OffloadOptimizerConfig& s) { check_nvme_path(r, s.device, s.nvme_path); }

void visit(FieldVisitor& v, ZeroConfig::LocoParams& s) {
    v.real("err_beta", s.err_beta, 0.0, 1.0);
    v.integer("reset_T", s.reset_T, 1);
}

// ---- zero_optimization ----------------------------------------------------

namespace {

// A size that later divides or sizes a buffer: 0 is refused here rather than
// failing at the first step on several ranks.
void bucket_size(FieldVisitor& v, const char* key, int64_t& out, const char* why) {
    if (v.integer(key, out, 0))
        DS_CHECK(out > 0, DS_ERR_INVALID_CONFIG, "%s: must be > 0, got 0 (%s)", v.key_path(key).c_str(), why);
}

// A deprecated boolean (cpu_offload, cpu_offload_param) that maps onto an
// offload section: true => device cpu, false/null => no offload. Read only.
template <class Offload>
CustomField deprecated_offload(const char* dep, const char* repl, std::optional<Offload>* out) {
    CustomField f;
    f.read = [dep, repl, out](ObjectReader& r) {
        const cJSON* v = r.get(dep);
        if (!v) return;
        if (r.get(repl))
            fail(DS_ERR_INVALID_CONFIG, "%s: deprecated key given together with its replacement %s",
                 r.key_path(dep).c_str(), r.key_path(repl).c_str());
        if (cJSON_IsNull(v)) return;
        if (as_bool(v, r.key_path(dep))) {
            out->emplace();
            (*out)->device = "cpu";
        }
    };
    f.type = "deprecated bool: true => device \"cpu\"";
    return f;
}

}  // namespace

void visit(FieldVisitor& v, ZeroConfig& z) {
    v.integer("stage", z.stage, 0, 3);
    v.flag("contiguous_gradients", z.contiguous_gradients);
    v.flag("reduce_scatter", z.reduce_scatter);
    bucket_size(v, "reduce_bucket_size", z.reduce_bucket_size,
                "it sizes the gradient reduction bucket (DeepSpeed's stage-3 bucket buffer would be empty)");
    v.flag("use_multi_rank_bucket_allreduce", z.use_multi_rank_bucket_allreduce);
    v.flag("allgather_partitions", z.allgather_partitions);
    bucket_size(v, "allgather_bucket_size", z.allgather_bucket_size,
                "ZeRO-1/2 divide the partition by it to shard the all-gather (a division by zero in DeepSpeed too)");
    // Resolved: true only for stage 3 unless given.
    bool reading = false;
    std::optional<bool> overlap;
    v.custom("overlap_comm", {[&](ObjectReader& r) {
                                  reading = true;
                                  r.read("overlap_comm", overlap);
                              },
                              [&](JsonWriter& w, const char* key) { w.value(key, z.overlap_comm); },
                              "bool (default: true at stage 3, else false)", "false",
                              [&] { return std::string(z.overlap_comm ? "true" : "false"); }});
    v.flag("load_from_fp32_weights", z.load_from_fp32_weights);
    v.flag("elastic_checkpoint", z.elastic_checkpoint);
    OptionalSectionOf<OffloadParamConfig> offload_param(z.offload_param);
    OptionalSectionOf<OffloadOptimizerConfig> offload_optimizer(z.offload_optimizer);
    v.section("offload_param", offload_param);
    v.section("offload_optimizer", offload_optimizer);
    v.custom("cpu_offload", deprecated_offload("cpu_offload", "offload_optimizer", &z.offload_optimizer));
    v.custom("cpu_offload_param", deprecated_offload("cpu_offload_param", "offload_param", &z.offload_param));
    // Deprecated with no replacement applied (DeepSpeed ignores its value).
    v.custom("cpu_offload_use_pin_memory",
             {[](ObjectReader& r) {
                  if (const cJSON* p = r.get("cpu_offload_use_pin_memory"))
                      if (!cJSON_IsNull(p)) as_bool(p, r.key_path("cpu_offload_use_pin_memory"));
              },
              nullptr, "deprecated bool (its value is not read)", "", nullptr});
    v.integer("sub_group_size", z.sub_group_size, 0);
    v.aliased_integer("prefetch_bucket_size", "stage3_prefetch_bucket_size", z.prefetch_bucket_size, 0);
    v.aliased_integer("param_persistence_threshold", "stage3_param_persistence_threshold",
                      z.param_persistence_threshold, 0);
    v.aliased_integer("model_persistence_threshold", "stage3_model_persistence_threshold",
                      z.model_persistence_threshold, 0);
    v.aliased_integer("max_live_parameters", "stage3_max_live_parameters", z.max_live_parameters, 0);
    v.aliased_integer("max_reuse_distance", "stage3_max_reuse_distance", z.max_reuse_distance, 0);
    v.aliased_flag("gather_16bit_weights_on_model_save", "stage3_gather_16bit_weights_on_model_save",
                   z.gather_16bit_weights_on_model_save);
    v.custom("stage3_gather_fp16_weights_on_model_save",
             {[&z](ObjectReader& r) {
                  const char* dep_key = "stage3_gather_fp16_weights_on_model_save";
                  const cJSON* dep = r.get(dep_key);
                  if (!dep) return;
                  const char* repl = r.get("stage3_gather_16bit_weights_on_model_save")
                                         ? "stage3_gather_16bit_weights_on_model_save"
                                         : "gather_16bit_weights_on_model_save";
                  if (r.get(repl))
                      fail(DS_ERR_INVALID_CONFIG, "%s: deprecated key given together with its replacement %s",
                           r.key_path(dep_key).c_str(), r.key_path(repl).c_str());
                  z.gather_16bit_weights_on_model_save = as_bool(dep, r.key_path(dep_key));
              },
              nullptr, "deprecated bool: gather_16bit_weights_on_model_save", "", nullptr});
    v.aliased_integer("module_granularity_threshold", "stage3_module_granularity_threshold",
                      z.module_granularity_threshold, 0);
    v.aliased_flag("use_all_reduce_for_fetch_params", "stage3_use_all_reduce_for_fetch_params",
                   z.use_all_reduce_for_fetch_params);
    v.aliased_flag("allgather_sequential", "stage3_allgather_sequential", z.allgather_sequential);
    v.flag("ignore_unused_parameters", z.ignore_unused_parameters);
    v.custom("legacy_stage1",
             {[](ObjectReader& r) {
                  bool legacy_stage1 = false;
                  r.read("legacy_stage1", legacy_stage1);
                  DS_CHECK(!legacy_stage1, DS_ERR_INVALID_CONFIG,
                           "%s: true is not accepted (the legacy ZeRO stage 1 implementation was removed from "
                           "DeepSpeed)",
                           r.key_path("legacy_stage1").c_str());
              },
              [](JsonWriter& w, const char* key) { w.value(key, false); }, "false only", "false", nullptr});
    v.flag("round_robin_gradients", z.round_robin_gradients);
    v.integer("zero_hpz_partition_size", z.zero_hpz_partition_size, 1);
    v.flag("zero_quantized_weights", z.zero_quantized_weights);
    v.flag("zero_quantized_nontrainable_weights", z.zero_quantized_nontrainable_weights);
    v.flag("zero_quantized_gradients", z.zero_quantized_gradients);
    OptionalSectionOf<ZeroConfig::LocoParams> loco(z.zeropp_loco_param);
    v.section("zeropp_loco_param", loco);
    v.integer("mics_shard_size", z.mics_shard_size, -1);
    v.flag("mics_hierarchical_params_gather", z.mics_hierarchical_params_gather);
    v.flag("memory_efficient_linear", z.memory_efficient_linear);
    v.flag("pipeline_loading_checkpoint", z.pipeline_loading_checkpoint);
    v.flag("override_module_apply", z.override_module_apply);
    v.flag("log_trace_cache_warnings", z.log_trace_cache_warnings);
    v.flag("enable_sanity_checks", z.enable_sanity_checks);
    v.flag("save_muon_momentum_buffer_in_memory", z.save_muon_momentum_buffer_in_memory);
    v.custom("leaf_module",
             {[](ObjectReader& r) {
                  if (const cJSON* l = r.get("leaf_module")) {
                      const bool empty = cJSON_IsNull(l) || (cJSON_IsObject(l) && l->child == nullptr);
                      DS_CHECK(empty, DS_ERR_UNSUPPORTED,
                               "%s: ZeRO-3 leaf modules are outside this library's scope (only {} is accepted)",
                               r.key_path("leaf_module").c_str());
                  }
              },
              [](JsonWriter& w, const char* key) {
                  w.begin_object(key);
                  w.end_object();
              },
              "{} only", "{}", nullptr});
    v.custom("zenflow",
             {[](ObjectReader& r) {
                  if (const cJSON* zf = r.get("zenflow"))
                      DS_CHECK(cJSON_IsNull(zf), DS_ERR_UNSUPPORTED,
                               "%s: ZenFlow is outside this library's scope (only null is accepted)",
                               r.key_path("zenflow").c_str());
              },
              [](JsonWriter& w, const char* key) { w.null(key); }, "null only", "null", nullptr});
    if (reading) z.overlap_comm = overlap.value_or(z.stage == 3);
}

void validate(const ObjectReader& r, ZeroConfig& z) {
    DS_CHECK(z.allgather_bucket_size % 2 == 0, DS_ERR_INVALID_CONFIG, "%s: must be a multiple of 2, got %lld",
             r.key_path("allgather_bucket_size").c_str(), static_cast<long long>(z.allgather_bucket_size));
    if (z.offload_optimizer && z.offload_optimizer->ratio < 1.0)
        DS_CHECK(z.stage == 3, DS_ERR_INVALID_CONFIG,
                 "%s.offload_optimizer.ratio: partial offload (ratio < 1) requires ZeRO stage 3, got stage %lld",
                 r.path().c_str(), static_cast<long long>(z.stage));
}

void read_value(const cJSON* v, const std::string& path, ZeroConfig& out) {
    if (cJSON_IsBool(v)) {  // deprecated form: true => stage 1
        out.stage = cJSON_IsTrue(v) ? 1 : 0;
        out.overlap_comm = false;
        return;
    }
    read_section(v, path, out);
}

}  // namespace ds::config::detail
