// ZeRO gradient reduction in buckets (DeepSpeed's IPG bucket: flushed
// before it would overflow reduce_bucket_size). Gradients are copied into a
// bucket as they arrive; a full bucket is reduced while the next fills when
// overlap_comm is on (two buckets alternate). Two layouts:
// - ZeRO-2 (AllReduce): params in arrival order; the bucket is all-reduced —
//   DeepSpeed's default use_multi_rank_bucket_allreduce path — and each rank
//   adds the flat-partition fragments it owns into its gradient partition.
//   A parameter larger than the bucket (DeepSpeed reduces such an "extra
//   large" parameter straight from its own gradient) goes through the
//   bucket in bucket-sized pieces, so the bucket is reduce_bucket_size
//   elements whatever the largest parameter. Without overlap_comm a bucket
//   is all-reduced in kPieces consecutive pieces, fp32 ones out of place
//   into a one-piece buffer of the engine's (counted as buffers) instead of
//   the communicator's in-place scratch, which the engine cannot count and
//   which kept one block per distinct bucket fill resident; the
//   communicator's and Open MPI's per-call temporaries are then a piece's
//   size, not a bucket's.
// - ZeRO-3 (ReduceScatter): each param is split into dp zero-padded chunks
//   (ceil(numel/dp)) placed in dp per-rank segments of the bucket; one
//   reduce-scatter hands every rank its chunks, which it adds into its
//   gradient partition (the concatenation of its chunks, in param order).
#pragma once

#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "core/allocator.h"
#include "core/kernel_backend.h"
#include "core/tensor.h"
#include "zero/partition.h"

namespace ds::zero {

class BucketReducer {
public:
    enum class Mode { AllReduce, ReduceScatter };

    // AllReduce: `capacity` elements per bucket (larger parameters are
    // reduced in pieces), `flat` gives each param's owned fragments. ReduceScatter: `capacity`
    // elements per rank segment (>= the largest chunk), `chunk[i]` and
    // `rank_offset[i]` give param i's chunk size and its offset in the
    // partition. Gradients are reduced in `dtype`. The buckets live on
    // `device` (the gradients' memory: `kernels` is its table and `comm`
    // moves it).
    BucketReducer(Mode mode, std::shared_ptr<comm::Communicator> comm, const FlatPartitionLayout* flat,
                  std::vector<int64_t> param_numel, std::vector<int64_t> chunk, std::vector<int64_t> rank_offset,
                  DType dtype, int64_t capacity, bool overlap, Allocator& alloc, Kernels kernels,
                  Device device = Device::cpu());

    // Where owned gradients accumulate (this rank's partition, `dtype`);
    // `*stale` says it holds nothing of this window yet (zeroed first).
    void set_target(Tensor partition, bool* stale) {
        partition_ = std::move(partition);
        stale_ = stale;
    }

    // Adds scale * grad (param `index`'s numel elements of dtype gdtype).
    void add(size_t index, const void* grad, int gdtype, float scale);
    // Reduces everything buffered and waits (end of a backward).
    void flush();
    // Drops what is buffered and not yet added to the partition: the
    // gradients of a backward that failed part-way (each backward flushes
    // when it ends, so nothing older is here). A reduction in flight is
    // waited for, as every rank takes part in it, and its result dropped.
    void discard() noexcept;
    bool idle() const;

private:
    struct Entry {
        size_t index;
        int64_t offset;  // AllReduce: in the bucket; ReduceScatter: in each segment
        int64_t begin = 0;   // AllReduce: the piece [begin, begin + len) of the param
        int64_t len = -1;    // -1: all of it
    };
    struct Bucket {
        Tensor buffer;   // AllReduce: capacity; ReduceScatter: capacity * dp
        Tensor received; // ReduceScatter: capacity; AllReduce: capacity where out of place, else undefined
        std::vector<Entry> entries;
        int64_t fill = 0;
        std::unique_ptr<comm::Request> request;
    };
    int64_t footprint(size_t index) const;  // elements one param takes (per segment)
    void place(Bucket& b, size_t index, const void* grad, int gdtype, float scale);
    // AllReduce: a parameter larger than the bucket, piece by piece.
    void add_in_pieces(size_t index, const void* grad, int gdtype, float scale);
    void start(Bucket& b);
    void compact(Bucket& b);  // ReduceScatter: a partial bucket's segments made contiguous
    void finish(Bucket& b);
    void add_owned(const Bucket& b, const char* src, int64_t lo, int64_t hi);

    static constexpr int64_t kPieces = 4;  // all-reduce pieces per bucket without overlap_comm

    Mode mode_;
    std::shared_ptr<comm::Communicator> comm_;
    const FlatPartitionLayout* flat_;
    std::vector<int64_t> numel_, chunk_, rank_offset_;
    int32_t rank_, world_;
    DType dtype_;
    Kernels kernels_;
    int64_t capacity_;
    int64_t piece_;  // elements one all-reduce covers (capacity_ with overlap_comm)
    bool overlap_;
    Bucket buckets_[2];
    int current_ = 0;
    Tensor partition_;
    bool* stale_ = nullptr;
};

}  // namespace ds::zero
