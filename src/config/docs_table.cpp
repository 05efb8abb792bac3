// The key table of docs/CONFIG.md, generated from the declarations: every
// key of every section (field_visitor.h) and of optimizer/scheduler params
// (param_table.h) with its type, its default and its class
// (classify_key). tests/unit/test_config_docs_table.cpp fails when the
// table in the docs differs (DS_UPDATE_DOCS=1 rewrites it).
#include <algorithm>
#include <cstring>

#include "config/field_visitor.h"
#include "config/param_table.h"
#include "config/parse_internal.h"

namespace ds::config::detail {

namespace {

const char* class_name(KeyClass k) {
    switch (k) {
        case KeyClass::Implemented: return "implemented";
        case KeyClass::Unsupported: return "unsupported";
        case KeyClass::Ignored: return "ignored";
        case KeyClass::Unclassified: break;
    }
    return "unclassified";
}

// A policy() key is implemented for the values the engine runs and refused
// for the ones the "What the engine runs today" table lists: "partial".
std::string class_of(const std::string& key) {
    static const std::vector<std::string> policy = policy_keys();
    const KeyClass k = classify_key(key);
    if (k == KeyClass::Unsupported && std::find(policy.begin(), policy.end(), key) != policy.end())
        return "partial (see \"What the engine runs today\")";
    return class_name(k);
}

void row(std::string& out, const std::string& key, const std::string& type, const std::string& def) {
    out += "| `" + key + "` | " + type + " | " + (def.empty() ? "—" : "`" + def + "`") + " | " + class_of(key) +
           " |\n";
}

void param_rows(std::string& out, const char* object, const std::vector<ParamDoc>& docs) {
    for (const ParamDoc& d : docs) {
        const std::string key = std::string(object) + ".params." + d.key;
        out += "| `" + key + "` | " + d.type + " | " + d.defaults + " | " + class_of(key) + " |\n";
    }
}

}  // namespace

std::string keys_table_markdown() {
    std::string out = "| key | type | default | class |\n|---|---|---|---|\n";
    Config def;
    FieldTexts t(true);
    visit(t, def);
    for (const FieldText& r : t.rows()) {
        if (r.alias_of) {
            row(out, r.path, std::string("older name of `") + r.alias_of + "`", "");
            continue;
        }
        // An object's default is its keys' (an optional one's is null).
        row(out, r.path, r.type, r.is_object && r.value != "null" ? "" : r.value);
        if (r.path == "optimizer") {
            row(out, "optimizer.type", "DeepSpeed name (any case) or torch.optim class (exact case)", "required");
            row(out, "optimizer.params", "object: the type's params (kept verbatim for types not modelled)", "");
            param_rows(out, "optimizer", optimizer_param_docs());
            row(out, "optimizer.params.max_grad_norm", "refused (DeepSpeed rejects it; use gradient_clipping)", "");
            row(out, "optimizer.legacy_fusion", "bool", "false");
        } else if (r.path == "scheduler") {
            row(out, "scheduler.type", "DeepSpeed scheduler or torch.optim.lr_scheduler class (exact case)",
                "required");
            row(out, "scheduler.params", "object: the type's params (kept verbatim for torch classes)", "");
            param_rows(out, "scheduler", scheduler_param_docs());
        }
    }
    for (const char* k : out_of_scope_keys())
        row(out, k,
            std::strcmp(k, "sparse_attention") == 0 ? "out of scope: never accepted"
                                                    : "out of scope: only `{}` or `{\"enabled\": false}`",
            "");
    return out;
}

}  // namespace ds::config::detail
