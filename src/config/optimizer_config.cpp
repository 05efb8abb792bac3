// `optimizer`: type resolution (DEEPSPEED_SEMANTICS.md §1.7) and, per type, the table of
// params DeepSpeed's constructor takes with their defaults (param_table.h).
// parse_optimizer and write_optimizer share the tables, so to_json prints
// every param.
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "config/param_table.h"
#include "config/parse_internal.h"
#include "core/error.h"

namespace ds::config::detail {

namespace {

using OC = OptimizerConfig;
using P = Param<OC>;

// betas: [beta1, beta2], each in [0, 1).
const ParamSpecial<OC> kBetas = {
    [](const P& p, OC& o) { o.beta1 = p.def, o.beta2 = p.def2; },
    [](const cJSON* v, const std::string& path, OC& o) {
        if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2) fail_type(path, "an array of two numbers", v);
        o.beta1 = as_double(v->child, path + "[0]", 0.0, 1.0);
        o.beta2 = as_double(v->child->next, path + "[1]", 0.0, 1.0);
        DS_CHECK(o.beta1 < 1.0, DS_ERR_INVALID_CONFIG, "%s[0]: must be < 1, got 1", path.c_str());
        DS_CHECK(o.beta2 < 1.0, DS_ERR_INVALID_CONFIG, "%s[1]: must be < 1, got 1", path.c_str());
    },
    [](JsonWriter& w, const P& p, const OC& o) {
        w.begin_array(p.name);
        w.value("", o.beta1);
        w.value("", o.beta2);
        w.end_array();
    },
    "[beta1, beta2], each in [0, 1)",
    [](const P& p) { return "[" + format_number(p.def) + ", " + format_number(p.def2) + "]"; }};

// amsgrad: accepted only false (DeepSpeed's optimizers reject AMSGrad); not stored.
const ParamSpecial<OC> kFalseOnly = {
    [](const P&, OC&) {},
    [](const cJSON* v, const std::string& path, OC& o) {
        if (as_bool(v, path))
            fail(DS_ERR_INVALID_CONFIG, "%s: true is not accepted (DeepSpeed's %s rejects AMSGrad)", path.c_str(),
                 o.type.c_str());
    },
    [](JsonWriter& w, const P& p, const OC&) { w.value(p.name, false); }, "false only",
    [](const P&) { return std::string("false"); }};

P betas(double b1, double b2) { return special("betas", kBetas, b1, b2); }
P false_only(const char* n) { return special(n, kFalseOnly); }

const std::vector<P>& params_for(const std::string& type) {
    static const std::vector<P> adam = {
        real("lr", &OC::lr, 1e-3), betas(0.9, 0.999), real("eps", &OC::eps, 1e-8),
        real("weight_decay", &OC::weight_decay, 0.0), flag("bias_correction", &OC::bias_correction, true),
        false_only("amsgrad"), flag("adam_w_mode", &OC::adamw_mode, true),
        flag("torch_adam", &OC::torch_adam, false),
        flag("fp32_optimizer_states", &OC::fp32_optimizer_states, true)};
    static const std::vector<P> lamb = {
        real("lr", &OC::lr, 1e-3), flag("bias_correction", &OC::bias_correction, true),
        betas(0.9, 0.999), real("eps", &OC::eps, 1e-8),
        flag("eps_inside_sqrt", &OC::eps_inside_sqrt, false),
        real("weight_decay", &OC::weight_decay, 0.0), real("max_coeff", &OC::max_coeff, 10.0),
        real("min_coeff", &OC::min_coeff, 0.01), false_only("amsgrad")};
    static const std::vector<P> lion = {
        real("lr", &OC::lr, 1e-3), betas(0.9, 0.999), real("weight_decay", &OC::weight_decay, 0.0)};
    static const std::vector<P> sgd = {
        real("lr", &OC::lr, 1e-3), real("momentum", &OC::momentum, 0.0),
        real("dampening", &OC::dampening, 0.0, -std::numeric_limits<double>::infinity()), real("weight_decay", &OC::weight_decay, 0.0),
        flag("nesterov", &OC::nesterov, false), flag("maximize", &OC::maximize, false)};
    static const std::vector<P> adagrad = {
        real("lr", &OC::lr, 1e-2), real("lr_decay", &OC::lr_decay, 0.0),
        real("weight_decay", &OC::weight_decay, 0.0),
        real("initial_accumulator_value", &OC::initial_accumulator_value, 0.0),
        real("eps", &OC::eps, 1e-10), false_only("amsgrad"),
        flag("fp32_optimizer_states", &OC::fp32_optimizer_states, true)};
    static const std::vector<P> onebitadam = {
        real("lr", &OC::lr, 1e-3), integer("freeze_step", &OC::freeze_step, 100000),
        flag("bias_correction", &OC::bias_correction, true), betas(0.9, 0.999),
        real("eps", &OC::eps, 1e-8), flag("eps_inside_sqrt", &OC::eps_inside_sqrt, false),
        real("weight_decay", &OC::weight_decay, 0.0), false_only("amsgrad"),
        flag("cuda_aware", &OC::cuda_aware, false),
        text("comm_backend_name", &OC::comm_backend_name, "nccl")};
    static const std::vector<P> zerooneadam = {
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
    static const std::vector<P> onebitlamb = {
        real("lr", &OC::lr, 1e-3), integer("freeze_step", &OC::freeze_step, 100000),
        flag("bias_correction", &OC::bias_correction, true), betas(0.9, 0.999),
        real("eps", &OC::eps, 1e-8), flag("eps_inside_sqrt", &OC::eps_inside_sqrt, false),
        real("weight_decay", &OC::weight_decay, 0.0), real("max_coeff", &OC::max_coeff, 10.0),
        real("min_coeff", &OC::min_coeff, 0.01), false_only("amsgrad"),
        flag("cuda_aware", &OC::cuda_aware, false),
        text("comm_backend_name", &OC::comm_backend_name, "nccl"),
        real("coeff_beta", &OC::coeff_beta, 0.9, 0.0, 1.0), real("factor_max", &OC::factor_max, 4.0),
        real("factor_min", &OC::factor_min, 0.5), real("factor_threshold", &OC::factor_threshold, 0.1)};
    return rows_of<OC>(type, {{"adam", &adam}, {"adamw", &adam}, {"lamb", &lamb}, {"lion", &lion}, {"SGD", &sgd},
                              {"adagrad", &adagrad}, {"onebitadam", &onebitadam}, {"zerooneadam", &zerooneadam},
                              {"onebitlamb", &onebitlamb}});
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

std::string resolve(const cJSON* v, const std::string& path) {
    return resolve_type(v, path, deepspeed_names(), true, torch_names(), "optimizer", "",
                        "DeepSpeed names: adam, adamw, lamb, lion, adagrad, onebitadam, zerooneadam, onebitlamb, "
                        "muadam, muadamw, musgd, muon; or a torch.optim class such as SGD");
}

void reject_common(ObjectReader& r) {
    if (r.get_raw("max_grad_norm"))
        fail(DS_ERR_INVALID_CONFIG,
             "%s: not accepted in optimizer params (DeepSpeed rejects it); use the top-level gradient_clipping",
             r.key_path("max_grad_norm").c_str());
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
void reject_amsgrad(ObjectReader& r, const cJSON* c) {
    if (std::strcmp(c->string, "amsgrad") == 0 && cJSON_IsTrue(c))
        fail(DS_ERR_INVALID_CONFIG, "%s: true is not accepted", r.key_path("amsgrad").c_str());
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
    o.type = resolve(type, r.key_path("type"));
    for (const P& p : params_for(o.type)) set_default(p, o);

    const std::string ppath = r.key_path("params");
    if (params && cJSON_IsNull(params)) params = nullptr;
    if (!modelled(o.type)) {
        o.opaque_params_json = opaque_params(params, ppath, reject_common, reject_amsgrad);
        return o;
    }
    if (params) {
        ObjectReader pr(params, ppath, AutoRule::Reject);
        reject_common(pr);
        for (const P& p : params_for(o.type)) read_param(pr, p, o, o.type);
        pr.finish();
    }
    if (o.type == "adamw") o.adamw_mode = true;  // effective mode: type adamw OR adam_w_mode
    validate(o, path);
    return o;
}

void write_optimizer(JsonWriter& w, const char* key, const std::optional<OptimizerConfig>& o) {
    if (!begin_typed(w, key, o, params_for)) return;
    w.value("legacy_fusion", o->legacy_fusion);
    w.end_object();
}

std::vector<ParamDoc> optimizer_param_docs() {
    std::vector<std::string> types = deepspeed_names();
    types.insert(types.end(), torch_names().begin(), torch_names().end());
    return param_docs(types, params_for);
}

}  // namespace ds::config::detail
