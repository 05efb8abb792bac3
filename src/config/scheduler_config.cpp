// `scheduler`: type resolution (DEEPSPEED_SEMANTICS.md §1.8) and, per DeepSpeed
// scheduler, the table of constructor params with defaults and validation
// (DEEPSPEED_SEMANTICS.md §3), in param_table.h's rows. torch.optim.lr_scheduler classes
// are named only: their params are kept verbatim.
#include <cstring>
#include <limits>
#include <vector>

#include "config/param_table.h"
#include "config/parse_internal.h"
#include "core/error.h"

namespace ds::config::detail {

namespace {

using SC = SchedulerConfig;
using P = Param<SC>;

// warmup_type: "log" | "linear".
const ParamSpecial<SC> kWarmupType = {
    [](const P&, SC& s) { s.warmup_type = "log"; },
    [](const cJSON* v, const std::string& path, SC& s) {
        s.warmup_type = as_string(v, path);
        DS_CHECK(s.warmup_type == "log" || s.warmup_type == "linear", DS_ERR_INVALID_CONFIG,
                 "%s: must be \"log\" or \"linear\", got \"%s\"", path.c_str(), s.warmup_type.c_str());
    },
    [](JsonWriter& w, const P& p, const SC& s) { w.value(p.name, s.warmup_type); }, "\"log\" or \"linear\"",
    [](const P&) { return std::string("\"log\""); }};

P lr(const char* n, double SC::*m, double def) { return real(n, m, def).group(); }
P warmup_type() { return special("warmup_type", kWarmupType); }
P last_iter() { return integer("last_batch_iteration", &SC::last_batch_iteration, -1, -1); }

const std::vector<P>& params_for(const std::string& type) {
    static const std::vector<P> range = {
        lr("lr_range_test_min_lr", &SC::lr_range_test_min_lr, 1e-3),
        integer("lr_range_test_step_size", &SC::lr_range_test_step_size, 2000, 1),
        real("lr_range_test_step_rate", &SC::lr_range_test_step_rate, 1.0),
        flag("lr_range_test_staircase", &SC::lr_range_test_staircase, false), last_iter()};
    static const std::vector<P> one_cycle = {
        lr("cycle_min_lr", &SC::cycle_min_lr, 0.0).need(), lr("cycle_max_lr", &SC::cycle_max_lr, 0.0).need(),
        real("decay_lr_rate", &SC::decay_lr_rate, 0.0),
        integer("cycle_first_step_size", &SC::cycle_first_step_size, 2000, 1),
        opt_integer("cycle_second_step_size", &SC::cycle_second_step_size, 0),
        integer("cycle_first_stair_count", &SC::cycle_first_stair_count, 0, 0),
        opt_integer("cycle_second_stair_count", &SC::cycle_second_stair_count, 0),
        integer("decay_step_size", &SC::decay_step_size, 0, 0),
        flag("cycle_momentum", &SC::cycle_momentum, true),
        real("cycle_min_mom", &SC::cycle_min_mom, 0.8, 0.0, 1.0).group(),
        real("cycle_max_mom", &SC::cycle_max_mom, 0.9, 0.0, 1.0).group(),
        real("decay_mom_rate", &SC::decay_mom_rate, 0.0), last_iter()};
    static const std::vector<P> warmup = {
        lr("warmup_min_lr", &SC::warmup_min_lr, 0.0),
        opt_real("warmup_max_lr", &SC::warmup_max_lr, kParamNone).group().auto_none(),
        integer("warmup_num_steps", &SC::warmup_num_steps, 1000, 1), warmup_type(), last_iter()};
    static const std::vector<P> warmup_decay = {
        opt_integer("total_num_steps", &SC::total_num_steps, 1).need(),
        lr("warmup_min_lr", &SC::warmup_min_lr, 0.0),
        opt_real("warmup_max_lr", &SC::warmup_max_lr, 0.001).group().auto_none(),
        integer("warmup_num_steps", &SC::warmup_num_steps, 1000, 1), warmup_type(), last_iter()};
    static const std::vector<P> warmup_cosine = {
        opt_integer("total_num_steps", &SC::total_num_steps, 1).need(),
        real("warmup_min_ratio", &SC::warmup_min_ratio, 0.0, 0.0, 1.0),
        integer("warmup_num_steps", &SC::warmup_num_steps, 1000, 1),
        real("cos_min_ratio", &SC::cos_min_ratio, 0.0001, 0.0, 1.0), warmup_type(), last_iter()};
    return rows_of<SC>(type, {{"LRRangeTest", &range}, {"OneCycle", &one_cycle}, {"WarmupLR", &warmup},
                              {"WarmupDecayLR", &warmup_decay}, {"WarmupCosineLR", &warmup_cosine}});
}

const std::vector<std::string>& deepspeed_names() {
    static const std::vector<std::string> v = {"LRRangeTest", "OneCycle", "WarmupLR", "WarmupDecayLR",
                                               "WarmupCosineLR"};
    return v;
}

const std::vector<std::string>& torch_names() {
    static const std::vector<std::string> v = {
        "LambdaLR",   "MultiplicativeLR", "StepLR",           "MultiStepLR",
        "ConstantLR", "LinearLR",         "ExponentialLR",    "SequentialLR",
        "CosineAnnealingLR", "ChainedScheduler", "ReduceLROnPlateau", "CyclicLR",
        "CosineAnnealingWarmRestarts", "OneCycleLR", "PolynomialLR"};
    return v;
}

std::string resolve(const cJSON* v, const std::string& path) {
    return resolve_type(v, path, deepspeed_names(), false, torch_names(), "scheduler", " (names are case-sensitive)",
                        "DeepSpeed schedulers: LRRangeTest, OneCycle, WarmupLR, WarmupDecayLR, WarmupCosineLR; "
                        "or a torch.optim.lr_scheduler class");
}

}  // namespace

bool is_deepspeed_scheduler(const std::string& type) { return !params_for(type).empty(); }

std::optional<SchedulerConfig> parse_scheduler(const cJSON* v, const std::string& path) {
    if (cJSON_IsNull(v)) return std::nullopt;
    ObjectReader r(v, path, AutoRule::Reject);
    const cJSON* type = r.get("type");
    const cJSON* params = r.get("params");
    r.finish();
    DS_CHECK(type != nullptr, DS_ERR_INVALID_CONFIG, "%s.type: required", path.c_str());
    SC s;
    s.type = resolve(type, r.key_path("type"));
    const std::string ppath = r.key_path("params");
    if (params && cJSON_IsNull(params)) params = nullptr;
    if (!is_deepspeed_scheduler(s.type)) {
        s.opaque_params_json = opaque_params(params, ppath, nullptr, nullptr);
        return s;
    }
    for (const P& p : params_for(s.type)) set_default(p, s);
    static const cJSON empty_object = [] {
        cJSON o{};
        o.type = cJSON_Object;
        return o;
    }();
    ObjectReader pr(params ? params : &empty_object, ppath, AutoRule::Reject);
    // Unknown keys first: a misspelt required key reads better as a typo.
    for (const P& p : params_for(s.type)) pr.get_raw(p.name);
    pr.finish();
    for (const P& p : params_for(s.type)) read_param(pr, p, s, s.type);
    return s;
}

void write_scheduler(JsonWriter& w, const char* key, const std::optional<SchedulerConfig>& s) {
    if (begin_typed(w, key, s, params_for)) w.end_object();
}

std::vector<ParamDoc> scheduler_param_docs() {
    std::vector<std::string> types = deepspeed_names();
    types.insert(types.end(), torch_names().begin(), torch_names().end());
    return param_docs(types, params_for);
}

}  // namespace ds::config::detail
