// The three visitors of field_visitor.h: FieldReader (parse), FieldWriter
// (to_json) and FieldTexts (values and types by key path), plus the value
// spellings they share (dtype names, upper-case choices).
#include <cctype>
#include <cmath>

#include "config/field_visitor.h"
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

std::string list_of(Choices choices) {
    std::string list;
    for (const char* c : choices) list += (list.empty() ? "" : ", ") + std::string(c);
    return list;
}

// Case-insensitive choice among upper-case names; returns the upper-case form.
std::string read_upper_choice(const cJSON* v, const std::string& path, Choices choices) {
    const std::string got = upper(as_string(v, path));
    for (const char* c : choices)
        if (got == c) return got;
    fail(DS_ERR_INVALID_CONFIG, "%s: must be one of %s (any case), got \"%s\"", path.c_str(),
         list_of(choices).c_str(), v->valuestring);
}

DType read_dtype(const cJSON* v, const std::string& path, DTypeNames n) {
    return n == DTypeNames::Alias ? parse_dtype_alias(v, path) : parse_comm_dtype(v, path);
}

// A key with a second spelling: the value under whichever was given, not both.
const cJSON* get_aliased(ObjectReader& r, const char* name, const char* alias, std::string& path) {
    const cJSON* a = r.get(name);
    const cJSON* b = r.get(alias);
    if (a && b)
        fail(DS_ERR_INVALID_CONFIG, "%s: same setting as %s; give only one", r.key_path(alias).c_str(),
             r.key_path(name).c_str());
    path = r.key_path(a ? name : alias);
    return a ? a : b;
}

// Value texts (supported.cpp's messages, the docs table).
std::string text_of(bool v) { return v ? "true" : "false"; }
std::string text_of(int64_t v) { return std::to_string(v); }
std::string text_of(double v) { return format_number(v); }
std::string text_of(const std::string& v) { return "\"" + v + "\""; }
std::string text_of(DType v) { return std::string("\"") + dtype_name(v) + "\""; }
template <class T>
std::string text_of(const std::optional<T>& v) { return v ? text_of(*v) : std::string("null"); }
template <class T>
std::string text_of(const std::vector<T>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + text_of(v[i]);
    return s + "]";
}

std::string int_type(int64_t lo, int64_t hi) {
    if (lo == kMinI && hi == kMaxI) return "int";
    if (hi == kMaxI) return "int >= " + std::to_string(lo);
    return "int in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
}

std::string real_type(double lo, double hi) {
    if (std::isinf(lo) && std::isinf(hi)) return "number";
    if (std::isinf(hi)) return "number >= " + format_number(lo);
    return "number in [" + format_number(lo) + ", " + format_number(hi) + "]";
}

const char* dtype_type(DTypeNames n) {
    return n == DTypeNames::Alias ? "dtype (fp32, fp16, bf16 or a DeepSpeed alias)" : "fp32, fp16 or bf16 (any case)";
}

}  // namespace

// ---- FieldReader ----------------------------------------------------------

bool FieldReader::flag(const char* key, bool& m) { return r_.read(key, m); }
bool FieldReader::opt_flag(const char* key, std::optional<bool>& m) { return r_.read(key, m); }
bool FieldReader::integer(const char* key, int64_t& m, int64_t lo, int64_t hi) { return r_.read(key, m, lo, hi); }
bool FieldReader::opt_integer(const char* key, std::optional<int64_t>& m, int64_t lo) {
    return r_.read(key, m, lo);
}
bool FieldReader::auto_integer(const char* key, std::optional<int64_t>& m, int64_t lo) {
    const cJSON* v = r_.get_raw(key);  // "auto" is a real value here
    if (!v) return false;
    if (is_auto(v))
        m.reset();
    else
        m = as_int(v, r_.key_path(key), lo);
    return true;
}
namespace {

// A key read by `convert` (value, path) when present; the nullable form
// takes JSON null as None.
template <class T, class F>
bool read_with(ObjectReader& r, const char* key, T& m, F convert) {
    const cJSON* v = r.get(key);
    if (!v) return false;
    m = convert(v, r.key_path(key));
    return true;
}

template <class T, class F>
bool read_nullable(ObjectReader& r, const char* key, std::optional<T>& m, F convert) {
    const cJSON* v = r.get(key);
    if (!v) return false;
    if (cJSON_IsNull(v))
        m.reset();
    else
        m = convert(v, r.key_path(key));
    return true;
}

}  // namespace

bool FieldReader::integral_real(const char* key, double& m, int64_t lo, int64_t hi) {
    return read_with(r_, key, m, [&](const cJSON* v, const std::string& p) {
        return static_cast<double>(as_int(v, p, lo, hi));
    });
}
bool FieldReader::real(const char* key, double& m, double lo, double hi) { return r_.read(key, m, lo, hi); }
bool FieldReader::text(const char* key, std::string& m) { return r_.read(key, m); }
bool FieldReader::opt_text(const char* key, std::optional<std::string>& m) { return r_.read(key, m); }
bool FieldReader::upper_choice(const char* key, std::string& m, Choices c) {
    return read_with(r_, key, m, [&](const cJSON* v, const std::string& p) { return read_upper_choice(v, p, c); });
}
bool FieldReader::opt_upper_choice(const char* key, std::optional<std::string>& m, Choices c) {
    return read_nullable(r_, key, m,
                         [&](const cJSON* v, const std::string& p) { return read_upper_choice(v, p, c); });
}
bool FieldReader::dtype(const char* key, DType& m, DTypeNames n) {
    return read_with(r_, key, m, [&](const cJSON* v, const std::string& p) { return read_dtype(v, p, n); });
}
bool FieldReader::opt_dtype(const char* key, std::optional<DType>& m, DTypeNames n) {
    return read_nullable(r_, key, m, [&](const cJSON* v, const std::string& p) { return read_dtype(v, p, n); });
}
bool FieldReader::strings(const char* key, std::vector<std::string>& m) {
    return read_with(r_, key, m, as_string_list);
}
bool FieldReader::opt_strings(const char* key, std::optional<std::vector<std::string>>& m) {
    return read_nullable(r_, key, m, as_string_list);
}
bool FieldReader::integers(const char* key, std::vector<int64_t>& m, int64_t lo) {
    const cJSON* v = r_.get(key);
    if (!v) return false;
    const std::string path = r_.key_path(key);
    if (!cJSON_IsArray(v)) fail_type(path, "an array of integers", v);
    m.clear();
    int i = 0;
    for (const cJSON* e = v->child; e; e = e->next, ++i)
        m.push_back(as_int(e, format("%s[%d]", path.c_str(), i), lo));
    return true;
}
bool FieldReader::aliased_integer(const char* key, const char* alias, int64_t& m, int64_t lo) {
    std::string path;
    const cJSON* v = get_aliased(r_, key, alias, path);
    if (!v) return false;
    m = as_int(v, path, lo);
    return true;
}
bool FieldReader::aliased_flag(const char* key, const char* alias, bool& m) {
    std::string path;
    const cJSON* v = get_aliased(r_, key, alias, path);
    if (!v) return false;
    m = as_bool(v, path);
    return true;
}
void FieldReader::object(const char* key, AutoRule rule, const std::function<void(FieldVisitor&)>& body) {
    const cJSON* v = r_.get(key);
    if (!v) return;
    ObjectReader nested(v, r_.key_path(key), rule);
    FieldReader fr(nested);
    body(fr);
    nested.finish();
}
void FieldReader::section(const char* key, SectionRef& s, const char* older_name) {
    const cJSON* v = r_.get(key);
    const cJSON* older = older_name ? r_.get(older_name) : nullptr;
    if (v && older)
        fail(DS_ERR_INVALID_CONFIG, "%s: older name of %s; give only one of %s and %s",
             r_.key_path(older_name).c_str(), key, key, older_name);
    if (v) s.read(v, r_.key_path(key));
    if (older) s.read(older, r_.key_path(older_name));
}
void FieldReader::custom(const char*, const CustomField& f) {
    if (f.read) f.read(r_);
}

// ---- FieldWriter ----------------------------------------------------------

bool FieldWriter::flag(const char* key, bool& m) { return w_.value(key, m), false; }
bool FieldWriter::opt_flag(const char* key, std::optional<bool>& m) { return w_.optional(key, m), false; }
bool FieldWriter::integer(const char* key, int64_t& m, int64_t, int64_t) { return w_.value(key, m), false; }
bool FieldWriter::opt_integer(const char* key, std::optional<int64_t>& m, int64_t) {
    return w_.optional(key, m), false;
}
bool FieldWriter::auto_integer(const char* key, std::optional<int64_t>& m, int64_t) {
    if (m)
        w_.value(key, *m);
    else
        w_.value(key, "auto");
    return false;
}
bool FieldWriter::integral_real(const char* key, double& m, int64_t, int64_t) {
    return w_.value(key, static_cast<int64_t>(m)), false;
}
bool FieldWriter::real(const char* key, double& m, double, double) { return w_.value(key, m), false; }
bool FieldWriter::text(const char* key, std::string& m) { return w_.value(key, m), false; }
bool FieldWriter::opt_text(const char* key, std::optional<std::string>& m) { return w_.optional(key, m), false; }
bool FieldWriter::upper_choice(const char* key, std::string& m, Choices) { return w_.value(key, m), false; }
bool FieldWriter::opt_upper_choice(const char* key, std::optional<std::string>& m, Choices) {
    return w_.optional(key, m), false;
}
bool FieldWriter::dtype(const char* key, DType& m, DTypeNames) { return w_.value(key, dtype_name(m)), false; }
bool FieldWriter::opt_dtype(const char* key, std::optional<DType>& m, DTypeNames) {
    if (m)
        w_.value(key, dtype_name(*m));
    else
        w_.null(key);
    return false;
}
bool FieldWriter::strings(const char* key, std::vector<std::string>& m) {
    w_.begin_array(key);
    for (const auto& s : m) w_.value("", s);
    w_.end_array();
    return false;
}
bool FieldWriter::opt_strings(const char* key, std::optional<std::vector<std::string>>& m) {
    if (m) return strings(key, *m);
    w_.null(key);
    return false;
}
bool FieldWriter::integers(const char* key, std::vector<int64_t>& m, int64_t) {
    w_.begin_array(key);
    for (int64_t v : m) w_.value("", v);
    w_.end_array();
    return false;
}
bool FieldWriter::aliased_integer(const char* key, const char*, int64_t& m, int64_t) {
    return w_.value(key, m), false;
}
bool FieldWriter::aliased_flag(const char* key, const char*, bool& m) { return w_.value(key, m), false; }
void FieldWriter::object(const char* key, AutoRule, const std::function<void(FieldVisitor&)>& body) {
    w_.begin_object(key);
    body(*this);
    w_.end_object();
}
void FieldWriter::section(const char* key, SectionRef& s, const char*) { s.write(w_, key); }
void FieldWriter::custom(const char* key, const CustomField& f) {
    if (f.write) f.write(w_, key);
}

// ---- FieldTexts -----------------------------------------------------------

bool FieldTexts::add(const char* key, std::string type, std::string value, const char* alias_of) {
    rows_.push_back({key_path(key), std::move(type), std::move(value), false, alias_of});
    return false;
}
bool FieldTexts::flag(const char* key, bool& m) { return add(key, "bool", text_of(m)); }
bool FieldTexts::opt_flag(const char* key, std::optional<bool>& m) { return add(key, "bool or null", text_of(m)); }
bool FieldTexts::integer(const char* key, int64_t& m, int64_t lo, int64_t hi) {
    return add(key, int_type(lo, hi), text_of(m));
}
bool FieldTexts::opt_integer(const char* key, std::optional<int64_t>& m, int64_t lo) {
    return add(key, int_type(lo, kMaxI) + " or null", text_of(m));
}
bool FieldTexts::auto_integer(const char* key, std::optional<int64_t>& m, int64_t lo) {
    return add(key, "\"auto\" or " + int_type(lo, kMaxI), text_of(m));
}
bool FieldTexts::integral_real(const char* key, double& m, int64_t lo, int64_t hi) {
    return add(key, int_type(lo, hi), text_of(static_cast<int64_t>(m)));
}
bool FieldTexts::real(const char* key, double& m, double lo, double hi) { return add(key, real_type(lo, hi), text_of(m)); }
bool FieldTexts::text(const char* key, std::string& m) { return add(key, "string", text_of(m)); }
bool FieldTexts::opt_text(const char* key, std::optional<std::string>& m) {
    return add(key, "string or null", text_of(m));
}
bool FieldTexts::upper_choice(const char* key, std::string& m, Choices c) {
    return add(key, "one of " + list_of(c) + " (any case)", text_of(m));
}
bool FieldTexts::opt_upper_choice(const char* key, std::optional<std::string>& m, Choices c) {
    return add(key, "one of " + list_of(c) + " (any case) or null", text_of(m));
}
bool FieldTexts::dtype(const char* key, DType& m, DTypeNames n) { return add(key, dtype_type(n), text_of(m)); }
bool FieldTexts::opt_dtype(const char* key, std::optional<DType>& m, DTypeNames n) {
    return add(key, std::string(dtype_type(n)) + " or null", text_of(m));
}
bool FieldTexts::strings(const char* key, std::vector<std::string>& m) {
    return add(key, "list of strings", text_of(m));
}
bool FieldTexts::opt_strings(const char* key, std::optional<std::vector<std::string>>& m) {
    return add(key, "list of strings or null", m ? text_of(*m) : std::string("null"));
}
bool FieldTexts::integers(const char* key, std::vector<int64_t>& m, int64_t lo) {
    return add(key, "list of " + int_type(lo, kMaxI), text_of(m));
}
bool FieldTexts::aliased_integer(const char* key, const char* alias, int64_t& m, int64_t lo) {
    add(key, int_type(lo, kMaxI), text_of(m));
    return add(alias, "alias", "", key);
}
bool FieldTexts::aliased_flag(const char* key, const char* alias, bool& m) {
    add(key, "bool", text_of(m));
    return add(alias, "alias", "", key);
}
void FieldTexts::object(const char* key, AutoRule, const std::function<void(FieldVisitor&)>& body) {
    rows_.push_back({key_path(key), "object", "an object", true, nullptr});
    FieldTexts nested(expand_, key_path(key));
    body(nested);
    rows_.insert(rows_.end(), nested.rows_.begin(), nested.rows_.end());
}
void FieldTexts::section(const char* key, SectionRef& s, const char* older_name) {
    rows_.push_back({key_path(key), s.optional() ? "object or null" : "object",
                     s.present() ? "an object" : "null", true, nullptr});
    if (older_name) add(older_name, "alias", "", key);
    FieldTexts nested(expand_, key_path(key));
    if (s.present())
        s.visit(nested);
    else if (expand_)
        s.visit_default(nested);
    rows_.insert(rows_.end(), nested.rows_.begin(), nested.rows_.end());
}
void FieldTexts::custom(const char* key, const CustomField& f) {
    add(key, f.type, f.value_text ? f.value_text() : f.default_text);
}

// ---- texts by path --------------------------------------------------------

bool same_value_text(const std::string& a, const std::string& b) {
    // -0.0 == 0.0 as values (the one pair of equal doubles with two texts).
    auto norm = [](const std::string& s) -> const std::string& {
        static const std::string zero = "0.0";
        return s == "-0.0" ? zero : s;
    };
    return norm(a) == norm(b);
}

std::map<std::string, std::string> value_texts(const Config& c) {
    FieldTexts t(false);
    visit(t, const_cast<Config&>(c));  // FieldTexts only reads
    std::map<std::string, std::string> out;
    for (const FieldText& r : t.rows())
        if (!r.alias_of) out.emplace(r.path, r.value);
    return out;
}

const std::map<std::string, std::string>& default_texts() {
    static const std::map<std::string, std::string> texts = [] {
        Config def;
        FieldTexts t(true);
        visit(t, def);
        std::map<std::string, std::string> out;
        for (const FieldText& r : t.rows())
            if (!r.alias_of) out.emplace(r.path, r.value);
        return out;
    }();
    return texts;
}

// ---- dtype spellings ------------------------------------------------------

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

}  // namespace ds::config::detail
