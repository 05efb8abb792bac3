// Field declarations of the sections the engine does not drive yet:
// data_types, activation_checkpointing (§13), flops_profiler (§11), the
// monitors and comms_logger (§12), timers, checkpoint (§1.5), aio, pipeline,
// torch_autocast; and of amp, elasticity, progressive_layer_drop and
// eigenvalue, accepted only in their disabled default form. Monitors,
// comms_logger and timers.throughput are pydantic in DeepSpeed ("auto" =
// default); the others are plain dicts ("auto" rejected).
#include <cstring>

#include "config/field_visitor.h"
#include "config/parse_internal.h"
#include "core/error.h"

namespace ds::config::detail {

void visit(FieldVisitor& v, DataTypesConfig& s) {
    v.opt_dtype("grad_accum_dtype", s.grad_accum_dtype, DTypeNames::Alias);
    v.opt_dtype("param_dtype", s.param_dtype, DTypeNames::Alias);
    v.opt_dtype("buffer_dtype", s.buffer_dtype, DTypeNames::Alias);
}

void visit(FieldVisitor& v, ActivationCheckpointingConfig& s) {
    v.flag("partition_activations", s.partition_activations);
    v.flag("cpu_checkpointing", s.cpu_checkpointing);
    v.flag("contiguous_memory_optimization", s.contiguous_memory_optimization);
    v.opt_integer("number_checkpoints", s.number_checkpoints, 1);
    v.flag("synchronize_checkpoint_boundary", s.synchronize_checkpoint_boundary);
    v.flag("profile", s.profile);
}

void validate(const ObjectReader& r, ActivationCheckpointingConfig& s) {
    if (s.contiguous_memory_optimization)
        DS_CHECK(s.partition_activations && s.number_checkpoints, DS_ERR_INVALID_CONFIG,
                 "%s: requires partition_activations true and number_checkpoints",
                 r.key_path("contiguous_memory_optimization").c_str());
}

void visit(FieldVisitor& v, FlopsProfilerConfig& s) {
    v.flag("enabled", s.enabled);
    v.real("recompute_fwd_factor", s.recompute_fwd_factor, 0.0);
    v.integer("profile_step", s.profile_step, 0);
    v.integer("module_depth", s.module_depth, -1);
    v.integer("top_modules", s.top_modules, 0);
    v.flag("detailed", s.detailed);
    v.opt_text("output_file", s.output_file);
}

AutoRule auto_rule(const FileMonitorConfig&) { return AutoRule::Default; }
void visit(FieldVisitor& v, FileMonitorConfig& s) {
    v.flag("enabled", s.enabled);
    v.text("output_path", s.output_path);
    v.text("job_name", s.job_name);
}

AutoRule auto_rule(const WandbConfig&) { return AutoRule::Default; }
void visit(FieldVisitor& v, WandbConfig& s) {
    v.flag("enabled", s.enabled);
    v.opt_text("group", s.group);
    v.opt_text("team", s.team);
    v.text("project", s.project);
}

AutoRule auto_rule(const CometConfig&) { return AutoRule::Default; }
void visit(FieldVisitor& v, CometConfig& s) {
    v.flag("enabled", s.enabled);
    v.integer("samples_log_interval", s.samples_log_interval, 1);
    v.opt_text("project", s.project);
    v.opt_text("workspace", s.workspace);
    v.opt_text("api_key", s.api_key);
    v.opt_text("experiment_name", s.experiment_name);
    v.opt_text("experiment_key", s.experiment_key);
    v.opt_flag("online", s.online);
    v.opt_text("mode", s.mode);
}

AutoRule auto_rule(const CommsLoggerConfig&) { return AutoRule::Default; }
void visit(FieldVisitor& v, CommsLoggerConfig& s) {
    v.flag("enabled", s.enabled);
    v.flag("verbose", s.verbose);
    v.flag("prof_all", s.prof_all);
    v.strings("prof_ops", s.prof_ops);
    v.flag("debug", s.debug);
}

void visit(FieldVisitor& v, TimersConfig& s) {
    v.object("throughput", AutoRule::Default, [&](FieldVisitor& t) {
        t.flag("enabled", s.throughput_enabled);
        t.flag("synchronized", s.throughput_synchronized);
    });
}

void visit(FieldVisitor& v, CheckpointWriterConfig& s) {
    v.upper_choice("type", s.type, {"MOCK", "PYTHON", "FAST"});
    v.flag("decoupled", s.decoupled);
    v.integer("io_buffer_size", s.io_buffer_size, 1);
    v.flag("io_buffer_double", s.io_buffer_double);
    v.flag("show_statistics", s.show_statistics);
    v.opt_upper_choice("data_parallel", s.data_parallel, {"REPLICA", "SOCKET", "MACHINE"});
    v.integer("io_multiplier", s.io_multiplier, 1);
}

void visit(FieldVisitor& v, CheckpointConfig& s) {
    v.upper_choice("tag_validation", s.tag_validation, {"IGNORE", "WARN", "FAIL"});
    v.flag("load_universal", s.load_universal);
    v.flag("use_node_local_storage", s.use_node_local_storage);
    v.object("parallel_write", AutoRule::Reject,
             [&](FieldVisitor& p) { p.flag("pipeline_stage", s.parallel_write_pipeline_stage); });
    v.flag("checkpoint_serialization", s.checkpoint_serialization);
    OptionalSectionOf<CheckpointWriterConfig> writer(s.writer);
    v.section("writer", writer);
}

void visit(FieldVisitor& v, AioConfig& s) {
    v.integer("block_size", s.block_size, 1);
    v.integer("queue_depth", s.queue_depth, 1);
    // thread_count: DeepSpeed's older name of intra_op_parallelism (either, not both).
    v.aliased_integer("intra_op_parallelism", "thread_count", s.intra_op_parallelism, 1);
    v.flag("single_submit", s.single_submit);
    v.flag("overlap_events", s.overlap_events);
    v.flag("use_gds", s.use_gds);
}

void visit(FieldVisitor& v, PipelineConfig& s) {
    v.auto_integer("stages", s.stages, 1);
    if (v.text("partition", s.partition)) {
        const std::string& p = s.partition;
        const bool ok = p == "best" || p == "uniform" || p == "parameters" ||
                        (p.compare(0, 5, "type:") == 0 && p.size() > 5);
        DS_CHECK(ok, DS_ERR_INVALID_CONFIG,
                 "%s: must be \"best\", \"uniform\", \"parameters\" or \"type:<regex>\", got \"%s\"",
                 v.key_path("partition").c_str(), p.c_str());
    }
    v.flag("seed_layers", s.seed_layers);
    v.integer("activation_checkpoint_interval", s.activation_checkpoint_interval, 0);
    v.flag("pipe_partitioned", s.pipe_partitioned);
    v.flag("grad_partitioned", s.grad_partitioned);
}

void visit(FieldVisitor& v, TensorParallelConfig& s) {
    v.integer("autotp_size", s.autotp_size, 0, 65536);
    v.opt_text("preset_model", s.preset_model);
    v.flag("tp_overlap_comm", s.tp_overlap_comm);
}

void visit(FieldVisitor& v, TorchAutocastConfig& s) {
    v.flag("enabled", s.enabled);
    v.opt_dtype("dtype", s.dtype, DTypeNames::Alias);
    v.opt_strings("lower_precision_safe_modules", s.lower_precision_safe_modules);
}

// ---- sections accepted only in their disabled default form ---------------

namespace {

// The first key of a section given with a value other than its default is
// reported after all keys were type-checked (unknown keys take precedence).
template <class S>
void check_disabled(const ObjectReader& r, S& s, const char* what) {
    if (s.enabled)
        fail(DS_ERR_UNSUPPORTED, "%s: true is not supported: %s is outside this library's scope",
             r.key_path("enabled").c_str(), what);
    FieldTexts got(false, r.path()), def(false, r.path());
    S d{};
    visit(got, s);
    visit(def, d);
    for (size_t i = 0; i < got.rows().size(); ++i)
        if (!same_value_text(got.rows()[i].value, def.rows()[i].value))
            fail(DS_ERR_UNSUPPORTED, "%s: %s is outside this library's scope; only its disabled default is accepted",
                 got.rows()[i].path.c_str(), what);
}

}  // namespace

void visit(FieldVisitor& v, AmpConfig& s) { v.flag("enabled", s.enabled); }

void read_value(const cJSON* v, const std::string& path, AmpConfig& out) {
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

void visit(FieldVisitor& v, ElasticityConfig& s) {
    v.flag("enabled", s.enabled);
    v.integer("max_train_batch_size", s.max_train_batch_size, 1);
    v.integers("micro_batch_sizes", s.micro_batch_sizes, 1);
    v.integer("min_gpus", s.min_gpus, 1);
    v.integer("max_gpus", s.max_gpus, 1);
    v.integer("num_gpus_per_node", s.num_gpus_per_node, 1);
    v.integer("model_parallel_size", s.model_parallel_size, 1);
    v.real("min_time", s.min_time, 0.0);
    v.flag("prefer_larger_batch", s.prefer_larger_batch);
    v.flag("ignore_non_elastic_batch_info", s.ignore_non_elastic_batch_info);
    v.real("version", s.version, 0.0);
}
void validate(const ObjectReader& r, ElasticityConfig& s) { check_disabled(r, s, "elasticity"); }

void visit(FieldVisitor& v, ProgressiveLayerDropConfig& s) {
    v.flag("enabled", s.enabled);
    v.real("theta", s.theta);
    v.real("gamma", s.gamma);
}
void validate(const ObjectReader& r, ProgressiveLayerDropConfig& s) {
    check_disabled(r, s, "progressive_layer_drop");
}

void visit(FieldVisitor& v, EigenvalueConfig& s) {
    v.flag("enabled", s.enabled);
    v.flag("verbose", s.verbose);
    v.integer("max_iter", s.max_iter, 1);
    v.real("tol", s.tol, 0.0);
    v.real("stability", s.stability, 0.0);
    v.integer("gas_boundary_resolution", s.gas_boundary_resolution, 1);
    v.text("layer_name", s.layer_name);
    v.integer("layer_num", s.layer_num, 0);
}
void validate(const ObjectReader& r, EigenvalueConfig& s) { check_disabled(r, s, "eigenvalue"); }

// ---- top-level DeepSpeed keys outside this library's scope ---------------

const std::vector<const char*>& out_of_scope_keys() {
    static const std::vector<const char*> keys = {
        "hybrid_engine", "compression_training", "data_efficiency", "curriculum_learning",
        "sparse_attention", "weight_quantization", "compile", "expert_parallel",
        "nebula", "datastates", "autotuning", "quantize_training"};
    return keys;
}

bool is_out_of_scope_key(const char* key) {
    for (const char* k : out_of_scope_keys())
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
