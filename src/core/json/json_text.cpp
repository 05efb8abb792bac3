#include "core/json/json_text.h"

#include <string>
#include <string_view>
#include <unordered_set>

#include "core/error.h"
#include "core/json/json_messages.h"

namespace ds::json {

JsonPtr parse_text(std::string_view text, const TextErrors& errors) {
    check_syntax(text, errors);  // precise line/column; cJSON then cannot fail on syntax
    std::string buf(text);    // NUL-terminated copy
    const char* end = nullptr;
    cJSON* root = cJSON_ParseWithLengthOpts(buf.c_str(), buf.size() + 1, &end, 1);
    // The syntax check accepts only what cJSON parses, so a failure here is
    // cJSON's own allocation failing or a syntax case the check missed; either
    // way the position is the useful part (never report it as out of memory).
    if (!root) {
        const size_t at = end && end >= buf.c_str() ? static_cast<size_t>(end - buf.c_str()) : 0;
        fail(errors.status, "%s%s could not be parsed (stopped at byte offset %zu)", errors.prefix.c_str(),
             errors.subject, at);
    }
    JsonPtr doc(root);
    check_duplicate_keys(root, "", errors);
    return doc;
}

namespace {

// The path of the value at the top of `chain` (a parent's key, or its index
// in an array), built only when an error is reported: building it per level
// would copy every ancestor key at every depth.
struct Link {
    const Link* parent;
    const char* key;  // nullptr => array element `index`
    int index;
};

std::string link_path(const std::string& root, const Link* l) {
    if (!l) return root;
    std::string p = link_path(root, l->parent);
    if (l->key) return join_path(p, short_key(l->key));
    return p + format("[%d]", l->index);
}

void check_duplicates(const cJSON* v, const std::string& root, const Link* at, const TextErrors& errors) {
    if (cJSON_IsObject(v)) {
        std::unordered_set<std::string_view> seen;
        for (const cJSON* c = v->child; c; c = c->next) {
            const Link here{at, c->string, 0};
            if (!seen.insert(c->string).second)
                fail(errors.status, "%s%s: duplicate key", errors.prefix.c_str(), link_path(root, &here).c_str());
            check_duplicates(c, root, &here, errors);
        }
    } else if (cJSON_IsArray(v)) {
        int i = 0;
        for (const cJSON* c = v->child; c; c = c->next, ++i) {
            const Link here{at, nullptr, i};
            check_duplicates(c, root, &here, errors);
        }
    }
}

}  // namespace

void check_duplicate_keys(const cJSON* v, const std::string& path, const TextErrors& errors) {
    check_duplicates(v, path, nullptr, errors);
}

}  // namespace ds::json
