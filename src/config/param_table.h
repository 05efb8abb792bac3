// One mechanism for the per-type param tables of `optimizer` and
// `scheduler`: a Param<S> row names a key of `params`, the member of S it
// fills, its default for that type (defaults differ between types, so they
// live in the row, not in the struct), its range and rules. The same rows
// set the defaults, read the JSON, write to_json and describe the key in the
// docs table. Keys no kind fits (optimizer betas, amsgrad; scheduler
// warmup_type) are Special rows with their own functions.
#pragma once

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "config/json_reader.h"
#include "core/json/json_writer.h"
#include "core/error.h"

namespace ds::config::detail {

template <class S>
struct Param;

// Functions of a Special row (def/def2 are the row's defaults).
template <class S>
struct ParamSpecial {
    void (*set_default)(const Param<S>& p, S& s);
    void (*read)(const cJSON* v, const std::string& path, S& s);
    void (*write)(JsonWriter& w, const Param<S>& p, const S& s);
    const char* type;  // for the docs
    std::string (*default_text)(const Param<S>& p);
};

template <class S>
struct Param {
    enum class Kind { Real, OptReal, Int, OptInt, Bool, Str, Special };
    const char* name;
    Kind kind;
    double S::*d = nullptr;
    std::optional<double> S::*od = nullptr;
    int64_t S::*i = nullptr;
    std::optional<int64_t> S::*oi = nullptr;
    bool S::*b = nullptr;
    std::string S::*s = nullptr;
    const ParamSpecial<S>* special = nullptr;
    double def = 0.0, def2 = 0.0;  // NaN for OptReal/OptInt: None
    const char* def_s = nullptr;
    double lo = 0.0, hi = std::numeric_limits<double>::infinity();
    bool required = false;   // no default: must be given
    bool per_group = false;  // DeepSpeed also takes a per-param-group list here
    bool auto_ok = false;    // "auto" => None (warmup_max_lr: the optimizer's lr)

    Param need() const { Param p = *this; p.required = true; return p; }
    Param group() const { Param p = *this; p.per_group = true; return p; }
    Param auto_none() const { Param p = *this; p.auto_ok = true; return p; }
};

inline constexpr double kParamNone = std::numeric_limits<double>::quiet_NaN();

// ---- row builders (S deduced from the member) ----------------------------

template <class S>
Param<S> real(const char* n, double S::*m, double def, double lo = 0.0,
              double hi = std::numeric_limits<double>::infinity()) {
    Param<S> p{n, Param<S>::Kind::Real};
    p.d = m, p.def = def, p.lo = lo, p.hi = hi;
    return p;
}
template <class S>
Param<S> opt_real(const char* n, std::optional<double> S::*m, double def) {
    Param<S> p{n, Param<S>::Kind::OptReal};
    p.od = m, p.def = def;
    return p;
}
template <class S>
Param<S> integer(const char* n, int64_t S::*m, int64_t def, int64_t lo = 0) {
    Param<S> p{n, Param<S>::Kind::Int};
    p.i = m, p.def = static_cast<double>(def), p.lo = static_cast<double>(lo);
    return p;
}
template <class S>
Param<S> opt_integer(const char* n, std::optional<int64_t> S::*m, int64_t lo) {
    Param<S> p{n, Param<S>::Kind::OptInt};
    p.oi = m, p.def = kParamNone, p.lo = static_cast<double>(lo);
    return p;
}
template <class S>
Param<S> flag(const char* n, bool S::*m, bool def) {
    Param<S> p{n, Param<S>::Kind::Bool};
    p.b = m, p.def = def ? 1.0 : 0.0;
    return p;
}
template <class S>
Param<S> text(const char* n, std::string S::*m, const char* def) {
    Param<S> p{n, Param<S>::Kind::Str};
    p.s = m, p.def_s = def;
    return p;
}
template <class S>
Param<S> special(const char* n, const ParamSpecial<S>& sp, double def = 0.0, double def2 = 0.0) {
    Param<S> p{n, Param<S>::Kind::Special};
    p.special = &sp, p.def = def, p.def2 = def2;
    return p;
}

// The rows of `type` among (type name, rows) pairs; none for another type.
template <class S>
struct TypeRows {
    const char* type;
    const std::vector<Param<S>>* rows;
};
template <class S>
const std::vector<Param<S>>& rows_of(const std::string& type, std::initializer_list<TypeRows<S>> table) {
    static const std::vector<Param<S>> none;
    for (const TypeRows<S>& t : table)
        if (type == t.type) return *t.rows;
    return none;
}

// ---- what the rows drive ---------------------------------------------------

template <class S>
void set_default(const Param<S>& p, S& s) {
    using K = typename Param<S>::Kind;
    switch (p.kind) {
        case K::Real: s.*p.d = p.def; break;
        case K::OptReal:
            if (std::isnan(p.def))
                (s.*p.od).reset();
            else
                s.*p.od = p.def;
            break;
        case K::Int: s.*p.i = static_cast<int64_t>(p.def); break;
        case K::OptInt: (s.*p.oi).reset(); break;
        case K::Bool: s.*p.b = p.def != 0.0; break;
        case K::Str: s.*p.s = p.def_s; break;
        case K::Special: p.special->set_default(p, s); break;
    }
}

// Reads one row's key from `params` (absent: the default stays). `type`
// names the optimizer/scheduler type in "required for" messages.
template <class S>
void read_param(ObjectReader& r, const Param<S>& p, S& s, const std::string& type) {
    using K = typename Param<S>::Kind;
    const std::string path = r.key_path(p.name);
    const cJSON* v = r.get_raw(p.name);
    if (is_auto(v)) {
        if (!p.auto_ok) fail_auto(path);
        (s.*p.od).reset();  // derived later (warmup_max_lr: the optimizer's lr)
        return;
    }
    if (!v) {
        DS_CHECK(!p.required, DS_ERR_INVALID_CONFIG, "%s: required for %s", path.c_str(), type.c_str());
        return;
    }
    if (p.per_group && cJSON_IsArray(v))
        fail(DS_ERR_UNSUPPORTED, "%s: per-parameter-group lists are not supported (give one number)",
             path.c_str());
    switch (p.kind) {
        case K::Real: s.*p.d = as_double(v, path, p.lo, p.hi); break;
        case K::OptReal:
            if (cJSON_IsNull(v))
                (s.*p.od).reset();
            else
                s.*p.od = as_double(v, path, p.lo, p.hi);
            break;
        case K::Int: s.*p.i = as_int(v, path, static_cast<int64_t>(p.lo)); break;
        case K::OptInt:
            if (cJSON_IsNull(v)) {
                DS_CHECK(!p.required, DS_ERR_INVALID_CONFIG, "%s: required for %s (null given)", path.c_str(),
                         type.c_str());
                (s.*p.oi).reset();
            } else {
                s.*p.oi = as_int(v, path, static_cast<int64_t>(p.lo));
            }
            break;
        case K::Bool: s.*p.b = as_bool(v, path); break;
        case K::Str: s.*p.s = as_string(v, path); break;
        case K::Special: p.special->read(v, path, s); break;
    }
}

template <class S>
void write_param(JsonWriter& w, const Param<S>& p, const S& s) {
    using K = typename Param<S>::Kind;
    switch (p.kind) {
        case K::Real: w.value(p.name, s.*p.d); break;
        case K::OptReal: w.optional(p.name, s.*p.od); break;
        case K::Int: w.value(p.name, s.*p.i); break;
        case K::OptInt: w.optional(p.name, s.*p.oi); break;
        case K::Bool: w.value(p.name, s.*p.b); break;
        case K::Str: w.value(p.name, s.*p.s); break;
        case K::Special: p.special->write(w, p, s); break;
    }
}

// `key`: null for None, else an object opened with "type" and "params" (the
// rows of a modelled type, or the opaque JSON kept verbatim); the caller
// adds its other keys and closes it. False when null was written.
template <class S>
bool begin_typed(JsonWriter& w, const char* key, const std::optional<S>& s,
                 const std::vector<Param<S>>& (*rows_for)(const std::string&)) {
    if (!s) {
        w.null(key);
        return false;
    }
    w.begin_object(key);
    w.value("type", s->type);
    const std::vector<Param<S>>& rows = rows_for(s->type);
    if (rows.empty()) {
        w.raw("params", s->opaque_params_json.empty() ? "{}" : s->opaque_params_json);
        return true;
    }
    w.begin_object("params");
    for (const Param<S>& p : rows) write_param(w, p, *s);
    w.end_object();
    return true;
}

// For the docs table: the row's type and default as text.
template <class S>
std::string param_type(const Param<S>& p) {
    using K = typename Param<S>::Kind;
    std::string t;
    const std::string lo = format_number(p.lo), hi = format_number(p.hi);
    const std::string range = std::isinf(p.hi) ? " >= " + lo : " in [" + lo + ", " + hi + "]";
    switch (p.kind) {
        case K::Real: t = std::isinf(p.lo) && std::isinf(p.hi) ? "number" : "number" + range; break;
        case K::OptReal: t = "number" + range + " or null"; break;
        case K::Int: t = "int >= " + std::to_string(static_cast<int64_t>(p.lo)); break;
        case K::OptInt: t = "int >= " + std::to_string(static_cast<int64_t>(p.lo)) + " or null"; break;
        case K::Bool: t = "bool"; break;
        case K::Str: t = "string"; break;
        case K::Special: t = p.special->type; break;
    }
    if (p.per_group) t += " (one value, not per group)";
    if (p.auto_ok) t += ", \"auto\"";
    return t;
}

template <class S>
std::string param_default(const Param<S>& p) {
    using K = typename Param<S>::Kind;
    if (p.required) return "required";
    switch (p.kind) {
        case K::Real: return format_number(p.def);
        case K::OptReal: return std::isnan(p.def) ? "null" : format_number(p.def);
        case K::Int: return std::to_string(static_cast<int64_t>(p.def));
        case K::OptInt: return "null";
        case K::Bool: return p.def != 0.0 ? "true" : "false";
        case K::Str: return std::string("\"") + p.def_s + "\"";
        case K::Special: return p.special->default_text(p);
    }
    return "";
}

// Docs rows of one params object: every key of every modelled type, with
// its type and its default per type ("adam, adamw: 0.001; adagrad: 0.01").
struct ParamDoc {
    std::string key;
    std::string type;
    std::string defaults;
};

template <class S>
std::vector<ParamDoc> param_docs(const std::vector<std::string>& types,
                                 const std::vector<Param<S>>& (*rows_for)(const std::string&)) {
    struct Acc {
        std::string key;
        std::vector<std::string> types_text;                                 // distinct, in order
        std::vector<std::pair<std::string, std::vector<std::string>>> defs;  // default -> types
    };
    std::vector<Acc> acc;
    for (const std::string& t : types) {
        for (const Param<S>& p : rows_for(t)) {
            auto a = std::find_if(acc.begin(), acc.end(), [&](const Acc& x) { return x.key == p.name; });
            if (a == acc.end()) a = acc.insert(acc.end(), Acc{p.name, {}, {}});
            const std::string ty = param_type(p), def = param_default(p);
            if (std::find(a->types_text.begin(), a->types_text.end(), ty) == a->types_text.end())
                a->types_text.push_back(ty);
            auto d = std::find_if(a->defs.begin(), a->defs.end(), [&](const auto& x) { return x.first == def; });
            if (d == a->defs.end()) d = a->defs.insert(a->defs.end(), {def, {}});
            d->second.push_back(t);
        }
    }
    std::vector<ParamDoc> out;
    for (const Acc& a : acc) {
        ParamDoc doc{a.key, {}, {}};
        for (const std::string& ty : a.types_text) doc.type += (doc.type.empty() ? "" : "; ") + ty;
        for (const auto& [def, ts] : a.defs) {
            std::string names;
            for (const std::string& t : ts) names += (names.empty() ? "" : ", ") + t;
            doc.defaults += (doc.defaults.empty() ? "" : "; ") + names + ": " + def;
        }
        out.push_back(doc);
    }
    return out;
}

// The type named by `v`: one of `names` (compared lower-cased when
// `fold_case`, returned lower case) or, exact case, one of `torch_names`;
// else INVALID_CONFIG with a suggestion (`noun`: "optimizer"/"scheduler",
// `case_note` after the name, `known` listing the names when none is close).
std::string resolve_type(const cJSON* v, const std::string& path, const std::vector<std::string>& names,
                         bool fold_case, const std::vector<std::string>& torch_names, const char* noun,
                         const char* case_note, const char* known);

// The docs rows of optimizer.params and scheduler.params (optimizer_config.cpp,
// scheduler_config.cpp).
std::vector<ParamDoc> optimizer_param_docs();
std::vector<ParamDoc> scheduler_param_docs();

// Params of a type this library does not model (null: none): kept
// verbatim as compact JSON ("{}" when none); every key is marked known
// ("auto" rejected); `check` runs first on the reader, `each` on every key
// (either may be null).
std::string opaque_params(const cJSON* params, const std::string& path, void (*check)(ObjectReader&),
                          void (*each)(ObjectReader&, const cJSON*));

}  // namespace ds::config::detail
