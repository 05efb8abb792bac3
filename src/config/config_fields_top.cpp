// Field declarations of the top level of a DeepSpeed config (DEEPSPEED_SEMANTICS.md
// §1.2), in to_json order: scalars and the sections of
// config_fields_*.cpp. The batch triple is written here and resolved by
// parse() (config_parse.cpp); optimizer and scheduler are read and written
// through their per-type param tables (optimizer_config.cpp,
// scheduler_config.cpp).
#include <cctype>

#include "config/field_visitor.h"
#include "config/parse_internal.h"
#include "core/error.h"

namespace ds::config::detail {

namespace {

// A batch key: resolved by parse() from the triple, written as resolved.
CustomField batch_key(const int64_t& m) {
    return {nullptr, [p = &m](JsonWriter& w, const char* key) { w.value(key, *p); }, "int >= 1, \"auto\" or null",
            "derived", nullptr};
}

CustomField optimizer_field(std::optional<OptimizerConfig>* o) {
    return {[o](ObjectReader& r) {
                if (const cJSON* v = r.get("optimizer")) *o = parse_optimizer(v, r.key_path("optimizer"));
            },
            [o](JsonWriter& w, const char* key) { write_optimizer(w, key, *o); },
            "object or null: {type, params, legacy_fusion}", "null",
            [o] { return std::string(*o ? "an object" : "null"); }};
}

CustomField scheduler_field(std::optional<SchedulerConfig>* s) {
    return {[s](ObjectReader& r) {
                if (const cJSON* v = r.get("scheduler")) *s = parse_scheduler(v, r.key_path("scheduler"));
            },
            [s](JsonWriter& w, const char* key) { write_scheduler(w, key, *s); }, "object or null: {type, params}",
            "null", [s] { return std::string(*s ? "an object" : "null"); }};
}

}  // namespace

void visit(FieldVisitor& v, Config& c) {
    v.custom("train_batch_size", batch_key(c.train_batch_size));
    v.custom("train_micro_batch_size_per_gpu", batch_key(c.train_micro_batch_size_per_gpu));
    v.custom("gradient_accumulation_steps", batch_key(c.gradient_accumulation_steps));
    v.flag("managed_gradient_accumulation", c.managed_gradient_accumulation);
    v.opt_integer("steps_per_print", c.steps_per_print, 1);
    v.flag("wall_clock_breakdown", c.wall_clock_breakdown);
    v.flag("memory_breakdown", c.memory_breakdown);
    v.flag("dump_state", c.dump_state);
    v.real("gradient_clipping", c.gradient_clipping, 0.0);
    v.flag("prescale_gradients", c.prescale_gradients);
    if (v.real("gradient_predivide_factor", c.gradient_predivide_factor, 0.0))
        DS_CHECK(c.gradient_predivide_factor > 0.0, DS_ERR_INVALID_CONFIG,
                 "gradient_predivide_factor: must be > 0, got 0");
    v.custom("gradient_allreduce_op",
             {[&c](ObjectReader& r) {
                  const cJSON* op = r.get("gradient_allreduce_op");
                  if (!op) return;
                  std::string s = as_string(op, "gradient_allreduce_op");
                  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
                  DS_CHECK(s == "mean" || s == "sum", DS_ERR_INVALID_CONFIG,
                           "gradient_allreduce_op: must be \"mean\" or \"sum\", got \"%s\"", op->valuestring);
                  c.gradient_allreduce_op = s;
              },
              [&c](JsonWriter& w, const char* key) { w.value(key, c.gradient_allreduce_op); },
              "\"mean\" or \"sum\" (any case)", "",
              [&c] { return "\"" + c.gradient_allreduce_op + "\""; }});
    v.opt_dtype("communication_data_type", c.communication_data_type, DTypeNames::Comm);
    v.dtype("seq_parallel_communication_data_type", c.seq_parallel_communication_data_type, DTypeNames::Comm);
    v.flag("sparse_gradients", c.sparse_gradients);
    v.flag("disable_allgather", c.disable_allgather);
    v.flag("zero_allow_untested_optimizer", c.zero_allow_untested_optimizer);
    v.flag("zero_force_ds_cpu_optimizer", c.zero_force_ds_cpu_optimizer);
    v.custom("optimizer", optimizer_field(&c.optimizer));
    v.custom("scheduler", scheduler_field(&c.scheduler));

    SectionsConfig& s = c.sections;
    SectionOf fp16(c.fp16);
    SectionOf bf16(c.bf16);
    SectionOf amp(s.amp);
    SectionOf torch_autocast(s.torch_autocast);
    SectionOf zero(c.zero_optimization);
    SectionOf activation_checkpointing(s.activation_checkpointing);
    SectionOf flops_profiler(s.flops_profiler);
    SectionOf tensorboard(s.tensorboard);
    SectionOf wandb(s.wandb);
    SectionOf csv_monitor(s.csv_monitor);
    SectionOf comet(s.comet);
    SectionOf comms_logger(s.comms_logger);
    SectionOf timers(s.timers);
    SectionOf checkpoint(s.checkpoint);
    SectionOf data_types(c.data_types);
    SectionOf aio(s.aio);
    SectionOf pipeline(s.pipeline);
    SectionOf tensor_parallel(s.tensor_parallel);
    SectionOf elasticity(s.elasticity);
    SectionOf progressive_layer_drop(s.progressive_layer_drop);
    SectionOf eigenvalue(s.eigenvalue);
    v.section("fp16", fp16);
    v.section("bf16", bf16, "bfloat16");
    v.section("amp", amp);
    v.section("torch_autocast", torch_autocast);
    v.section("zero_optimization", zero);
    v.section("activation_checkpointing", activation_checkpointing);
    v.section("flops_profiler", flops_profiler);
    v.section("tensorboard", tensorboard);
    v.section("wandb", wandb);
    v.section("csv_monitor", csv_monitor);
    v.section("comet", comet);
    v.section("comms_logger", comms_logger);
    v.section("timers", timers);
    v.section("checkpoint", checkpoint);
    v.section("data_types", data_types);
    v.section("aio", aio);
    v.section("pipeline", pipeline);
    v.section("tensor_parallel", tensor_parallel);
    v.flag("dataloader_drop_last", c.dataloader_drop_last);
    v.opt_integer("vocabulary_size", c.vocabulary_size, 1);
    v.section("elasticity", elasticity);
    v.section("progressive_layer_drop", progressive_layer_drop);
    v.section("eigenvalue", eigenvalue);
    v.flag("use_data_before_expert_parallelism", c.use_data_before_expert_parallelism);
    v.flag("graph_harvesting", c.graph_harvesting);
    v.opt_text("log_level", c.log_level);
    v.custom("sequence_parallel_size",
             {[](ObjectReader& r) {
                  const cJSON* sp = r.get("sequence_parallel_size");
                  if (!sp) return;
                  // DeepSpeed divides the world size by it (§1.6); sequence parallelism is out of scope.
                  const bool one = cJSON_IsNumber(sp) && sp->valuedouble == 1.0;
                  DS_CHECK(one, DS_ERR_UNSUPPORTED,
                           "sequence_parallel_size: %s is not supported (sequence parallelism is outside this "
                           "library's scope; only 1 is accepted)",
                           describe(sp).c_str());
              },
              nullptr, "1 only", "1", nullptr});
    // to_json()'s list of ignored settings: informational, dropped here.
    v.custom("ignored",
             {[](ObjectReader& r) {
                  const cJSON* ig = r.get_raw("ignored");
                  if (!ig) return;
                  if (!cJSON_IsObject(ig))
                      fail_type("ignored", "an object of strings (to_json's list of ignored settings)", ig);
                  for (const cJSON* e = ig->child; e; e = e->next)
                      if (!cJSON_IsString(e)) fail_type(join_path("ignored", short_key(e->string)), "a string", e);
              },
              nullptr, "object of strings (to_json's output, dropped)", "", nullptr});
}

const std::vector<std::string>& top_level_keys() {
    static const std::vector<std::string> keys = [] {
        Config def;
        FieldTexts t(false);
        visit(t, def);
        std::vector<std::string> out;
        for (const FieldText& r : t.rows())
            if (r.path.find('.') == std::string::npos) out.push_back(r.path);
        return out;
    }();
    return keys;
}

}  // namespace ds::config::detail
