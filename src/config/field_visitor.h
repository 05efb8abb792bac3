// The one declaration of each config section's fields. A section is
// declared by `void visit(FieldVisitor& v, Section& s)` (config_fields*.cpp):
// one call per key, in to_json order, naming the key, the member, its range
// and its spelling rules; the member's initializer in config.h is the
// default. The visitors below turn that one list into
//   - parsing (FieldReader: types, ranges, choices, aliases, the messages
//     naming the key path, unknown keys),
//   - the resolved JSON (FieldWriter, to_json),
//   - value texts by key path (FieldTexts: supported.cpp's "differs from its
//     default" and "ignored" rows, the disabled-only sections, the docs table
//     in docs/CONFIG.md that tests/unit/test_config_docs_table.cpp checks).
// A key no field kind fits is a `custom` field: its reader and writer are
// written by hand next to the declaration.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/json_reader.h"
#include "core/json/json_writer.h"

namespace ds::config::detail {

inline constexpr int64_t kMinI = std::numeric_limits<int64_t>::min();
inline constexpr int64_t kMaxI = std::numeric_limits<int64_t>::max();
inline constexpr double kInf = std::numeric_limits<double>::infinity();

// Which dtype spellings a dtype key takes (parse_dtype_alias / parse_comm_dtype).
enum class DTypeNames { Alias, Comm };

using Choices = std::initializer_list<const char*>;

class FieldVisitor;

// A nested section (a struct with its own visit()), optional or not.
struct SectionRef {
    virtual ~SectionRef() = default;
    virtual bool optional() const = 0;              // JSON null reads as None
    virtual bool present() const = 0;               // false: an optional section holding None
    virtual void read(const cJSON* v, const std::string& path) = 0;  // v non-null
    virtual void write(JsonWriter& w, const char* key) const = 0;
    virtual void visit(FieldVisitor& v) = 0;        // present() only
    virtual void visit_default(FieldVisitor& v) const = 0;  // the section's defaults
};

// A key read and written by hand. Empty read: the key is written only (a
// resolved value); empty write: read only (deprecated spellings). `type`
// and `default_text` describe it in the docs table; `value_text` gives its
// value for FieldTexts (empty: none).
struct CustomField {
    std::function<void(ObjectReader&)> read;
    std::function<void(JsonWriter&, const char* key)> write;
    const char* type = "";
    std::string default_text;
    std::function<std::string()> value_text;
};

class FieldVisitor {
public:
    virtual ~FieldVisitor() = default;
    // Each returns true when a value was read from the JSON (only the reader
    // reads), so a declaration can check a value right after reading it.
    virtual bool flag(const char* key, bool& m) = 0;
    virtual bool opt_flag(const char* key, std::optional<bool>& m) = 0;
    virtual bool integer(const char* key, int64_t& m, int64_t lo = kMinI, int64_t hi = kMaxI) = 0;
    virtual bool opt_integer(const char* key, std::optional<int64_t>& m, int64_t lo = kMinI) = 0;
    // "auto" (None) or an integer >= lo: pipeline.stages.
    virtual bool auto_integer(const char* key, std::optional<int64_t>& m, int64_t lo) = 0;
    // An integer in [lo, hi] held as a double: fp16.min_loss_scale.
    virtual bool integral_real(const char* key, double& m, int64_t lo, int64_t hi) = 0;
    virtual bool real(const char* key, double& m, double lo = -kInf, double hi = kInf) = 0;
    virtual bool text(const char* key, std::string& m) = 0;
    virtual bool opt_text(const char* key, std::optional<std::string>& m) = 0;
    // Case-insensitive choice stored upper case; the optional form takes null.
    virtual bool upper_choice(const char* key, std::string& m, Choices c) = 0;
    virtual bool opt_upper_choice(const char* key, std::optional<std::string>& m, Choices c) = 0;
    virtual bool dtype(const char* key, DType& m, DTypeNames n) = 0;
    virtual bool opt_dtype(const char* key, std::optional<DType>& m, DTypeNames n) = 0;
    virtual bool strings(const char* key, std::vector<std::string>& m) = 0;
    virtual bool opt_strings(const char* key, std::optional<std::vector<std::string>>& m) = 0;
    virtual bool integers(const char* key, std::vector<int64_t>& m, int64_t lo) = 0;
    // A key with a second accepted spelling (pydantic alias): either, not both.
    virtual bool aliased_integer(const char* key, const char* alias, int64_t& m, int64_t lo) = 0;
    virtual bool aliased_flag(const char* key, const char* alias, bool& m) = 0;
    // A nested object whose keys are members of this struct (timers.throughput).
    virtual void object(const char* key, AutoRule rule, const std::function<void(FieldVisitor&)>& body) = 0;
    // A nested section; `older_name`: a second spelling of the key, not both (bfloat16).
    virtual void section(const char* key, SectionRef& s, const char* older_name = nullptr) = 0;
    virtual void custom(const char* key, const CustomField& f) = 0;
    // The dotted path of `key` (for messages of checks in a declaration).
    virtual std::string key_path(const char* key) const = 0;
};

// ---- per-section declarations (config_fields_*.cpp) ----------------------
// visit() lists the fields; auto_rule() is how "auto" reads in the section;
// validate() checks across fields after the section was read.
void visit(FieldVisitor& v, Fp16Config& s);
void visit(FieldVisitor& v, Bf16Config& s);
void visit(FieldVisitor& v, OffloadParamConfig& s);
void visit(FieldVisitor& v, OffloadOptimizerConfig& s);
void visit(FieldVisitor& v, ZeroConfig::LocoParams& s);
void visit(FieldVisitor& v, ZeroConfig& s);
void visit(FieldVisitor& v, DataTypesConfig& s);
void visit(FieldVisitor& v, ActivationCheckpointingConfig& s);
void visit(FieldVisitor& v, FlopsProfilerConfig& s);
void visit(FieldVisitor& v, FileMonitorConfig& s);
void visit(FieldVisitor& v, WandbConfig& s);
void visit(FieldVisitor& v, CometConfig& s);
void visit(FieldVisitor& v, CommsLoggerConfig& s);
void visit(FieldVisitor& v, TimersConfig& s);
void visit(FieldVisitor& v, CheckpointWriterConfig& s);
void visit(FieldVisitor& v, CheckpointConfig& s);
void visit(FieldVisitor& v, AioConfig& s);
void visit(FieldVisitor& v, PipelineConfig& s);
void visit(FieldVisitor& v, TensorParallelConfig& s);
void visit(FieldVisitor& v, TorchAutocastConfig& s);
void visit(FieldVisitor& v, AmpConfig& s);
void visit(FieldVisitor& v, ElasticityConfig& s);
void visit(FieldVisitor& v, ProgressiveLayerDropConfig& s);
void visit(FieldVisitor& v, EigenvalueConfig& s);
void visit(FieldVisitor& v, Config& c);  // the top level (config_fields_top.cpp)

// DeepSpeed's pydantic sections drop "auto" (the default); plain dicts reject it.
template <class S>
AutoRule auto_rule(const S&) { return AutoRule::Reject; }
AutoRule auto_rule(const Fp16Config&);
AutoRule auto_rule(const Bf16Config&);
AutoRule auto_rule(const OffloadParamConfig&);
AutoRule auto_rule(const OffloadOptimizerConfig&);
AutoRule auto_rule(const ZeroConfig::LocoParams&);
AutoRule auto_rule(const ZeroConfig&);
AutoRule auto_rule(const FileMonitorConfig&);
AutoRule auto_rule(const WandbConfig&);
AutoRule auto_rule(const CometConfig&);
AutoRule auto_rule(const CommsLoggerConfig&);

template <class S>
void validate(const ObjectReader&, S&) {}
void validate(const ObjectReader& r, Fp16Config& s);
void validate(const ObjectReader& r, Bf16Config& s);
void validate(const ObjectReader& r, OffloadParamConfig& s);
void validate(const ObjectReader& r, ZeroConfig& s);
void validate(const ObjectReader& r, OffloadOptimizerConfig& s);
void validate(const ObjectReader& r, ActivationCheckpointingConfig& s);
void validate(const ObjectReader& r, ElasticityConfig& s);
void validate(const ObjectReader& r, ProgressiveLayerDropConfig& s);
void validate(const ObjectReader& r, EigenvalueConfig& s);

// ---- the visitors (config_visitors.cpp) ----------------------------------

// The overrides of every visitor below (one list; the base class documents them).
#define DS_FIELD_VISITOR_OVERRIDES \
    bool flag(const char* key, bool& m) override; \
    bool opt_flag(const char* key, std::optional<bool>& m) override; \
    bool integer(const char* key, int64_t& m, int64_t lo, int64_t hi) override; \
    bool opt_integer(const char* key, std::optional<int64_t>& m, int64_t lo) override; \
    bool auto_integer(const char* key, std::optional<int64_t>& m, int64_t lo) override; \
    bool integral_real(const char* key, double& m, int64_t lo, int64_t hi) override; \
    bool real(const char* key, double& m, double lo, double hi) override; \
    bool text(const char* key, std::string& m) override; \
    bool opt_text(const char* key, std::optional<std::string>& m) override; \
    bool upper_choice(const char* key, std::string& m, Choices c) override; \
    bool opt_upper_choice(const char* key, std::optional<std::string>& m, Choices c) override; \
    bool dtype(const char* key, DType& m, DTypeNames n) override; \
    bool opt_dtype(const char* key, std::optional<DType>& m, DTypeNames n) override; \
    bool strings(const char* key, std::vector<std::string>& m) override; \
    bool opt_strings(const char* key, std::optional<std::vector<std::string>>& m) override; \
    bool integers(const char* key, std::vector<int64_t>& m, int64_t lo) override; \
    bool aliased_integer(const char* key, const char* alias, int64_t& m, int64_t lo) override; \
    bool aliased_flag(const char* key, const char* alias, bool& m) override; \
    void object(const char* key, AutoRule rule, const std::function<void(FieldVisitor&)>& body) override; \
    void section(const char* key, SectionRef& s, const char* older_name) override; \
    void custom(const char* key, const CustomField& f) override;

class FieldReader final : public FieldVisitor {
public:
    explicit FieldReader(ObjectReader& r) : r_(r) {}
    DS_FIELD_VISITOR_OVERRIDES
    std::string key_path(const char* key) const override { return r_.key_path(key); }

private:
    ObjectReader& r_;
};

class FieldWriter final : public FieldVisitor {
public:
    explicit FieldWriter(JsonWriter& w) : w_(w) {}
    DS_FIELD_VISITOR_OVERRIDES
    std::string key_path(const char* key) const override { return key; }

private:
    JsonWriter& w_;
};

// One row per key: its dotted path, its type (for the docs) and its value
// as text (true, 5, 0.001, "WARN", null, [2, 4, 6]; "an object" for a given
// optional section). With `expand_absent`, an optional section holding None
// is described by its defaults (the docs table); without, its keys are
// absent (a knob of an offload section not given has no value).
struct FieldText {
    std::string path;
    std::string type;
    std::string value;
    bool is_object = false;
    const char* alias_of = nullptr;  // an older spelling of another key
};

class FieldTexts final : public FieldVisitor {
public:
    explicit FieldTexts(bool expand_absent, std::string prefix = {})
        : expand_(expand_absent), prefix_(std::move(prefix)) {}
    const std::vector<FieldText>& rows() const { return rows_; }

    DS_FIELD_VISITOR_OVERRIDES
    std::string key_path(const char* key) const override { return join_path(prefix_, key); }

private:
    bool add(const char* key, std::string type, std::string value, const char* alias_of = nullptr);
    bool expand_;
    std::string prefix_;
    std::vector<FieldText> rows_;
};

// Sections whose JSON value is not only an object (zero_optimization: true,
// amp's apex keys) are read by hand; read_section is the rest.
void read_value(const cJSON* v, const std::string& path, ZeroConfig& s);
void read_value(const cJSON* v, const std::string& path, AmpConfig& s);

// Reading and writing one section through its declaration.
template <class S>
void read_section(const cJSON* v, const std::string& path, S& out) {
    ObjectReader r(v, path, auto_rule(out));
    FieldReader fr(r);
    visit(fr, out);
    r.finish();
    validate(r, out);
}

template <class S>
void read_value(const cJSON* v, const std::string& path, S& s) {
    read_section(v, path, s);
}

template <class S>
void write_section(JsonWriter& w, const char* key, S& s) {
    w.begin_object(key);
    FieldWriter fw(w);
    visit(fw, s);
    w.end_object();
}

// SectionRef over a member section (always present).
template <class S>
struct SectionOf final : SectionRef {
    explicit SectionOf(S& s) : s_(s) {}
    bool optional() const override { return false; }
    bool present() const override { return true; }
    void read(const cJSON* v, const std::string& path) override { read_value(v, path, s_); }
    void write(JsonWriter& w, const char* key) const override { write_section(w, key, s_); }
    void visit(FieldVisitor& v) override { detail::visit(v, s_); }
    void visit_default(FieldVisitor& v) const override {
        S d{};
        detail::visit(v, d);
    }
    S& s_;
};

// SectionRef over an optional section: JSON null or absent => None.
template <class S>
struct OptionalSectionOf final : SectionRef {
    explicit OptionalSectionOf(std::optional<S>& s) : s_(s) {}
    bool optional() const override { return true; }
    bool present() const override { return s_.has_value(); }
    void read(const cJSON* v, const std::string& path) override {
        if (cJSON_IsNull(v)) return;
        S s;
        read_section(v, path, s);
        s_ = s;
    }
    void write(JsonWriter& w, const char* key) const override {
        if (s_)
            write_section(w, key, *s_);
        else
            w.null(key);
    }
    void visit(FieldVisitor& v) override { detail::visit(v, *s_); }
    void visit_default(FieldVisitor& v) const override {
        S d{};
        detail::visit(v, d);
    }
    std::optional<S>& s_;
};

// Whether two value texts are the same value (-0.0 is 0.0).
bool same_value_text(const std::string& a, const std::string& b);

// docs/CONFIG.md's key table (docs_table.cpp): key, type, default, class.
std::string keys_table_markdown();

// Value texts of a whole config by dotted path (FieldTexts without expansion).
std::map<std::string, std::string> value_texts(const Config& c);
// The same for the default config, optional sections expanded to their defaults.
const std::map<std::string, std::string>& default_texts();

}  // namespace ds::config::detail
