// ZeRO-2 gradient reduction: gradients are copied into a bucket as they
// arrive (DeepSpeed's IPG bucket, flushed before it would overflow
// reduce_bucket_size), the bucket is all-reduced — DeepSpeed's default
// use_multi_rank_bucket_allreduce path — and each rank adds the fragments it
// owns into its gradient partition. With overlap_comm two buckets alternate
// and a reduction runs while the next bucket fills.
#pragma once

#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "core/allocator.h"
#include "core/tensor.h"
#include "zero/partition.h"

namespace ds::zero {

class BucketReducer {
public:
    // `capacity` elements per bucket (at least the largest parameter);
    // gradients are reduced in `dtype` (the gradient accumulation dtype).
    BucketReducer(std::shared_ptr<comm::Communicator> comm, const FlatPartitionLayout* layout,
                  int32_t rank, DType dtype, int64_t capacity, bool overlap, Allocator& alloc);

    // Where owned fragments accumulate: this rank's gradient partition
    // (layout.partition_numel elements of `dtype`); `stale` is zeroed before
    // the first addition of a window and then cleared.
    void set_target(Tensor partition, bool* stale) {
        partition_ = std::move(partition);
        stale_ = stale;
    }

    // Adds scale * grad (numel of layout param `index`, dtype gdtype).
    void add(size_t index, const void* grad, int gdtype, float scale);
    // Reduces everything buffered and waits for it (end of a backward).
    void flush();
    bool idle() const;

private:
    struct Entry {
        size_t index;
        int64_t offset;
    };
    struct Bucket {
        Tensor buffer;
        std::vector<Entry> entries;
        int64_t fill = 0;
        std::unique_ptr<comm::Request> request;
    };
    void start(Bucket& b);
    void finish(Bucket& b);

    std::shared_ptr<comm::Communicator> comm_;
    const FlatPartitionLayout* layout_;
    int32_t rank_;
    DType dtype_;
    int64_t capacity_;
    bool overlap_;
    Bucket buckets_[2];
    int current_ = 0;
    Tensor partition_;
    bool* stale_ = nullptr;
};

}  // namespace ds::zero
