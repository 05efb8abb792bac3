// The non-template parts of param_table.h: type names and opaque params,
// shared by optimizer_config.cpp and scheduler_config.cpp.
#include "config/param_table.h"

#include <cctype>

#include "config/parse_internal.h"

namespace ds::config::detail {

std::string resolve_type(const cJSON* v, const std::string& path, const std::vector<std::string>& names,
                         bool fold_case, const std::vector<std::string>& torch_names, const char* noun,
                         const char* case_note, const char* known) {
    const std::string given = as_string(v, path);
    std::string folded = given;
    if (fold_case)
        for (char& c : folded) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (const auto& n : names)
        if (n == folded) return folded;
    for (const auto& n : torch_names)
        if (n == given) return given;
    std::vector<std::string> all = names;
    all.insert(all.end(), torch_names.begin(), torch_names.end());
    const std::string best = closest_match(given, all);
    if (!best.empty())
        fail(DS_ERR_INVALID_CONFIG, "%s: unknown %s \"%s\"%s; did you mean \"%s\"?", path.c_str(), noun,
             given.c_str(), case_note, best.c_str());
    fail(DS_ERR_INVALID_CONFIG, "%s: unknown %s \"%s\" (%s)", path.c_str(), noun, given.c_str(), known);
}

std::string opaque_params(const cJSON* params, const std::string& path, void (*check)(ObjectReader&),
                          void (*each)(ObjectReader&, const cJSON*)) {
    if (!params) return "{}";
    ObjectReader r(params, path, AutoRule::Reject);
    if (check) check(r);
    for (const cJSON* c = params->child; c; c = c->next) {
        r.get(c->string);  // rejects "auto"; marks known
        if (each) each(r, c);
    }
    return compact_json(params);
}

}  // namespace ds::config::detail
