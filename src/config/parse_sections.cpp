// Sections the engine does not drive yet, parsed strictly into
// config_sections.h: data_types, activation_checkpointing (§13),
// flops_profiler (§11), monitors and comms_logger (§12), timers,
// checkpoint (§1.5), aio, pipeline, torch_autocast. Monitors, comms_logger
// and timers.throughput are pydantic in DeepSpeed ("auto" = default); the
// others are plain dicts ("auto" rejected).
#include <cctype>
#include <cstring>

#include "config/parse_internal.h"
#include "core/error.h"

namespace ds::config::detail {

namespace {

std::string upper(std::string s) {
    for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return s;
}

std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// Case-insensitive choice among upper-case names; returns the upper-case form.
std::string read_upper_choice(const cJSON* v, const std::string& path,
                              const std::vector<std::string>& choices) {
    const std::string got = upper(as_string(v, path));
    for (const auto& c : choices)
        if (c == got) return got;
    std::string list;
    for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
    fail(DS_ERR_INVALID_CONFIG, "%s: must be one of %s (any case), got \"%s\"", path.c_str(),
         list.c_str(), v->valuestring);
}

std::optional<DType> read_optional_dtype(ObjectReader& r, const char* key) {
    const cJSON* v = r.get(key);
    if (!v || cJSON_IsNull(v)) return std::nullopt;
    return parse_dtype_alias(v, r.key_path(key));
}

}  // namespace

DType parse_dtype_alias(const cJSON* v, const std::string& path) {
    struct Alias {
        const char* name;
        DType dtype;
    };
    static const Alias aliases[] = {
        {"fp32", DType::F32},  {"float32", DType::F32},  {"torch.float32", DType::F32},
        {"float", DType::F32}, {"fp16", DType::F16},     {"float16", DType::F16},
        {"torch.float16", DType::F16}, {"half", DType::F16}, {"bf16", DType::BF16},
        {"bfloat16", DType::BF16}, {"torch.bfloat16", DType::BF16}, {"bfloat", DType::BF16}};
    const std::string s = as_string(v, path);
    for (const Alias& a : aliases)
        if (s == a.name) return a.dtype;
    if (s == "int8" || s == "int" || s == "torch.int8")
        fail(DS_ERR_INVALID_CONFIG, "%s: \"%s\" is not a floating-point dtype (use fp32, fp16 or bf16)",
             path.c_str(), s.c_str());
    std::vector<std::string> names;
    for (const Alias& a : aliases) names.emplace_back(a.name);
    const std::string best = closest_match(s, names);
    fail(DS_ERR_INVALID_CONFIG, "%s: unknown dtype \"%s\"%s%s%s", path.c_str(), s.c_str(),
         best.empty() ? " (use fp32, fp16 or bf16)" : "; did you mean \"",
         best.empty() ? "" : best.c_str(), best.empty() ? "" : "\"?");
}

DType parse_comm_dtype(const cJSON* v, const std::string& path) {
    const std::string s = lower(as_string(v, path));
    if (s == "fp32") return DType::F32;
    if (s == "fp16") return DType::F16;
    if (s == "bf16") return DType::BF16;
    fail(DS_ERR_INVALID_CONFIG, "%s: must be \"fp32\", \"fp16\" or \"bf16\", got \"%s\"", path.c_str(),
         v->valuestring);
}

std::string compact_json(const cJSON* v) {
    char* p = cJSON_PrintUnformatted(v);
    DS_CHECK(p != nullptr, DS_ERR_OUT_OF_MEMORY, "config: out of memory printing JSON");
    std::string s(p);
    cJSON_free(p);
    return s;
}

void parse_data_types(const cJSON* v, const std::string& path, DataTypesConfig& out) {
    ObjectReader r(v, path, AutoRule::Reject);
    out.grad_accum_dtype = read_optional_dtype(r, "grad_accum_dtype");
    out.param_dtype = read_optional_dtype(r, "param_dtype");
    out.buffer_dtype = read_optional_dtype(r, "buffer_dtype");
    r.finish();
}

void parse_activation_checkpointing(const cJSON* v, const std::string& path,
                                    ActivationCheckpointingConfig& out) {
    ObjectReader r(v, path, AutoRule::Reject);
    r.read("partition_activations", out.partition_activations);
    r.read("cpu_checkpointing", out.cpu_checkpointing);
    r.read("contiguous_memory_optimization", out.contiguous_memory_optimization);
    r.read("number_checkpoints", out.number_checkpoints, 1);
    r.read("synchronize_checkpoint_boundary", out.synchronize_checkpoint_boundary);
    r.read("profile", out.profile);
    r.finish();
    if (out.contiguous_memory_optimization)
        DS_CHECK(out.partition_activations && out.number_checkpoints, DS_ERR_INVALID_CONFIG,
                 "%s: requires partition_activations true and number_checkpoints",
                 r.key_path("contiguous_memory_optimization").c_str());
}

void parse_flops_profiler(const cJSON* v, const std::string& path, FlopsProfilerConfig& out) {
    ObjectReader r(v, path, AutoRule::Reject);
    r.read("enabled", out.enabled);
    r.read("recompute_fwd_factor", out.recompute_fwd_factor, 0.0);
    r.read("profile_step", out.profile_step, 0);
    r.read("module_depth", out.module_depth, -1);
    r.read("top_modules", out.top_modules, 0);
    r.read("detailed", out.detailed);
    r.read("output_file", out.output_file);
    r.finish();
}

void parse_file_monitor(const cJSON* v, const std::string& path, FileMonitorConfig& out) {
    ObjectReader r(v, path, AutoRule::Default);
    r.read("enabled", out.enabled);
    r.read("output_path", out.output_path);
    r.read("job_name", out.job_name);
    r.finish();
}

void parse_wandb(const cJSON* v, const std::string& path, WandbConfig& out) {
    ObjectReader r(v, path, AutoRule::Default);
    r.read("enabled", out.enabled);
    r.read("group", out.group);
    r.read("team", out.team);
    r.read("project", out.project);
    r.finish();
}

void parse_comet(const cJSON* v, const std::string& path, CometConfig& out) {
    ObjectReader r(v, path, AutoRule::Default);
    r.read("enabled", out.enabled);
    r.read("samples_log_interval", out.samples_log_interval, 1);
    r.read("project", out.project);
    r.read("workspace", out.workspace);
    r.read("api_key", out.api_key);
    r.read("experiment_name", out.experiment_name);
    r.read("experiment_key", out.experiment_key);
    r.read("online", out.online);
    r.read("mode", out.mode);
    r.finish();
}

void parse_comms_logger(const cJSON* v, const std::string& path, CommsLoggerConfig& out) {
    ObjectReader r(v, path, AutoRule::Default);
    r.read("enabled", out.enabled);
    r.read("verbose", out.verbose);
    r.read("prof_all", out.prof_all);
    if (const cJSON* ops = r.get("prof_ops")) out.prof_ops = as_string_list(ops, r.key_path("prof_ops"));
    r.read("debug", out.debug);
    r.finish();
}

void parse_timers(const cJSON* v, const std::string& path, TimersConfig& out) {
    ObjectReader r(v, path, AutoRule::Reject);
    const cJSON* t = r.get("throughput");
    r.finish();
    if (!t) return;
    ObjectReader tr(t, r.key_path("throughput"), AutoRule::Default);
    tr.read("enabled", out.throughput_enabled);
    tr.read("synchronized", out.throughput_synchronized);
    tr.finish();
}

void parse_checkpoint(const cJSON* v, const std::string& path, CheckpointConfig& out) {
    ObjectReader r(v, path, AutoRule::Reject);
    if (const cJSON* t = r.get("tag_validation"))
        out.tag_validation = read_upper_choice(t, r.key_path("tag_validation"), {"IGNORE", "WARN", "FAIL"});
    r.read("load_universal", out.load_universal);
    r.read("use_node_local_storage", out.use_node_local_storage);
    if (const cJSON* pw = r.get("parallel_write")) {
        ObjectReader pr(pw, r.key_path("parallel_write"), AutoRule::Reject);
        pr.read("pipeline_stage", out.parallel_write_pipeline_stage);
        pr.finish();
    }
    r.read("checkpoint_serialization", out.checkpoint_serialization);
    if (const cJSON* w = r.get("writer")) {
        if (!cJSON_IsNull(w)) {
            CheckpointWriterConfig c;
            ObjectReader wr(w, r.key_path("writer"), AutoRule::Reject);
            if (const cJSON* t = wr.get("type"))
                c.type = read_upper_choice(t, wr.key_path("type"), {"MOCK", "PYTHON", "FAST"});
            wr.read("decoupled", c.decoupled);
            wr.read("io_buffer_size", c.io_buffer_size, 1);
            wr.read("io_buffer_double", c.io_buffer_double);
            wr.read("show_statistics", c.show_statistics);
            if (const cJSON* d = wr.get("data_parallel")) {
                if (!cJSON_IsNull(d))
                    c.data_parallel = read_upper_choice(d, wr.key_path("data_parallel"),
                                                        {"REPLICA", "SOCKET", "MACHINE"});
            }
            wr.read("io_multiplier", c.io_multiplier, 1);
            wr.finish();
            out.writer = c;
        }
    }
    r.finish();
}

void parse_aio(const cJSON* v, const std::string& path, AioConfig& out) {
    ObjectReader r(v, path, AutoRule::Reject);
    r.read("block_size", out.block_size, 1);
    r.read("queue_depth", out.queue_depth, 1);
    r.read("intra_op_parallelism", out.intra_op_parallelism, 1);
    r.read("single_submit", out.single_submit);
    r.read("overlap_events", out.overlap_events);
    r.read("use_gds", out.use_gds);
    r.finish();
}

void parse_pipeline(const cJSON* v, const std::string& path, PipelineConfig& out) {
    ObjectReader r(v, path, AutoRule::Reject);
    if (const cJSON* s = r.get_raw("stages")) {  // "auto" is a real value here
        if (is_auto(s))
            out.stages.reset();
        else
            out.stages = as_int(s, r.key_path("stages"), 1);
    }
    if (r.read("partition", out.partition)) {
        const std::string& p = out.partition;
        const bool ok = p == "best" || p == "uniform" || p == "parameters" ||
                        (p.compare(0, 5, "type:") == 0 && p.size() > 5);
        DS_CHECK(ok, DS_ERR_INVALID_CONFIG,
                 "%s: must be \"best\", \"uniform\", \"parameters\" or \"type:<regex>\", got \"%s\"",
                 r.key_path("partition").c_str(), p.c_str());
    }
    r.read("seed_layers", out.seed_layers);
    r.read("activation_checkpoint_interval", out.activation_checkpoint_interval, 0);
    r.read("pipe_partitioned", out.pipe_partitioned);
    r.read("grad_partitioned", out.grad_partitioned);
    r.finish();
}

void parse_torch_autocast(const cJSON* v, const std::string& path, TorchAutocastConfig& out) {
    ObjectReader r(v, path, AutoRule::Reject);
    r.read("enabled", out.enabled);
    out.dtype = read_optional_dtype(r, "dtype");
    if (const cJSON* m = r.get("lower_precision_safe_modules")) {
        if (cJSON_IsNull(m))
            out.lower_precision_safe_modules.reset();
        else
            out.lower_precision_safe_modules = as_string_list(m, r.key_path("lower_precision_safe_modules"));
    }
    r.finish();
}

}  // namespace ds::config::detail
