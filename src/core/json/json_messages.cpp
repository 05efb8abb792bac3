#include "core/json/json_messages.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>

#include "core/error.h"
#include "core/json/json_writer.h"

namespace ds::json {

namespace {

std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

}  // namespace

std::string short_key(std::string_view key) {
    constexpr size_t kShown = 64;
    if (key.size() <= kShown) return std::string(key);
    return std::string(key.substr(0, kShown)) + format("...(%zu bytes)", key.size());
}

std::string join_path(const std::string& parent, std::string_view key) {
    if (parent.empty()) return std::string(key);
    std::string p = parent;
    p += '.';
    p += key;
    return p;
}

size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
        cur[0] = i;
        for (size_t j = 1; j <= b.size(); ++j) {
            size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
            cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
        }
        std::swap(prev, cur);
    }
    return prev[b.size()];
}

std::string closest_match(std::string_view word, const std::vector<std::string>& candidates) {
    // The distance is at least the length difference: a candidate whose
    // length alone rules it out is skipped, and the word is lower-cased only
    // if some candidate is left, so a 50 MB key costs O(size), not
    // O(size x candidates).
    auto may_qualify = [&](const std::string& c) {
        const size_t diff = c.size() > word.size() ? c.size() - word.size() : word.size() - c.size();
        return diff <= 2 || diff * 3 <= word.size();
    };
    if (std::none_of(candidates.begin(), candidates.end(), may_qualify)) return {};
    const std::string lw = lower(word);
    for (const auto& c : candidates)
        if (c.size() == word.size() && lower(c) == lw) return c;
    // Distance ignoring case: "sgdd" is one edit from "SGD".
    std::string best;
    size_t best_d = SIZE_MAX;
    for (const auto& c : candidates) {
        if (!may_qualify(c)) continue;
        size_t d = edit_distance(lw, lower(c));
        if (d < best_d) {
            best_d = d;
            best = c;
        }
    }
    if (best_d <= 2 || best_d * 3 <= word.size()) return best;
    return {};
}

std::string describe(const cJSON* v) {
    if (!v) return "nothing";
    if (cJSON_IsBool(v)) return cJSON_IsTrue(v) ? "true" : "false";
    if (cJSON_IsNull(v)) return "null";
    if (cJSON_IsNumber(v)) {
        const double d = v->valuedouble;
        if (std::isfinite(d) && std::floor(d) == d && std::fabs(d) < 1e15)
            return format("%lld", static_cast<long long>(d));
        return format_number(d);
    }
    if (cJSON_IsString(v)) return format("\"%s\"", v->valuestring);
    if (cJSON_IsArray(v)) return "an array";
    if (cJSON_IsObject(v)) return "an object";
    return "an invalid value";
}

}  // namespace ds::json
