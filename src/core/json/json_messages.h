// Pieces of messages about JSON values, shared by every reader: dotted key
// paths, long keys cut short, a value rendered for a message, and the
// closest known key to suggest for an unknown one.
#pragma once

#include <cjson/cJSON.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ds::json {

// "parent.key" (or "key" when parent is empty).
std::string join_path(const std::string& parent, std::string_view key);

// `key` for a message: keys longer than 64 bytes are cut, with their length.
std::string short_key(std::string_view key);

// Levenshtein distance.
size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word` when it is close enough to suggest: equal
// ignoring case, or edit distance (ignoring case) <= 2, or <= a third of the
// word's length. Empty when none qualifies.
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);

// Short rendering of a JSON value for messages: 5.5, "abc", true, null, an object, an array.
std::string describe(const cJSON* v);

// The range test of every ranged number read ([lo, hi], both inclusive), so
// a checkpoint reader accepts exactly what the config reader accepts.
inline bool in_range(double v, double lo, double hi) { return !(v < lo || v > hi); }

}  // namespace ds::json
