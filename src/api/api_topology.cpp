// C ABI: process topologies (ds_topology_*). Argument checks and handle
// validation; the logic lives in src/pipe/topology.cpp.
#include <climits>
#include <cstring>
#include <string>
#include <vector>

#include "api/api_guard.h"
#include "api/comm_handles.h"
#include "api/object_handles.h"
#include "pipe/topology.h"

struct ds_topology;  // opaque: only its address is a key in the registry

using ds::api::require_arg;
using ds::pipe::ProcessTopology;

namespace {

ds::api::ObjectRegistry<ds_topology, const ProcessTopology>& topologies() {
    static auto* r = new ds::api::ObjectRegistry<ds_topology, const ProcessTopology>("topology");  // never destroyed
    return *r;
}

std::shared_ptr<const ProcessTopology> topo_of(const ds_topology_t* t) { return topologies().get(t, "topology"); }

ds_topology_t* add(ProcessTopology t) {
    return topologies().add(std::make_shared<const ProcessTopology>(std::move(t)));
}

// `n` C strings from `names` (argument `arg`), each non-NULL.
std::vector<std::string> names_of(const char* const* names, int32_t n, const char* arg) {
    DS_CHECK(n >= 0, DS_ERR_INVALID_ARGUMENT, "argument '%s': count %d must be >= 0", arg, n);
    if (n > 0) require_arg(names, arg);
    std::vector<std::string> out;
    for (int32_t i = 0; i < n; ++i) {
        DS_CHECK(names[i] != nullptr, DS_ERR_INVALID_ARGUMENT, "argument '%s': entry %d is NULL", arg, i);
        out.emplace_back(names[i]);
    }
    return out;
}

// Copies `ranks` into the caller's array (capacity elements); NULL with
// capacity 0 is a query of the size only.
void write_ranks(const std::vector<int>& ranks, int32_t* out, int64_t capacity, const char* arg) {
    DS_CHECK(capacity >= 0, DS_ERR_INVALID_ARGUMENT, "argument 'capacity' = %lld must be >= 0",
             static_cast<long long>(capacity));
    if (ranks.empty() || (out == nullptr && capacity == 0)) return;
    DS_CHECK(out != nullptr && capacity >= static_cast<int64_t>(ranks.size()), DS_ERR_INVALID_ARGUMENT,
             "argument '%s' must hold %zu ranks (capacity %lld%s)", arg, ranks.size(),
             static_cast<long long>(capacity), out ? "" : ", NULL");
    for (size_t i = 0; i < ranks.size(); ++i) out[i] = ranks[i];
}

}  // namespace

extern "C" {

DS_API ds_status_t ds_topology_create(const char* const* axes, const int32_t* dims, int32_t num_axes,
                                      ds_topology_t** out) {
    return DS_GUARDED_CREATE(out, {
        DS_CHECK(num_axes >= 1, DS_ERR_INVALID_ARGUMENT, "argument 'num_axes' = %d must be >= 1", num_axes);
        require_arg(dims, "dims");
        std::vector<std::string> names = names_of(axes, num_axes, "axes");
        return add(ProcessTopology(std::move(names), std::vector<int>(dims, dims + num_axes)));
    });
}

DS_API ds_status_t ds_topology_create_pipe_data(int32_t num_pp, int32_t num_dp, ds_topology_t** out) {
    return DS_GUARDED_CREATE(out, { return add(ProcessTopology::pipe_data(num_pp, num_dp)); });
}

DS_API ds_status_t ds_topology_create_pipe_model_data(int32_t num_pp, int32_t num_mp, int32_t num_dp,
                                                      ds_topology_t** out) {
    return DS_GUARDED_CREATE(out, { return add(ProcessTopology::pipe_model_data(num_pp, num_mp, num_dp)); });
}

DS_API ds_status_t ds_topology_create_default(int32_t world_size, ds_topology_t** out) {
    return DS_GUARDED_CREATE(out, { return add(ProcessTopology::default_grid(world_size)); });
}

DS_API void ds_topology_destroy(ds_topology_t* topology) {
    try {
        topologies().remove(topology);
    } catch (...) {
        // Cannot fail: nothing to report.
    }
}

DS_API ds_status_t ds_topology_world_size(const ds_topology_t* topology, int32_t* out) {
    return DS_GUARDED({
        auto t = topo_of(topology);
        require_arg(out, "out");
        *out = t->world_size();
    });
}

DS_API ds_status_t ds_topology_num_axes(const ds_topology_t* topology, int32_t* out) {
    return DS_GUARDED({
        auto t = topo_of(topology);
        require_arg(out, "out");
        *out = static_cast<int32_t>(t->axes().size());
    });
}

DS_API ds_status_t ds_topology_axis(const ds_topology_t* topology, int32_t index, const char** name, int32_t* dim) {
    return DS_GUARDED({
        auto t = topo_of(topology);
        const auto n = static_cast<int32_t>(t->axes().size());
        DS_CHECK(index >= 0 && index < n, DS_ERR_INVALID_ARGUMENT, "argument 'index' = %d is outside [0, %d)", index,
                 n);
        if (name) *name = t->axes()[static_cast<size_t>(index)].c_str();  // lives as long as the topology
        if (dim) *dim = t->dims()[static_cast<size_t>(index)];
    });
}

DS_API ds_status_t ds_topology_dim(const ds_topology_t* topology, const char* axis, int32_t* out) {
    return DS_GUARDED({
        auto t = topo_of(topology);
        require_arg(axis, "axis");
        require_arg(out, "out");
        *out = t->dim(axis);
    });
}

DS_API ds_status_t ds_topology_rank_of(const ds_topology_t* topology, const int32_t* coords, int32_t num_coords,
                                       int32_t* out) {
    return DS_GUARDED({
        auto t = topo_of(topology);
        require_arg(out, "out");
        DS_CHECK(num_coords >= 0, DS_ERR_INVALID_ARGUMENT, "argument 'num_coords' = %d must be >= 0", num_coords);
        if (num_coords > 0) require_arg(coords, "coords");
        *out = t->rank_of(std::vector<int>(coords, coords + num_coords));
    });
}

DS_API ds_status_t ds_topology_coord_of(const ds_topology_t* topology, int32_t rank, int32_t* coords,
                                        int32_t capacity) {
    return DS_GUARDED({
        auto t = topo_of(topology);
        const std::vector<int> c = t->coord_of(rank);
        DS_CHECK(coords != nullptr && capacity >= static_cast<int32_t>(c.size()), DS_ERR_INVALID_ARGUMENT,
                 "argument 'coords' must hold %zu coordinates (capacity %d%s)", c.size(), capacity,
                 coords ? "" : ", NULL");
        for (size_t i = 0; i < c.size(); ++i) coords[i] = c[i];
    });
}

DS_API ds_status_t ds_topology_axis_comm_lists(const ds_topology_t* topology, const char* axis, int32_t* ranks,
                                               int64_t capacity, int32_t* num_lists, int32_t* list_len) {
    return DS_GUARDED({
        auto t = topo_of(topology);
        require_arg(axis, "axis");
        require_arg(num_lists, "num_lists");
        require_arg(list_len, "list_len");
        const std::vector<std::vector<int>> lists = t->axis_comm_lists(axis);
        *num_lists = static_cast<int32_t>(lists.size());
        *list_len = lists.empty() ? 0 : static_cast<int32_t>(lists[0].size());
        std::vector<int> flat;
        for (const auto& l : lists) flat.insert(flat.end(), l.begin(), l.end());
        write_ranks(flat, ranks, capacity, "ranks");
    });
}

DS_API ds_status_t ds_topology_filter_match(const ds_topology_t* topology, const char* const* axes,
                                            const int32_t* coords, int32_t num_criteria, int32_t* ranks,
                                            int64_t capacity, int32_t* count) {
    return DS_GUARDED({
        auto t = topo_of(topology);
        require_arg(count, "count");
        const std::vector<std::string> names = names_of(axes, num_criteria, "axes");
        if (num_criteria > 0) require_arg(coords, "coords");
        std::vector<std::pair<std::string, int>> criteria;
        for (int32_t i = 0; i < num_criteria; ++i) criteria.emplace_back(names[static_cast<size_t>(i)], coords[i]);
        const std::vector<int> match = t->filter_match(criteria);
        *count = static_cast<int32_t>(match.size());
        write_ranks(match, ranks, capacity, "ranks");
    });
}

DS_API ds_status_t ds_topology_rank_repr(const ds_topology_t* topology, int32_t rank, const char* const* omit_axes,
                                         int32_t num_omit, char* buf, size_t size, size_t* needed) {
    return DS_GUARDED({
        auto t = topo_of(topology);
        const std::string s = omit_axes ? t->rank_repr(rank, names_of(omit_axes, num_omit, "omit_axes"))
                                        : t->rank_repr(rank);
        if (needed) *needed = s.size() + 1;
        DS_CHECK(buf != nullptr && size > s.size(), DS_ERR_INVALID_ARGUMENT,
                 "argument 'buf' must hold %zu bytes (size %zu%s)", s.size() + 1, size, buf ? "" : ", NULL");
        std::memcpy(buf, s.c_str(), s.size() + 1);
    });
}

DS_API ds_status_t ds_topology_comm(const ds_topology_t* topology, const ds_comm_t* world, const char* axis,
                                    ds_comm_t** out) {
    return DS_GUARDED_CREATE(out, {
        auto t = topo_of(topology);
        auto w = ds::api::comm_retain(world, "world");
        require_arg(axis, "axis");
        return ds::api::comm_handle_create(t->comm(w, {axis}));
    });
}

DS_API ds_status_t ds_topology_group_comm(const ds_topology_t* topology, const ds_comm_t* world,
                                          const char* const* axes, int32_t num_axes, ds_comm_t** out) {
    return DS_GUARDED_CREATE(out, {
        auto t = topo_of(topology);
        auto w = ds::api::comm_retain(world, "world");
        return ds::api::comm_handle_create(t->comm(w, names_of(axes, num_axes, "axes")));
    });
}

}  // extern "C"
