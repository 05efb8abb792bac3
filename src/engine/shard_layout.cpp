#include "engine/shard_layout.h"

#include <algorithm>

#include "core/error.h"

namespace ds {

std::string selection_to_string(const ShardSelection& s) {
    if (s.whole()) return "whole";
    std::string out = format("dim %d", s.dim);
    for (const auto& r : s.ranges)
        out += format(" [%lld, %lld)", static_cast<long long>(r.first), static_cast<long long>(r.second));
    return out;
}

Shape selected_shape(const Shape& full, const ShardSelection& s, const std::string& name) {
    if (s.whole()) return full;
    DS_CHECK(s.dim < static_cast<int32_t>(full.size()) && !s.ranges.empty(), DS_ERR_INTERNAL,
             "shard layout of '%s': selection %s of a parameter of shape %s", name.c_str(),
             selection_to_string(s).c_str(), shape_to_string(full).c_str());
    int64_t n = 0;
    for (const auto& r : s.ranges) {
        DS_CHECK(0 <= r.first && r.first < r.second && r.second <= full[static_cast<size_t>(s.dim)], DS_ERR_INTERNAL,
                 "shard layout of '%s': selection %s lies outside shape %s", name.c_str(),
                 selection_to_string(s).c_str(), shape_to_string(full).c_str());
        n += r.second - r.first;
    }
    Shape local = full;
    local[static_cast<size_t>(s.dim)] = n;
    return local;
}

void for_each_run(const Shape& full, const ShardSelection& s, int64_t local_begin, int64_t local_end,
                  const std::function<void(int64_t local, int64_t full, int64_t count)>& f) {
    if (local_begin >= local_end) return;
    if (s.whole()) {
        f(local_begin, local_begin, local_end - local_begin);
        return;
    }
    const size_t d = static_cast<size_t>(s.dim);
    int64_t inner = 1;
    for (size_t i = d + 1; i < full.size(); ++i) inner *= full[i];
    // Prefix sums of the ranges' element counts within one outer index.
    std::vector<int64_t> cum(s.ranges.size() + 1, 0);
    for (size_t k = 0; k < s.ranges.size(); ++k) cum[k + 1] = cum[k] + (s.ranges[k].second - s.ranges[k].first) * inner;
    const int64_t local_row = cum.back();          // local elements per outer index
    const int64_t full_row = full[d] * inner;      // full elements per outer index
    DS_CHECK(local_row > 0, DS_ERR_INTERNAL, "shard selection %s selects no element", selection_to_string(s).c_str());
    int64_t l = local_begin;
    size_t k = 0;
    while (l < local_end) {
        const int64_t o = l / local_row, rem = l % local_row;
        while (!(cum[k] <= rem && rem < cum[k + 1])) k = (k + 1) % s.ranges.size();
        const int64_t n = std::min(cum[k + 1] - rem, local_end - l);
        f(l, o * full_row + s.ranges[k].first * inner + (rem - cum[k]), n);
        l += n;
    }
}

ShardLayout::ShardLayout(std::shared_ptr<comm::Communicator> world, std::vector<ShardedParam> params)
    : world_(std::move(world)), params_(std::move(params)) {
    for (size_t i = 0; i < params_.size(); ++i) index_.emplace(params_[i].name, i);
}

const ShardedParam* ShardLayout::find(const std::string& name) const {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : &params_[it->second];
}

}  // namespace ds
