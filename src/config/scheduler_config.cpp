// `scheduler`: type resolution (reference §1.8) and, per DeepSpeed
// scheduler, the table of constructor params with defaults and validation
// (reference §3). torch.optim.lr_scheduler classes are named only: their
// params are kept verbatim.
#include <cstring>
#include <limits>
#include <vector>

#include "config/parse_internal.h"
#include "core/error.h"

namespace ds::config::detail {

namespace {

using SC = SchedulerConfig;
constexpr double kInf = std::numeric_limits<double>::infinity();

enum class SK { Real, OptReal, Int, OptInt, Bool, WarmupType };

struct SParam {
    const char* name;
    SK kind;
    double SC::*d = nullptr;
    std::optional<double> SC::*od = nullptr;
    int64_t SC::*i = nullptr;
    std::optional<int64_t> SC::*oi = nullptr;
    bool SC::*b = nullptr;
    double def = 0.0;          // Real/Int/Bool default; OptReal/OptInt: NaN => None
    double lo = 0.0, hi = kInf;
    bool required = false;     // no default: must be given
    bool per_group = false;    // DeepSpeed also takes a per-param-group list here
    bool auto_ok = false;      // "auto" => None (warmup_max_lr: the optimizer's lr)
};

const double kNone = std::numeric_limits<double>::quiet_NaN();

SParam real(const char* n, double SC::*m, double def, double lo = 0.0, double hi = kInf) {
    SParam p{n, SK::Real};
    p.d = m, p.def = def, p.lo = lo, p.hi = hi;
    return p;
}
SParam lr(const char* n, double SC::*m, double def) {
    SParam p = real(n, m, def);
    p.per_group = true;
    return p;
}
SParam required_lr(const char* n, double SC::*m) {
    SParam p = lr(n, m, 0.0);
    p.required = true;
    return p;
}
SParam opt_lr(const char* n, std::optional<double> SC::*m, double def) {
    SParam p{n, SK::OptReal};
    p.od = m, p.def = def, p.per_group = true, p.auto_ok = true;
    return p;
}
SParam integer(const char* n, int64_t SC::*m, int64_t def, int64_t lo) {
    SParam p{n, SK::Int};
    p.i = m, p.def = static_cast<double>(def), p.lo = static_cast<double>(lo);
    return p;
}
SParam opt_integer(const char* n, std::optional<int64_t> SC::*m, int64_t lo, bool required) {
    SParam p{n, SK::OptInt};
    p.oi = m, p.def = kNone, p.lo = static_cast<double>(lo), p.required = required;
    return p;
}
SParam flag(const char* n, bool SC::*m, bool def) {
    SParam p{n, SK::Bool};
    p.b = m, p.def = def ? 1.0 : 0.0;
    return p;
}
SParam warmup_type() { return SParam{"warmup_type", SK::WarmupType}; }
SParam last_iter() { return integer("last_batch_iteration", &SC::last_batch_iteration, -1, -1); }

const std::vector<SParam>& params_for(const std::string& type) {
    static const std::vector<SParam> range = {
        lr("lr_range_test_min_lr", &SC::lr_range_test_min_lr, 1e-3),
        integer("lr_range_test_step_size", &SC::lr_range_test_step_size, 2000, 1),
        real("lr_range_test_step_rate", &SC::lr_range_test_step_rate, 1.0),
        flag("lr_range_test_staircase", &SC::lr_range_test_staircase, false), last_iter()};
    static const std::vector<SParam> one_cycle = [] {
        std::vector<SParam> v = {
            required_lr("cycle_min_lr", &SC::cycle_min_lr), required_lr("cycle_max_lr", &SC::cycle_max_lr),
            real("decay_lr_rate", &SC::decay_lr_rate, 0.0),
            integer("cycle_first_step_size", &SC::cycle_first_step_size, 2000, 1),
            opt_integer("cycle_second_step_size", &SC::cycle_second_step_size, 0, false),
            integer("cycle_first_stair_count", &SC::cycle_first_stair_count, 0, 0),
            opt_integer("cycle_second_stair_count", &SC::cycle_second_stair_count, 0, false),
            integer("decay_step_size", &SC::decay_step_size, 0, 0),
            flag("cycle_momentum", &SC::cycle_momentum, true),
            real("cycle_min_mom", &SC::cycle_min_mom, 0.8, 0.0, 1.0),
            real("cycle_max_mom", &SC::cycle_max_mom, 0.9, 0.0, 1.0),
            real("decay_mom_rate", &SC::decay_mom_rate, 0.0), last_iter()};
        v[9].per_group = v[10].per_group = true;
        return v;
    }();
    static const std::vector<SParam> warmup = {
        lr("warmup_min_lr", &SC::warmup_min_lr, 0.0), opt_lr("warmup_max_lr", &SC::warmup_max_lr, kNone),
        integer("warmup_num_steps", &SC::warmup_num_steps, 1000, 1), warmup_type(), last_iter()};
    static const std::vector<SParam> warmup_decay = {
        opt_integer("total_num_steps", &SC::total_num_steps, 1, true),
        lr("warmup_min_lr", &SC::warmup_min_lr, 0.0), opt_lr("warmup_max_lr", &SC::warmup_max_lr, 0.001),
        integer("warmup_num_steps", &SC::warmup_num_steps, 1000, 1), warmup_type(), last_iter()};
    static const std::vector<SParam> warmup_cosine = {
        opt_integer("total_num_steps", &SC::total_num_steps, 1, true),
        real("warmup_min_ratio", &SC::warmup_min_ratio, 0.0, 0.0, 1.0),
        integer("warmup_num_steps", &SC::warmup_num_steps, 1000, 1),
        real("cos_min_ratio", &SC::cos_min_ratio, 0.0001, 0.0, 1.0), warmup_type(), last_iter()};
    static const std::vector<SParam> none;
    if (type == "LRRangeTest") return range;
    if (type == "OneCycle") return one_cycle;
    if (type == "WarmupLR") return warmup;
    if (type == "WarmupDecayLR") return warmup_decay;
    if (type == "WarmupCosineLR") return warmup_cosine;
    return none;
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

std::string resolve_type(const cJSON* v, const std::string& path) {
    const std::string given = as_string(v, path);
    for (const auto& n : deepspeed_names())
        if (n == given) return given;
    for (const auto& n : torch_names())
        if (n == given) return given;
    std::vector<std::string> all = deepspeed_names();
    all.insert(all.end(), torch_names().begin(), torch_names().end());
    const std::string best = closest_match(given, all);
    if (!best.empty())
        fail(DS_ERR_INVALID_CONFIG, "%s: unknown scheduler \"%s\" (names are case-sensitive); did you mean \"%s\"?",
             path.c_str(), given.c_str(), best.c_str());
    fail(DS_ERR_INVALID_CONFIG,
         "%s: unknown scheduler \"%s\" (DeepSpeed schedulers: LRRangeTest, OneCycle, WarmupLR, "
         "WarmupDecayLR, WarmupCosineLR; or a torch.optim.lr_scheduler class)",
         path.c_str(), given.c_str());
}

void set_default(const SParam& p, SC& s) {
    switch (p.kind) {
        case SK::Real: s.*p.d = p.def; break;
        case SK::OptReal:
            if (p.def == p.def) s.*p.od = p.def;
            else (s.*p.od).reset();
            break;
        case SK::Int: s.*p.i = static_cast<int64_t>(p.def); break;
        case SK::OptInt: (s.*p.oi).reset(); break;
        case SK::Bool: s.*p.b = p.def != 0.0; break;
        case SK::WarmupType: s.warmup_type = "log"; break;
    }
}

void read_param(ObjectReader& r, const SParam& p, SC& s) {
    const std::string path = r.key_path(p.name);
    const cJSON* v = r.get_raw(p.name);
    if (is_auto(v)) {
        if (!p.auto_ok) fail_auto(path);
        (s.*p.od).reset();  // derived later from the optimizer's lr
        return;
    }
    if (!v) {
        DS_CHECK(!p.required, DS_ERR_INVALID_CONFIG, "%s: required for %s", path.c_str(), s.type.c_str());
        return;
    }
    if (p.per_group && cJSON_IsArray(v))
        fail(DS_ERR_UNSUPPORTED, "%s: per-parameter-group lists are not supported (give one number)",
             path.c_str());
    switch (p.kind) {
        case SK::Real: s.*p.d = as_double(v, path, p.lo, p.hi); break;
        case SK::OptReal:
            if (cJSON_IsNull(v)) (s.*p.od).reset();
            else s.*p.od = as_double(v, path, p.lo, p.hi);
            break;
        case SK::Int: s.*p.i = as_int(v, path, static_cast<int64_t>(p.lo)); break;
        case SK::OptInt:
            if (cJSON_IsNull(v)) {
                DS_CHECK(!p.required, DS_ERR_INVALID_CONFIG, "%s: required for %s (null given)",
                         path.c_str(), s.type.c_str());
                (s.*p.oi).reset();
            } else {
                s.*p.oi = as_int(v, path, static_cast<int64_t>(p.lo));
            }
            break;
        case SK::Bool: s.*p.b = as_bool(v, path); break;
        case SK::WarmupType:
            s.warmup_type = as_string(v, path);
            DS_CHECK(s.warmup_type == "log" || s.warmup_type == "linear", DS_ERR_INVALID_CONFIG,
                     "%s: must be \"log\" or \"linear\", got \"%s\"", path.c_str(), s.warmup_type.c_str());
            break;
    }
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
    s.type = resolve_type(type, r.key_path("type"));
    const std::string ppath = r.key_path("params");
    if (params && cJSON_IsNull(params)) params = nullptr;
    if (!is_deepspeed_scheduler(s.type)) {
        s.opaque_params_json = "{}";
        if (params) {
            ObjectReader pr(params, ppath, AutoRule::Reject);
            for (const cJSON* c = params->child; c; c = c->next) pr.get(c->string);
            s.opaque_params_json = compact_json(params);
        }
        return s;
    }
    for (const SParam& p : params_for(s.type)) set_default(p, s);
    static const cJSON empty_object = [] {
        cJSON o{};
        o.type = cJSON_Object;
        return o;
    }();
    ObjectReader pr(params ? params : &empty_object, ppath, AutoRule::Reject);
    // Unknown keys first: a misspelt required key reads better as a typo.
    for (const SParam& p : params_for(s.type)) pr.get_raw(p.name);
    pr.finish();
    for (const SParam& p : params_for(s.type)) read_param(pr, p, s);
    return s;
}

void write_scheduler(JsonWriter& w, const char* key, const std::optional<SchedulerConfig>& s) {
    if (!s) {
        w.null(key);
        return;
    }
    w.begin_object(key);
    w.value("type", s->type);
    if (!is_deepspeed_scheduler(s->type)) {
        w.raw("params", s->opaque_params_json.empty() ? "{}" : s->opaque_params_json);
    } else {
        w.begin_object("params");
        for (const SParam& p : params_for(s->type)) {
            switch (p.kind) {
                case SK::Real: w.value(p.name, (*s).*p.d); break;
                case SK::OptReal: w.optional(p.name, (*s).*p.od); break;
                case SK::Int: w.value(p.name, (*s).*p.i); break;
                case SK::OptInt: w.optional(p.name, (*s).*p.oi); break;
                case SK::Bool: w.value(p.name, (*s).*p.b); break;
                case SK::WarmupType: w.value(p.name, s->warmup_type); break;
            }
        }
        w.end_object();
    }
    w.end_object();
}

}  // namespace ds::config::detail
