// ZeRO partition layout math (DEEPSPEED_SEMANTICS.md §6.1, §6.2, §5.2, §16.3, §16.4).
// Pure functions: no tensors, no communication. The engine's ZeRO stages and
// the checkpoint consolidation tools build on these.
//
// Element counts are int64_t; "param index" always means the index in the
// caller's input order (registration order within one group).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ds::zero {

// ===========================================================================
// Stage 1/2: one flat buffer per optimizer param group (callers make one
// group per dtype), padded to a multiple of 2*dp, split into dp equal
// partitions; a parameter may straddle partitions.
// ===========================================================================

// DeepSpeed's nccl_start_alignment_factor (4-byte alignment / 2 bytes per
// 16-bit element) times dp: the flat buffer's length is a multiple of it.
int64_t flat_alignment(int32_t dp);

// DeepSpeed's round_robin_gradients order: param k goes to list k mod dp and
// the lists 0..dp-1 are concatenated. Returns flat position -> param index
// (dp=2, 5 params -> {0, 2, 4, 1, 3}).
std::vector<size_t> round_robin_order(size_t count, int32_t dp);

// A contiguous run of one parameter's elements held by one rank.
struct FlatFragment {
    int32_t rank;
    int64_t flat_offset;       // offset in the group's flat buffer
    int64_t partition_offset;  // offset in that rank's partition (flat_offset - rank * P)
    int64_t param_offset;      // element offset in the flattened parameter
    int64_t length;            // > 0
};

struct FlatPartitionLayout {
    int32_t dp = 1;
    int64_t alignment = 2;        // flat_alignment(dp)
    int64_t numel = 0;            // sum of parameter sizes (unpadded)
    int64_t padded_numel = 0;     // numel rounded up to a multiple of alignment
    int64_t partition_numel = 0;  // P = padded_numel / dp (exact)

    std::vector<int64_t> param_numel;        // by param index
    std::vector<size_t> flat_order;          // flat position -> param index
    std::vector<int64_t> param_flat_offset;  // by param index: where it starts in the flat buffer
    // by param index: the fragments covering it, ascending rank (empty for a
    // zero-size parameter). Their lengths sum to the parameter's size.
    std::vector<std::vector<FlatFragment>> fragments;

    // Rank r owns flat range [r*P, (r+1)*P).
    int64_t partition_begin(int32_t rank) const;
    int64_t partition_end(int32_t rank) const;
    // DeepSpeed's groups_padding for rank r: P if numel <= r*P; (r+1)*P - numel
    // if numel ends inside the partition; else 0. Padding is only ever at the
    // end of the flat buffer, so the first P - padding(r) elements are real.
    int64_t padding(int32_t rank) const;
    // DeepSpeed's get_partition_info: params (in flat order) whose start lies
    // in [r*P, (r+1)*P) plus the one param starting before r*P and ending after
    // it; first_offset is r*P minus that param's start (0 if there is none).
    std::vector<size_t> params_in_partition(int32_t rank) const;
    int64_t first_offset(int32_t rank) const;
    // Stitching: where elements [begin, end) of parameter `param` live.
    // Ascending param_offset; empty if begin == end. DS_ERR_INVALID_ARGUMENT
    // if param or the range is out of bounds.
    std::vector<FlatFragment> locate(size_t param, int64_t begin, int64_t end) const;
};

// Lay out one group. param_numel in registration order (each >= 0), dp >= 1.
// round_robin: DeepSpeed's round_robin_gradients reordering of the flat order
// (also the order checkpoints record in param_shapes).
FlatPartitionLayout make_flat_partition_layout(const std::vector<int64_t>& param_numel, int32_t dp,
                                               bool round_robin);

// The sequential all-gather shards DeepSpeed uses when all_gather_into_tensor
// is unavailable (runtime/utils.py all_gather_dp_groups): num_shards =
// max(1, P*dp // allgather_bucket_size), shard = (P // num_shards) rounded
// down to a multiple of 2, the last shard takes the rest. Returns the shard
// starts within the partition plus P as the final entry. dp == 1: {0, P}
// (DeepSpeed skips the gather entirely).
std::vector<int64_t> allgather_shard_bounds(int64_t partition_numel, int32_t dp,
                                            int64_t allgather_bucket_size);

// ===========================================================================
// Stage 3: every parameter partitioned on its own.
// ===========================================================================

// ceil(numel / dp): the chunk every rank stores for a parameter (DeepSpeed's
// partition_numel()). Rank r owns [r*chunk, (r+1)*chunk) ∩ [0, numel); the
// rest of its chunk is padding.
int64_t stage3_partition_numel(int64_t numel, int32_t dp);

// DeepSpeed's persistence rule (parameter_offload.py mark_persistent_parameters)
// over the parameters in module.named_parameters() order: a parameter is
// skipped if numel + running persistent total > model_threshold; otherwise it
// is persistent if numel <= param_threshold (and the total grows). Persistent
// parameters stay fully materialised on every rank during forward/backward;
// they are still partitioned for the optimizer. 1 = persistent.
std::vector<uint8_t> mark_persistent_params(const std::vector<int64_t>& numel_in_model_order,
                                            int64_t param_threshold, int64_t model_threshold);

struct Stage3Param {
    int64_t numel = 0;
    int64_t partition_numel = 0;   // chunk = ceil(numel / dp)
    int32_t sub_group = 0;         // which optimizer sub-group holds it
    int64_t sub_group_offset = 0;  // offset of its chunk in the rank's sub-group flat

    // Elements [owned_begin(r), owned_begin(r) + owned_numel(r)) of the param live on rank r.
    int64_t owned_begin(int32_t rank) const;
    int64_t owned_numel(int32_t rank) const;
    int64_t padding(int32_t rank) const { return partition_numel - owned_numel(rank); }
};

// One optimizer sub-group: params [first_param, end_param) of the group; on
// every rank its flat is the concatenation of those params' chunks (no extra
// padding), `numel` elements (the same on every rank).
struct Stage3SubGroup {
    size_t first_param = 0;
    size_t end_param = 0;
    int64_t numel = 0;
};

// A contiguous run of one parameter's elements held by one rank.
struct Stage3Fragment {
    int32_t rank;
    int32_t sub_group;
    int64_t sub_group_offset;  // offset in that rank's sub-group flat
    int64_t chunk_offset;      // offset in that rank's chunk of the parameter
    int64_t param_offset;      // element offset in the flattened parameter
    int64_t length;            // > 0
};

struct Stage3Layout {
    int32_t dp = 1;
    std::vector<Stage3Param> params;  // by param index
    std::vector<Stage3SubGroup> sub_groups;

    // Elements each rank stores for the whole group (sum of chunks).
    int64_t rank_numel() const;
    // Stitching: where elements [begin, end) of parameter `param` live.
    // Ascending param_offset; padding is never returned.
    std::vector<Stage3Fragment> locate(size_t param, int64_t begin, int64_t end) const;
};

// Lay out one optimizer group (stage3.py _create_fp16_sub_groups): walk the
// params in order accumulating chunk sizes; close a sub-group when the
// running sum >= sub_group_size or at the last param. If sub_group_size >=
// the group's total chunk numel there is a single sub-group (also for an
// empty group). sub_group_size >= 0.
Stage3Layout make_stage3_layout(const std::vector<int64_t>& param_numel, int32_t dp,
                                int64_t sub_group_size);

// ===========================================================================
// Gradient buckets. Each returns bucket boundaries as indices into `numel`:
// bucket b holds tensors [bounds[b], bounds[b+1]); bounds starts at 0 and ends
// at numel.size() (a single {0} for no tensors). Callers group by dtype first.
// ===========================================================================

// Engine all-reduce without ZeRO (engine.py allreduce_no_retain, §5.2): append
// the tensor, then flush if the running element count EXCEEDS bucket_size (a
// bucket may overshoot by its last tensor).
std::vector<size_t> bucket_bounds_flush_after_exceeding(const std::vector<int64_t>& numel,
                                                        int64_t bucket_size);

// ZeRO IPG bucket (stage_1_and_2.py reduce_independent_p_g_buckets_and_remove_grads,
// stage3.py; §6.1): before appending, if the bucket is non-empty and
// elements + numel > bucket_size, flush first. A tensor larger than the bucket
// thus sits alone in its bucket. Zero-size tensors never cause a flush
// (stage 1/2 skips them) and ride along in the current bucket.
std::vector<size_t> bucket_bounds_flush_before_overflow(const std::vector<int64_t>& numel,
                                                        int64_t bucket_size);

}  // namespace ds::zero
