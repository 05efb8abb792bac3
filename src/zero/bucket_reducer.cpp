#include "zero/bucket_reducer.h"

#include <cstring>

#include "core/error.h"
#include "kernels.h"

namespace ds::zero {

BucketReducer::BucketReducer(std::shared_ptr<comm::Communicator> comm, const FlatPartitionLayout* layout,
                             int32_t rank, DType dtype, int64_t capacity, bool overlap, Allocator& alloc)
    : comm_(std::move(comm)), layout_(layout), rank_(rank), dtype_(dtype), capacity_(capacity),
      overlap_(overlap) {
    const int n = overlap ? 2 : 1;
    for (int i = 0; i < n; ++i)
        buckets_[i].buffer = Tensor::empty({capacity_}, dtype_, Device::cpu(), alloc, MemCategory::Buffers);
}

bool BucketReducer::idle() const {
    return buckets_[0].fill == 0 && !buckets_[0].request && buckets_[1].fill == 0 && !buckets_[1].request;
}

void BucketReducer::add(size_t index, const void* grad, int gdtype, float scale) {
    const int64_t numel = layout_->param_numel[index];
    if (numel == 0) return;
    DS_CHECK(numel <= capacity_, DS_ERR_INTERNAL, "gradient bucket of %lld elements cannot hold %lld",
             static_cast<long long>(capacity_), static_cast<long long>(numel));
    Bucket* b = &buckets_[current_];
    if (b->fill + numel > capacity_) {  // flush before it would overflow (DeepSpeed's rule)
        start(*b);
        if (overlap_) {
            current_ ^= 1;
            b = &buckets_[current_];
            if (b->request) finish(*b);  // its previous reduction must land before reuse
        } else {
            finish(*b);
        }
    }
    const int bk = dtype_to_kernel(dtype_);
    char* dst = static_cast<char*>(b->buffer.data_ptr()) + b->fill * static_cast<int64_t>(b->buffer.element_size());
    std::memset(dst, 0, static_cast<size_t>(numel) * b->buffer.element_size());
    dsk_axpy(dst, bk, grad, gdtype, scale, static_cast<size_t>(numel));
    b->entries.push_back({index, b->fill});
    b->fill += numel;
}

void BucketReducer::start(Bucket& b) {
    if (b.fill == 0) return;
    void* p = b.buffer.data_ptr();
    b.request = comm_->allreduce_async(p, p, static_cast<size_t>(b.fill), dtype_, comm::Op::Sum);
}

void BucketReducer::finish(Bucket& b) {
    if (b.request) {
        b.request->wait();
        b.request.reset();
    }
    if (b.fill == 0) return;
    if (*stale_) {
        partition_.zero();
        *stale_ = false;
    }
    const int bk = dtype_to_kernel(dtype_);
    const size_t es = b.buffer.element_size();
    char* part = static_cast<char*>(partition_.data_ptr());
    const char* buf = static_cast<const char*>(b.buffer.data_ptr());
    for (const Entry& e : b.entries)
        for (const FlatFragment& f : layout_->fragments[e.index]) {
            if (f.rank != rank_) continue;
            dsk_axpy(part + f.partition_offset * static_cast<int64_t>(es), bk,
                     buf + (e.offset + f.param_offset) * static_cast<int64_t>(es), bk, 1.0f,
                     static_cast<size_t>(f.length));
        }
    b.entries.clear();
    b.fill = 0;
}

void BucketReducer::flush() {
    // Older reduction first so fragments are added in arrival order.
    Bucket& other = buckets_[current_ ^ 1];
    if (other.request) finish(other);
    Bucket& cur = buckets_[current_];
    start(cur);
    finish(cur);
}

}  // namespace ds::zero
