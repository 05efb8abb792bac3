// to_json(): the fully resolved config, every key DeepSpeed knows in the
// parsed sections with its value or default, in DEEPSPEED_SEMANTICS.md's order
// (§1.2), written from the field declarations (config_fields_*.cpp). The
// output is itself a valid input of parse().
#include "config/config.h"
#include "config/field_visitor.h"
#include "config/parse_internal.h"

namespace ds::config {

std::string to_json(const Config& c) {
    detail::JsonWriter w;
    w.begin_object();
    detail::FieldWriter fields(w);
    detail::visit(fields, const_cast<Config&>(c));  // FieldWriter only reads
    // Settings accepted with no effect here, with the reason (only when there
    // are any). parse() accepts this entry back and drops it: the keys listed
    // are also above with their values, so a re-parse lists them again.
    const std::vector<IgnoredSetting> ignored = ignored_settings(c);
    if (!ignored.empty()) {
        w.begin_object("ignored");
        for (const IgnoredSetting& i : ignored) w.value(i.key.c_str(), i.why);
        w.end_object();
    }
    w.end_object();
    return w.str();
}

}  // namespace ds::config
