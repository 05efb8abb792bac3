// C ABI: pipeline stage boundaries (ds_pipe_partition). Argument checks and
// the conversion of the C arrays; the methods are in src/pipe/partition.cpp.
#include <string>
#include <vector>

#include "api/api_guard.h"
#include "pipe/partition.h"

using ds::api::require_arg;

extern "C" {

DS_API ds_status_t ds_pipe_partition(const char* method, int32_t num_layers, const int64_t* param_counts,
                                     const char* const* type_names, int32_t num_stages, int32_t* parts) {
    return DS_GUARDED({
        require_arg(method, "method");
        require_arg(parts, "parts");
        DS_CHECK(num_layers >= 0, DS_ERR_INVALID_ARGUMENT, "num_layers = %d: must be >= 0", num_layers);
        DS_CHECK(num_stages >= 1, DS_ERR_INVALID_ARGUMENT, "num_stages = %d: must be >= 1", num_stages);
        // Copy only the list the method reads: the other may be NULL.
        std::vector<int64_t> counts;
        std::vector<std::string> names;
        const ds::pipe::PartitionInput reads = ds::pipe::partition_input(method);
        if (reads == ds::pipe::PartitionInput::ParamCounts) {
            require_arg(param_counts, "param_counts");
            counts.assign(param_counts, param_counts + num_layers);
        } else if (reads == ds::pipe::PartitionInput::TypeNames) {
            require_arg(type_names, "type_names");
            names.reserve(static_cast<size_t>(num_layers));
            for (int32_t i = 0; i < num_layers; ++i) {
                DS_CHECK(type_names[i] != nullptr, DS_ERR_INVALID_ARGUMENT, "type_names[%d] is NULL", i);
                names.emplace_back(type_names[i]);
            }
        }
        const std::vector<int32_t> p = ds::pipe::partition_layers(method, num_layers, counts, names, num_stages);
        for (size_t s = 0; s < p.size(); ++s) parts[s] = p[s];
    });
}

}  // extern "C"
