// Forwarding header (issue 10): the JSON writer moved to core/json/json_writer.h
// (namespace ds::json); config code keeps its config::detail names until the
// lead removes this header after merging.
#pragma once

#include "core/json/json_writer.h"

namespace ds::config::detail {

using json::format_number;
using json::JsonWriter;

}  // namespace ds::config::detail
