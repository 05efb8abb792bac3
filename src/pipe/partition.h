// Pipeline stage boundaries from a list of layers (DEEPSPEED_SEMANTICS.md §8,
// DeepSpeed's PipelineModule._partition_layers): stage s holds layers
// [parts[s], parts[s+1]). Methods, as DeepSpeed spells them (case-insensitive):
//   uniform        equal layer counts, the first (n mod S) stages one more;
//   parameters     balanced by each layer's trainable parameter count;
//   type:<regex>   balanced by 1 for layers whose type name matches <regex>
//                  (searched anywhere in the name, case-insensitive), else 0.
// "Balanced" is DeepSpeed's linear-partition dynamic program: among the
// splits into S contiguous parts, the one whose largest part sum minus
// smallest part sum is least, ties going to the later split point, with its
// float64 arithmetic, so the boundaries equal DeepSpeed's. Pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ds::pipe {

// parts[0..num_parts], as DeepSpeed's partition_uniform.
std::vector<int32_t> partition_uniform(int32_t num_items, int32_t num_parts);
// As DeepSpeed's partition_balanced (uniform when items <= parts).
std::vector<int32_t> partition_balanced(const std::vector<double>& weights, int32_t num_parts);

// Which per-layer list `method` reads (matched as partition_layers matches
// it: case-insensitive), so a caller converts only that one.
enum class PartitionInput { None, ParamCounts, TypeNames };
PartitionInput partition_input(const std::string& method);

// The method applied to the layers: param_counts (per layer) is read by
// "parameters", type_names by "type:"; the other may be empty. Throws
// ds::Error: DS_ERR_INVALID_ARGUMENT for an unknown method, a bad regex, a
// regex matching no layer (naming it), a missing or short list, num_parts < 1;
// DS_ERR_UNSUPPORTED for "profile" (DeepSpeed does not implement it either).
std::vector<int32_t> partition_layers(const std::string& method, int32_t num_layers,
                                      const std::vector<int64_t>& param_counts,
                                      const std::vector<std::string>& type_names, int32_t num_parts);

}  // namespace ds::pipe
