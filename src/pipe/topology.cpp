#include "pipe/topology.h"

#include <climits>
#include <cstdint>

#include "core/error.h"

namespace ds::pipe {

ProcessTopology::ProcessTopology(std::vector<std::string> axes, std::vector<int> dims)
    : axes_(std::move(axes)), dims_(std::move(dims)) {
    DS_CHECK(!axes_.empty(), DS_ERR_INVALID_ARGUMENT, "topology: at least one axis is needed");
    DS_CHECK(axes_.size() == dims_.size(), DS_ERR_INVALID_ARGUMENT, "topology: %zu axis names but %zu dims",
             axes_.size(), dims_.size());
    int64_t world = 1;
    for (size_t i = 0; i < axes_.size(); ++i) {
        DS_CHECK(!axes_[i].empty(), DS_ERR_INVALID_ARGUMENT, "topology: axis %zu has an empty name", i);
        for (size_t j = 0; j < i; ++j)
            DS_CHECK(axes_[j] != axes_[i], DS_ERR_INVALID_ARGUMENT, "topology: axis '%s' is named twice (axes %zu and %zu)",
                     axes_[i].c_str(), j, i);
        DS_CHECK(dims_[i] >= 1, DS_ERR_INVALID_ARGUMENT, "topology: axis '%s' has size %d; sizes must be >= 1",
                 axes_[i].c_str(), dims_[i]);
        world *= dims_[i];
        DS_CHECK(world <= INT_MAX, DS_ERR_INVALID_ARGUMENT, "topology: the product of the axis sizes exceeds %d ranks",
                 INT_MAX);
    }
    world_ = static_cast<int>(world);
    strides_.assign(dims_.size(), 1);
    for (size_t i = dims_.size() - 1; i > 0; --i) strides_[i - 1] = strides_[i] * dims_[i];
}

ProcessTopology ProcessTopology::pipe_data(int num_pp, int num_dp) {
    return ProcessTopology({"pipe", "data"}, {num_pp, num_dp});
}

ProcessTopology ProcessTopology::pipe_model_data(int num_pp, int num_mp, int num_dp) {
    return ProcessTopology({"pipe", "data", "model"}, {num_pp, num_dp, num_mp});
}

ProcessTopology ProcessTopology::default_grid(int world_size) {
    DS_CHECK(world_size >= 1, DS_ERR_INVALID_ARGUMENT, "topology: world size %d must be >= 1", world_size);
    int pp = 1, dp = 1, n = world_size, idx = 0;
    for (int p = 2; n > 1;) {
        if (n % p == 0) {
            (idx++ % 2 == 0 ? pp : dp) *= p;
            n /= p;
        } else {
            p = (static_cast<int64_t>(p) * p > n) ? n : p + 1;  // n itself is prime once p*p > n
        }
    }
    return pipe_data(pp, dp);
}

int ProcessTopology::axis_index(const std::string& axis) const {
    for (size_t i = 0; i < axes_.size(); ++i)
        if (axes_[i] == axis) return static_cast<int>(i);
    return -1;
}

int ProcessTopology::dim(const std::string& axis) const {
    const int i = axis_index(axis);
    return i < 0 ? 0 : dims_[static_cast<size_t>(i)];
}

int ProcessTopology::rank_of(const std::vector<int>& coord) const {
    DS_CHECK(coord.size() == axes_.size(), DS_ERR_INVALID_ARGUMENT,
             "topology: %zu coordinates given for %zu axes (%s); slices are filter_match's job", coord.size(),
             axes_.size(), describe().c_str());
    int rank = 0;
    for (size_t i = 0; i < coord.size(); ++i) {
        DS_CHECK(coord[i] >= 0 && coord[i] < dims_[i], DS_ERR_INVALID_ARGUMENT,
                 "topology: coordinate %d on axis '%s' is outside [0, %d)", coord[i], axes_[i].c_str(), dims_[i]);
        rank += coord[i] * strides_[i];
    }
    return rank;
}

int ProcessTopology::rank_of(const std::vector<std::pair<std::string, int>>& named) const {
    std::vector<int> coord(axes_.size(), -1);
    std::vector<bool> seen(axes_.size(), false);
    for (const auto& kv : named) {
        const int i = axis_index(kv.first);
        DS_CHECK(i >= 0, DS_ERR_INVALID_ARGUMENT, "topology: no axis '%s' (%s)", kv.first.c_str(), describe().c_str());
        DS_CHECK(!seen[static_cast<size_t>(i)], DS_ERR_INVALID_ARGUMENT, "topology: axis '%s' is given twice",
                 kv.first.c_str());
        seen[static_cast<size_t>(i)] = true;
        coord[static_cast<size_t>(i)] = kv.second;
    }
    for (size_t i = 0; i < axes_.size(); ++i)
        DS_CHECK(seen[i], DS_ERR_INVALID_ARGUMENT, "topology: no coordinate given for axis '%s'; slices are filter_match's job",
                 axes_[i].c_str());
    return rank_of(coord);
}

void ProcessTopology::check_rank(int rank, const char* what) const {
    DS_CHECK(rank >= 0 && rank < world_, DS_ERR_INVALID_ARGUMENT, "topology: %s %d is outside [0, %d) (%s)", what,
             rank, world_, describe().c_str());
}

std::vector<int> ProcessTopology::coord_of(int rank) const {
    check_rank(rank, "rank");
    std::vector<int> coord(axes_.size());
    for (size_t i = 0; i < axes_.size(); ++i) coord[i] = (rank / strides_[i]) % dims_[i];
    return coord;
}

std::vector<std::vector<int>> ProcessTopology::axis_comm_lists(const std::string& axis) const {
    const int a = axis_index(axis);
    if (a < 0) return {};
    std::vector<std::vector<int>> lists;
    // Ranks with coordinate 0 on `axis`, in increasing order, enumerate the
    // other axes' combinations row-major; each list walks `axis` from there.
    const int stride = strides_[static_cast<size_t>(a)], n = dims_[static_cast<size_t>(a)];
    for (int r = 0; r < world_; ++r) {
        if ((r / stride) % n != 0) continue;
        std::vector<int> list(static_cast<size_t>(n));
        for (int k = 0; k < n; ++k) list[static_cast<size_t>(k)] = r + k * stride;
        lists.push_back(std::move(list));
    }
    return lists;
}

std::vector<int> ProcessTopology::filter_match(const std::vector<std::pair<std::string, int>>& criteria) const {
    std::vector<std::pair<int, int>> want;  // (axis index, coordinate)
    for (const auto& kv : criteria) {
        const int i = axis_index(kv.first);
        DS_CHECK(i >= 0, DS_ERR_INVALID_ARGUMENT, "topology: filter on an unknown axis '%s' (%s)", kv.first.c_str(),
                 describe().c_str());
        want.emplace_back(i, kv.second);
    }
    std::vector<int> out;
    for (int r = 0; r < world_; ++r) {
        bool ok = true;
        for (const auto& w : want)
            ok = ok && (r / strides_[static_cast<size_t>(w.first)]) % dims_[static_cast<size_t>(w.first)] == w.second;
        if (ok) out.push_back(r);
    }
    return out;
}

std::vector<int> ProcessTopology::axis_list(const std::string& axis, int idx) const {
    DS_CHECK(axis_index(axis) >= 0, DS_ERR_INVALID_ARGUMENT, "topology: no axis '%s' (%s)", axis.c_str(),
             describe().c_str());
    return filter_match({{axis, idx}});
}

std::string ProcessTopology::rank_repr(int rank, const std::vector<std::string>& omit, const std::string& inner,
                                       const std::string& outer) const {
    const std::vector<int> coord = coord_of(rank);
    std::string out;
    for (size_t i = 0; i < axes_.size(); ++i) {
        bool skip = false;
        for (const std::string& o : omit) skip = skip || o == axes_[i];
        if (skip) continue;
        if (!out.empty()) out += outer;
        out += axes_[i] + inner + format("%02d", coord[i]);
    }
    return out;
}

std::vector<bool> ProcessTopology::varying_mask(const std::vector<std::string>& varying) const {
    std::vector<bool> mask(axes_.size(), false);
    for (const std::string& name : varying) {
        const int i = axis_index(name);
        DS_CHECK(i >= 0, DS_ERR_INVALID_ARGUMENT, "topology: no axis '%s' (%s)", name.c_str(), describe().c_str());
        DS_CHECK(!mask[static_cast<size_t>(i)], DS_ERR_INVALID_ARGUMENT, "topology: axis '%s' is named twice",
                 name.c_str());
        mask[static_cast<size_t>(i)] = true;
    }
    return mask;
}

int ProcessTopology::group_index(int rank, const std::vector<std::string>& varying) const {
    const std::vector<bool> mask = varying_mask(varying);
    const std::vector<int> coord = coord_of(rank);
    int index = 0;
    for (size_t i = 0; i < axes_.size(); ++i)
        if (!mask[i]) index = index * dims_[i] + coord[i];
    return index;
}

std::vector<int> ProcessTopology::group_members(int rank, const std::vector<std::string>& varying) const {
    const std::vector<bool> mask = varying_mask(varying);
    const std::vector<int> mine = coord_of(rank);
    std::vector<int> out;
    for (int r = 0; r < world_; ++r) {
        bool same = true;
        for (size_t i = 0; i < axes_.size() && same; ++i)
            same = mask[i] || (r / strides_[i]) % dims_[i] == mine[i];
        if (same) out.push_back(r);
    }
    return out;
}

std::shared_ptr<comm::Communicator> ProcessTopology::comm(const std::shared_ptr<comm::Communicator>& world,
                                                          const std::vector<std::string>& varying) const {
    DS_CHECK(world != nullptr, DS_ERR_INVALID_ARGUMENT, "topology: no world communicator given");
    DS_CHECK(world->size() == world_, DS_ERR_INVALID_ARGUMENT,
             "topology: the communicator has %d ranks but the topology (%s) has %d", world->size(),
             describe().c_str(), world_);
    const int rank = world->rank();
    return world->split(group_index(rank, varying), rank);
}

std::string ProcessTopology::describe() const {
    std::string s = "axes ";
    for (size_t i = 0; i < axes_.size(); ++i) s += (i ? ", " : "") + axes_[i] + "=" + std::to_string(dims_[i]);
    return s;
}

}  // namespace ds::pipe
