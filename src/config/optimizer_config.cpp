// `optimizer`: type resolution (reference §1.7) and, per type, the table of
// params DeepSpeed's constructor takes with their defaults. parse_optimizer
// and write_optimizer share the tables, so to_json prints every param.
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "config/parse_internal.h"
#include "core/error.h"

namespace ds::config::detail {

namespace {

using OC = OptimizerConfig;
constexpr double kInf = std::numeric_limits<double>::infinity();

enum class PK { Real, Int, Bool, Betas, Str, FalseOnly };

struct Param {
    const char* name;
    PK kind;
    double OC::*d = nullptr;
    int64_t OC::*i = nullptr;
    bool OC::*b = nullptr;
    std::string OC::*s = nullptr;
    double def = 0.0, def2 = 0.0;  // Real / Int / Bool (0/1) default; Betas: (def, def2)
    const char* def_s = nullptr;
    double lo = 0.0, hi = kInf;
};

Param real(const char* n, double OC::*m, double def, double lo = 0.0, double hi = kInf) {
    Param p{n, PK::Real};
    p.d = m, p.def = def, p.lo = lo, p.hi = hi;
    return p;
}
Param integer(const char* n, int64_t OC::*m, int64_t def, int64_t lo = 0) {
    Param p{n, PK::Int};
    p.i = m, p.def = static_cast<double>(def), p.lo = static_cast<double>(lo);
    return p;
}
Param flag(const char* n, bool OC::*m, bool def) {
    Param p{n, PK::Bool};
    p.b = m, p.def = def ? 1.0 : 0.0;
    return p;
}
Param betas(double b1, double b2) {
    Param p{"betas", PK::Betas};
    p.def = b1, p.def2 = b2;
    return p;
}
Param text(const char* n, std::string OC::*m, const char* def) {
    Param p{n, PK::Str};
    p.s = m, p.def_s = def;
    return p;
}
Param false_only(const char* n) { return Param{n, PK::FalseOnly}; }

const std::vector<Param>& params_for(const std::string& type) {
    static const std::vector<Param> adam = {
        real("lr", &OC::lr, 1e-3), betas(0.9, 0.999), real("eps", &OC::eps, 1e-8),
        real("weight_decay", &OC::weight_decay, 0.0), flag("bias_correction", &OC::bias_correction, true),
        false_only("amsgrad"), flag("adam_w_mode", &OC::adamw_mode, true),
        flag("torch_adam", &OC::torch_adam, false),
        flag("fp32_optimizer_states", &OC::fp32_optimizer_states, true)};
    static const std::vector<Param> lamb = {
        real("lr", &OC::lr, 1e-3), flag("bias_correction", &OC::bias_correction, true),
        betas(0.9, 0.999), real("eps", &OC::eps, 1e-8),
        flag("eps_inside_sqrt", &OC::eps_inside_sqrt, false),
        real("weight_decay", &OC::weight_decay, 0.0), real("max_coeff", &OC::max_coeff, 10.0),
        real("min_coeff", &OC::min_coeff, 0.01), false_only("amsgrad")};
    static const std::vector<Param> lion = {
        real("lr", &OC::lr, 1e-3), betas(0.9, 0.999), real("weight_decay", &OC::weight_decay, 0.0)};
    static const std::vector<Param> sgd = {
        real("lr", &OC::lr, 1e-3), real("momentum", &OC::momentum, 0.0),
        real("dampening", &OC::dampening, 0.0, -kInf), real("weight_decay", &OC::weight_decay, 0.0),
        flag("nesterov", &OC::nesterov, false), flag("maximize", &OC::maximize, false)};
    static const std::vector<Param> adagrad = {
        real("lr", &OC::lr, 1e-2), real("lr_decay", &OC::lr_decay, 0.0),
        real("weight_decay", &OC::weight_decay, 0.0),
        real("initial_accumulator_value", &OC::initial_accumulator_value, 0.0),
        real("eps", &OC::eps, 1e-10), false_only("amsgrad"),
        flag("fp32_optimizer_states", &OC::fp32_optimizer_states, true)};
    static const std::vector<Param> onebitadam = {
        real("lr", &OC::lr, 1e-3), integer("freeze_step", &OC::freeze_step, 100000),
        flag("bias_correction", &OC::bias_correction, true), betas(0.9, 0.999),
        real("eps", &OC::eps, 1e-8), flag("eps_inside_sqrt", &OC::eps_inside_sqrt, false),
        real("weight_decay", &OC::weight_decay, 0.0), false_only("amsgrad"),
        flag("cuda_aware", &OC::cuda_aware, false),
        text("comm_backend_name", &OC::comm_backend_name, "nccl")};
    static const std::vector<Param> zerooneadam = {
        real("lr", &OC::lr, 1e-3), flag("bias_correction", &OC::bias_correction, true),
        betas(0.9, 0.999), real("eps", &OC::eps, 1e-8),
        flag("eps_inside_sqrt", &OC::eps_inside_sqrt, false),
        real("weight_decay", &OC::weight_decay, 0.0),
        integer("var_freeze_step", &OC::var_freeze_step, 100000),
        integer("var_update_scaler", &OC::var_update_scaler, 16, 1),
        integer("local_step_scaler", &OC::local_step_scaler, 32678, 1),
        integer("local_step_clipper", &OC::local_step_clipper, 16, 1), false_only("amsgrad"),
        flag("cuda_aware", &OC::cuda_aware, false),
        text("comm_backend_name", &OC::comm_backend_name, "nccl")};
    static const std::vector<Param> onebitlamb = {
        real("lr", &OC::lr, 1e-3), integer("freeze_step", &OC::freeze_step, 100000),
        flag("bias_correction", &OC::bias_correction, true), betas(0.9, 0.999),
        real("eps", &OC::eps, 1e-8), flag("eps_inside_sqrt", &OC::eps_inside_sqrt, false),
        real("weight_decay", &OC::weight_decay, 0.0), real("max_coeff", &OC::max_coeff, 10.0),
        real("min_coeff", &OC::min_coeff, 0.01), false_only("amsgrad"),
        flag("cuda_aware", &OC::cuda_aware, false),
        text("comm_backend_name", &OC::comm_backend_name, "nccl"),
        real("coeff_beta", &OC::coeff_beta, 0.9, 0.0, 1.0), real("factor_max", &OC::factor_max, 4.0),
        real("factor_min", &OC::factor_min, 0.5), real("factor_threshold", &OC::factor_threshold, 0.1)};
    static const std::vector<Param> none;
    if (type == "adam" || type == "adamw") return adam;
    if (type == "lamb") return lamb;
    if (type == "lion") return lion;
    if (type == "SGD") return sgd;
    if (type == "adagrad") return adagrad;
    if (type == "onebitadam") return onebitadam;
    if (type == "zerooneadam") return zerooneadam;
    if (type == "onebitlamb") return onebitlamb;
    return none;
}

const std::vector<std::string>& deepspeed_names() {
    static const std::vector<std::string> v = {"adam",   "adamw",   "lamb",  "onebitadam",
                                               "zerooneadam", "onebitlamb", "adagrad", "lion",
                                               "muadam", "muadamw", "musgd", "muon"};
    return v;
}

// torch.optim optimizer classes (exact case) not shadowed by a DeepSpeed name.
const std::vector<std::string>& torch_names() {
    static const std::vector<std::string> v = {"Adadelta", "Adafactor", "Adamax", "ASGD",
                                               "LBFGS",    "NAdam",     "RAdam",  "RMSprop",
                                               "Rprop",    "SGD",       "SparseAdam"};
    return v;
}

bool modelled(const std::string& type) { return !params_for(type).empty(); }

std::string resolve_type(const cJSON* v, const std::string& path) {
    const std::string given = as_string(v, path);
    std::string low = given;
    for (char& c : low) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (const auto& n : deepspeed_names())
        if (n == low) return low;
    for (const auto& n : torch_names())
        if (n == given) return given;
    std::vector<std::string> all = deepspeed_names();
    all.insert(all.end(), torch_names().begin(), torch_names().end());
    const std::string best = closest_match(given, all);
    if (!best.empty())
        fail(DS_ERR_INVALID_CONFIG, "%s: unknown optimizer \"%s\"; did you mean \"%s\"?", path.c_str(),
             given.c_str(), best.c_str());
    fail(DS_ERR_INVALID_CONFIG,
         "%s: unknown optimizer \"%s\" (DeepSpeed names: adam, adamw, lamb, lion, adagrad, onebitadam, "
         "zerooneadam, onebitlamb, muadam, muadamw, musgd, muon; or a torch.optim class such as SGD)",
         path.c_str(), given.c_str());
}

void reject_common(ObjectReader& r) {
    if (r.get_raw("max_grad_norm"))
        fail(DS_ERR_INVALID_CONFIG,
             "%s: not accepted in optimizer params (DeepSpeed rejects it); use the top-level gradient_clipping",
             r.key_path("max_grad_norm").c_str());
}

void read_param(ObjectReader& r, const Param& p, OC& o) {
    const cJSON* v = r.get(p.name);
    if (!v) return;
    const std::string path = r.key_path(p.name);
    switch (p.kind) {
        case PK::Real: o.*p.d = as_double(v, path, p.lo, p.hi); break;
        case PK::Int: o.*p.i = as_int(v, path, static_cast<int64_t>(p.lo)); break;
        case PK::Bool: o.*p.b = as_bool(v, path); break;
        case PK::Str: o.*p.s = as_string(v, path); break;
        case PK::FalseOnly:
            if (as_bool(v, path))
                fail(DS_ERR_INVALID_CONFIG, "%s: true is not accepted (DeepSpeed's %s rejects AMSGrad)",
                     path.c_str(), o.type.c_str());
            break;
        case PK::Betas: {
            if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2)
                fail_type(path, "an array of two numbers", v);
            o.beta1 = as_double(v->child, path + "[0]", 0.0, 1.0);
            o.beta2 = as_double(v->child->next, path + "[1]", 0.0, 1.0);
            DS_CHECK(o.beta1 < 1.0, DS_ERR_INVALID_CONFIG, "%s[0]: must be < 1, got 1", path.c_str());
            DS_CHECK(o.beta2 < 1.0, DS_ERR_INVALID_CONFIG, "%s[1]: must be < 1, got 1", path.c_str());
            break;
        }
    }
}

void set_default(const Param& p, OC& o) {
    switch (p.kind) {
        case PK::Real: o.*p.d = p.def; break;
        case PK::Int: o.*p.i = static_cast<int64_t>(p.def); break;
        case PK::Bool: o.*p.b = p.def != 0.0; break;
        case PK::Str: o.*p.s = p.def_s; break;
        case PK::Betas: o.beta1 = p.def, o.beta2 = p.def2; break;
        case PK::FalseOnly: break;
    }
}

void validate(const OC& o, const std::string& path) {
    if (o.type == "SGD" && o.nesterov)
        DS_CHECK(o.momentum > 0.0 && o.dampening == 0.0, DS_ERR_INVALID_CONFIG,
                 "%s.params.nesterov: requires momentum > 0 and dampening 0", path.c_str());
    if (o.type == "lamb" || o.type == "onebitlamb")
        DS_CHECK(o.min_coeff <= o.max_coeff, DS_ERR_INVALID_CONFIG,
                 "%s.params.min_coeff: must be <= max_coeff", path.c_str());
    if (o.type == "onebitadam" || o.type == "zerooneadam" || o.type == "onebitlamb") {
        const std::string& b = o.comm_backend_name;
        DS_CHECK(b == "nccl" || b == "mpi" || b == "hccl" || b == "compressed", DS_ERR_INVALID_CONFIG,
                 "%s.params.comm_backend_name: must be \"nccl\", \"mpi\", \"hccl\" or \"compressed\", got \"%s\"",
                 path.c_str(), b.c_str());
    }
}

// Params of types this library does not model: structure checked, kept verbatim.
std::string read_opaque(const cJSON* params, ObjectReader& r) {
    for (const cJSON* c = params->child; c; c = c->next) {
        r.get(c->string);  // rejects "auto"; marks known
        if (std::strcmp(c->string, "amsgrad") == 0 && cJSON_IsTrue(c))
            fail(DS_ERR_INVALID_CONFIG, "%s: true is not accepted", r.key_path("amsgrad").c_str());
    }
    return compact_json(params);
}

}  // namespace

std::optional<OptimizerConfig> parse_optimizer(const cJSON* v, const std::string& path) {
    if (cJSON_IsNull(v)) return std::nullopt;
    ObjectReader r(v, path, AutoRule::Reject);
    const cJSON* type = r.get("type");
    const cJSON* params = r.get("params");
    OC o;
    r.read("legacy_fusion", o.legacy_fusion);
    r.finish();
    DS_CHECK(type != nullptr, DS_ERR_INVALID_CONFIG, "%s.type: required", path.c_str());
    o.type = resolve_type(type, r.key_path("type"));
    for (const Param& p : params_for(o.type)) set_default(p, o);

    const std::string ppath = r.key_path("params");
    if (params && cJSON_IsNull(params)) params = nullptr;
    if (!modelled(o.type)) {
        o.opaque_params_json = "{}";
        if (params) {
            ObjectReader pr(params, ppath, AutoRule::Reject);
            reject_common(pr);
            o.opaque_params_json = read_opaque(params, pr);
        }
        return o;
    }
    if (params) {
        ObjectReader pr(params, ppath, AutoRule::Reject);
        reject_common(pr);
        for (const Param& p : params_for(o.type)) read_param(pr, p, o);
        pr.finish();
    }
    if (o.type == "adamw") o.adamw_mode = true;  // effective mode: type adamw OR adam_w_mode
    validate(o, path);
    return o;
}

void write_optimizer(JsonWriter& w, const char* key, const std::optional<OptimizerConfig>& o) {
    if (!o) {
        w.null(key);
        return;
    }
    w.begin_object(key);
    w.value("type", o->type);
    if (!modelled(o->type)) {
        w.raw("params", o->opaque_params_json.empty() ? "{}" : o->opaque_params_json);
    } else {
        w.begin_object("params");
        for (const Param& p : params_for(o->type)) {
            switch (p.kind) {
                case PK::Real: w.value(p.name, (*o).*p.d); break;
                case PK::Int: w.value(p.name, (*o).*p.i); break;
                case PK::Bool: w.value(p.name, (*o).*p.b); break;
                case PK::Str: w.value(p.name, (*o).*p.s); break;
                case PK::FalseOnly: w.value(p.name, false); break;
                case PK::Betas:
                    w.begin_array(p.name);
                    w.value("", o->beta1);
                    w.value("", o->beta2);
                    w.end_array();
                    break;
            }
        }
        w.end_object();
    }
    w.value("legacy_fusion", o->legacy_fusion);
    w.end_object();
}

}  // namespace ds::config::detail
