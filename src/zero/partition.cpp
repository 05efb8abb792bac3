// ZeRO partition layout math (DEEPSPEED_SEMANTICS.md §6.1, §6.2, §5.2). See partition.h.
#include "zero/partition.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace ds::zero {

namespace {

void check_dp(int32_t dp) {
    DS_CHECK(dp >= 1, DS_ERR_INVALID_ARGUMENT, "dp = %d must be >= 1", dp);
}

// Sum of the sizes, checking each is >= 0 and that `headroom` more still fits.
int64_t checked_total(const std::vector<int64_t>& numel, int64_t headroom) {
    int64_t total = 0;
    for (size_t i = 0; i < numel.size(); ++i) {
        DS_CHECK(numel[i] >= 0, DS_ERR_INVALID_ARGUMENT, "param_numel[%zu] = %lld must be >= 0", i,
                 static_cast<long long>(numel[i]));
        DS_CHECK(!__builtin_add_overflow(total, numel[i], &total) &&
                     total <= std::numeric_limits<int64_t>::max() - headroom,
                 DS_ERR_INVALID_ARGUMENT, "param_numel: total element count overflows int64 at index %zu", i);
    }
    return total;
}

void check_rank(int32_t rank, int32_t dp) {
    DS_CHECK(rank >= 0 && rank < dp, DS_ERR_INVALID_ARGUMENT, "rank = %d is out of range [0, %d)", rank, dp);
}

void check_range(size_t param, size_t count, int64_t begin, int64_t end, int64_t numel) {
    DS_CHECK(param < count, DS_ERR_INVALID_ARGUMENT, "param = %zu is out of range [0, %zu)", param, count);
    DS_CHECK(begin >= 0 && begin <= end && end <= numel, DS_ERR_INVALID_ARGUMENT,
             "range [%lld, %lld) is not inside parameter %zu of %lld elements",
             static_cast<long long>(begin), static_cast<long long>(end), param,
             static_cast<long long>(numel));
}

}  // namespace

// ---------------------------------------------------------------------------
// Stage 1/2
// ---------------------------------------------------------------------------

int64_t flat_alignment(int32_t dp) {
    check_dp(dp);
    return 2 * static_cast<int64_t>(dp);
}

std::vector<size_t> round_robin_order(size_t count, int32_t dp) {
    check_dp(dp);
    std::vector<size_t> order;
    order.reserve(count);
    const size_t lists = std::min(count, static_cast<size_t>(dp));
    for (size_t list = 0; list < lists; ++list)
        for (size_t k = list; k < count; k += static_cast<size_t>(dp)) order.push_back(k);
    return order;
}

FlatPartitionLayout make_flat_partition_layout(const std::vector<int64_t>& param_numel, int32_t dp,
                                               bool round_robin) {
    FlatPartitionLayout L;
    L.alignment = flat_alignment(dp);
    L.dp = dp;
    L.numel = checked_total(param_numel, L.alignment);
    L.padded_numel = (L.numel + L.alignment - 1) / L.alignment * L.alignment;
    L.partition_numel = L.padded_numel / dp;
    L.param_numel = param_numel;

    const size_t n = param_numel.size();
    if (round_robin) {
        L.flat_order = round_robin_order(n, dp);
    } else {
        L.flat_order.resize(n);
        for (size_t i = 0; i < n; ++i) L.flat_order[i] = i;
    }

    L.param_flat_offset.assign(n, 0);
    L.fragments.assign(n, {});
    const int64_t P = L.partition_numel;
    int64_t offset = 0;
    for (size_t pos = 0; pos < n; ++pos) {
        const size_t i = L.flat_order[pos];
        const int64_t size = param_numel[i];
        L.param_flat_offset[i] = offset;
        if (size > 0) {
            const int64_t end = offset + size;
            for (int64_t r = offset / P; r * P < end; ++r) {
                const int64_t lo = std::max(offset, r * P);
                const int64_t hi = std::min(end, (r + 1) * P);
                L.fragments[i].push_back(
                    FlatFragment{static_cast<int32_t>(r), lo, lo - r * P, lo - offset, hi - lo});
            }
        }
        offset += size;
    }
    return L;
}

int64_t FlatPartitionLayout::partition_begin(int32_t rank) const {
    check_rank(rank, dp);
    return rank * partition_numel;
}

int64_t FlatPartitionLayout::partition_end(int32_t rank) const {
    check_rank(rank, dp);
    return (rank + 1) * partition_numel;
}

int64_t FlatPartitionLayout::padding(int32_t rank) const {
    const int64_t left = partition_begin(rank);
    if (numel <= left) return partition_numel;
    if (numel < left + partition_numel) return left + partition_numel - numel;
    return 0;
}

std::vector<size_t> FlatPartitionLayout::params_in_partition(int32_t rank) const {
    const int64_t start = partition_begin(rank), end = partition_end(rank);
    std::vector<size_t> out;
    for (size_t pos = 0; pos < flat_order.size(); ++pos) {
        const size_t i = flat_order[pos];
        const int64_t current = param_flat_offset[i];
        if ((start <= current && current < end) || (current < start && start < current + param_numel[i]))
            out.push_back(i);
    }
    return out;
}

int64_t FlatPartitionLayout::first_offset(int32_t rank) const {
    const int64_t start = partition_begin(rank);
    for (size_t i = 0; i < param_numel.size(); ++i) {
        const int64_t current = param_flat_offset[i];
        if (current < start && start < current + param_numel[i]) return start - current;
    }
    return 0;
}

std::vector<FlatFragment> FlatPartitionLayout::locate(size_t param, int64_t begin, int64_t end) const {
    check_range(param, param_numel.size(), begin, end, param_numel.size() > param ? param_numel[param] : 0);
    std::vector<FlatFragment> out;
    for (const FlatFragment& f : fragments[param]) {
        const int64_t lo = std::max(begin, f.param_offset);
        const int64_t hi = std::min(end, f.param_offset + f.length);
        if (lo >= hi) continue;
        const int64_t shift = lo - f.param_offset;
        out.push_back(FlatFragment{f.rank, f.flat_offset + shift, f.partition_offset + shift, lo, hi - lo});
    }
    return out;
}

std::vector<int64_t> allgather_shard_bounds(int64_t partition_numel, int32_t dp, int64_t allgather_bucket_size) {
    check_dp(dp);
    DS_CHECK(partition_numel >= 0, DS_ERR_INVALID_ARGUMENT, "partition_numel = %lld must be >= 0",
             static_cast<long long>(partition_numel));
    DS_CHECK(allgather_bucket_size > 0, DS_ERR_INVALID_ARGUMENT, "allgather_bucket_size = %lld must be > 0",
             static_cast<long long>(allgather_bucket_size));
    if (dp == 1) return {0, partition_numel};
    int64_t total = 0;
    DS_CHECK(!__builtin_mul_overflow(partition_numel, static_cast<int64_t>(dp), &total), DS_ERR_INVALID_ARGUMENT,
             "partition_numel * dp overflows int64");
    const int64_t num_shards = std::max<int64_t>(1, total / allgather_bucket_size);
    int64_t shard = partition_numel / num_shards;
    shard -= shard % 2;  // nccl_start_alignment_factor
    std::vector<int64_t> bounds;
    bounds.reserve(static_cast<size_t>(num_shards) + 1);
    for (int64_t s = 0; s < num_shards; ++s) bounds.push_back(s * shard);
    bounds.push_back(partition_numel);
    return bounds;
}

// ---------------------------------------------------------------------------
// Stage 3
// ---------------------------------------------------------------------------

int64_t stage3_partition_numel(int64_t numel, int32_t dp) {
    check_dp(dp);
    DS_CHECK(numel >= 0, DS_ERR_INVALID_ARGUMENT, "numel = %lld must be >= 0", static_cast<long long>(numel));
    return numel / dp + (numel % dp != 0 ? 1 : 0);
}

std::vector<uint8_t> mark_persistent_params(const std::vector<int64_t>& numel_in_model_order,
                                            int64_t param_threshold, int64_t model_threshold) {
    DS_CHECK(param_threshold >= 0, DS_ERR_INVALID_ARGUMENT, "param_persistence_threshold = %lld must be >= 0",
             static_cast<long long>(param_threshold));
    DS_CHECK(model_threshold >= 0, DS_ERR_INVALID_ARGUMENT, "model_persistence_threshold = %lld must be >= 0",
             static_cast<long long>(model_threshold));
    checked_total(numel_in_model_order, 0);
    std::vector<uint8_t> persistent(numel_in_model_order.size(), 0);
    int64_t total = 0;
    for (size_t i = 0; i < numel_in_model_order.size(); ++i) {
        const int64_t n = numel_in_model_order[i];
        if (n > model_threshold - total) continue;  // n + total > model_threshold, without overflow
        if (n <= param_threshold) {
            persistent[i] = 1;
            total += n;
        }
    }
    return persistent;
}

int64_t Stage3Param::owned_begin(int32_t rank) const {
    return std::min(numel, static_cast<int64_t>(rank) * partition_numel);
}

int64_t Stage3Param::owned_numel(int32_t rank) const {
    const int64_t begin = owned_begin(rank);
    return std::min(numel, begin + partition_numel) - begin;
}

Stage3Layout make_stage3_layout(const std::vector<int64_t>& param_numel, int32_t dp, int64_t sub_group_size) {
    check_dp(dp);
    DS_CHECK(sub_group_size >= 0, DS_ERR_INVALID_ARGUMENT, "sub_group_size = %lld must be >= 0",
             static_cast<long long>(sub_group_size));
    checked_total(param_numel, 0);
    Stage3Layout L;
    L.dp = dp;
    L.params.resize(param_numel.size());
    int64_t group_numel = 0;
    for (size_t i = 0; i < param_numel.size(); ++i) {
        L.params[i].numel = param_numel[i];
        L.params[i].partition_numel = stage3_partition_numel(param_numel[i], dp);
        DS_CHECK(!__builtin_add_overflow(group_numel, L.params[i].partition_numel, &group_numel),
                 DS_ERR_INVALID_ARGUMENT, "param_numel: per-rank element count overflows int64");
    }

    const bool single = sub_group_size >= group_numel;
    Stage3SubGroup current;
    for (size_t i = 0; i < L.params.size(); ++i) {
        Stage3Param& p = L.params[i];
        p.sub_group = static_cast<int32_t>(L.sub_groups.size());
        p.sub_group_offset = current.numel;
        current.numel += p.partition_numel;
        current.end_param = i + 1;
        if (!single && (current.numel >= sub_group_size || i + 1 == L.params.size())) {
            L.sub_groups.push_back(current);
            current = Stage3SubGroup{i + 1, i + 1, 0};
        }
    }
    if (single) L.sub_groups.push_back(current);  // also the one (empty) sub-group of an empty group
    return L;
}

int64_t Stage3Layout::rank_numel() const {
    int64_t total = 0;
    for (const Stage3SubGroup& g : sub_groups) total += g.numel;
    return total;
}

std::vector<Stage3Fragment> Stage3Layout::locate(size_t param, int64_t begin, int64_t end) const {
    check_range(param, params.size(), begin, end, param < params.size() ? params[param].numel : 0);
    std::vector<Stage3Fragment> out;
    const Stage3Param& p = params[param];
    if (begin == end) return out;
    const int64_t chunk = p.partition_numel;
    for (int64_t r = begin / chunk; r * chunk < end; ++r) {
        const int64_t lo = std::max(begin, r * chunk);
        const int64_t hi = std::min(end, (r + 1) * chunk);
        const int64_t in_chunk = lo - r * chunk;
        out.push_back(Stage3Fragment{static_cast<int32_t>(r), p.sub_group, p.sub_group_offset + in_chunk, in_chunk,
                                     lo, hi - lo});
    }
    return out;
}

// ---------------------------------------------------------------------------
// Gradient buckets
// ---------------------------------------------------------------------------

namespace {

void check_bucket_args(const std::vector<int64_t>& numel, int64_t bucket_size) {
    DS_CHECK(bucket_size > 0, DS_ERR_INVALID_ARGUMENT, "bucket_size = %lld must be > 0",
             static_cast<long long>(bucket_size));
    checked_total(numel, 0);
}

}  // namespace

std::vector<size_t> bucket_bounds_flush_after_exceeding(const std::vector<int64_t>& numel, int64_t bucket_size) {
    check_bucket_args(numel, bucket_size);
    std::vector<size_t> bounds{0};
    int64_t running = 0;
    for (size_t i = 0; i < numel.size(); ++i) {
        running += numel[i];
        if (running > bucket_size) {
            bounds.push_back(i + 1);
            running = 0;
        }
    }
    if (bounds.back() != numel.size()) bounds.push_back(numel.size());
    return bounds;
}

std::vector<size_t> bucket_bounds_flush_before_overflow(const std::vector<int64_t>& numel, int64_t bucket_size) {
    check_bucket_args(numel, bucket_size);
    std::vector<size_t> bounds{0};
    int64_t elements = 0;
    for (size_t i = 0; i < numel.size(); ++i) {
        if (numel[i] > 0 && elements > 0 && elements + numel[i] > bucket_size) {
            bounds.push_back(i);
            elements = 0;
        }
        elements += numel[i];
    }
    if (bounds.back() != numel.size()) bounds.push_back(numel.size());
    return bounds;
}

}  // namespace ds::zero
