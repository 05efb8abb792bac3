#include "zero/bucket_reducer.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace ds::zero {

BucketReducer::BucketReducer(Mode mode, std::shared_ptr<comm::Communicator> comm,
                             const FlatPartitionLayout* flat, std::vector<int64_t> param_numel,
                             std::vector<int64_t> chunk, std::vector<int64_t> rank_offset, DType dtype,
                             int64_t capacity, bool overlap, Allocator& alloc, Kernels kernels, Device device)
    : mode_(mode), comm_(std::move(comm)), flat_(flat), numel_(std::move(param_numel)), chunk_(std::move(chunk)),
      rank_offset_(std::move(rank_offset)), rank_(comm_->rank()), world_(comm_->size()), dtype_(dtype),
      kernels_(kernels), capacity_(capacity), overlap_(overlap) {
    const int n = overlap ? 2 : 1;
    const int64_t size = mode_ == Mode::AllReduce ? capacity_ : capacity_ * world_;
    // AllReduce out of place where that saves the communicator's scratch:
    // fp32 (16-bit data is staged in fp32 by the communicator either way)
    // and one bucket (with overlap_comm each bucket would need its own).
    // Without overlap_comm the bucket is all-reduced in kPieces consecutive
    // pieces (and the result buffer is one piece): the communicator's and
    // Open MPI's temporaries are a piece's size too.
    piece_ = overlap ? capacity_ : std::max<int64_t>(1, (capacity_ + kPieces - 1) / kPieces);
    const bool out_of_place = mode_ == Mode::ReduceScatter || (dtype_ == DType::F32 && !overlap);
    const int64_t received = mode_ == Mode::ReduceScatter ? capacity_ : piece_;
    for (int i = 0; i < n; ++i) {
        buckets_[i].buffer = Tensor::empty({size}, dtype_, device, alloc, MemCategory::Buffers);
        if (out_of_place)
            buckets_[i].received = Tensor::empty({received}, dtype_, device, alloc, MemCategory::Buffers);
    }
}

bool BucketReducer::idle() const {
    return buckets_[0].fill == 0 && !buckets_[0].request && buckets_[1].fill == 0 && !buckets_[1].request;
}

int64_t BucketReducer::footprint(size_t index) const {
    return mode_ == Mode::AllReduce ? numel_[index] : chunk_[index];
}

void BucketReducer::add(size_t index, const void* grad, int gdtype, float scale) {
    const int64_t need = footprint(index);
    if (numel_[index] == 0) return;
    if (need > capacity_ && mode_ == Mode::AllReduce) {
        add_in_pieces(index, grad, gdtype, scale);
        return;
    }
    DS_CHECK(need <= capacity_, DS_ERR_INTERNAL, "gradient bucket of %lld elements cannot hold %lld",
             static_cast<long long>(capacity_), static_cast<long long>(need));
    Bucket* b = &buckets_[current_];
    if (b->fill + need > capacity_) {  // flush before it would overflow (DeepSpeed's rule)
        start(*b);
        if (overlap_) {
            current_ ^= 1;
            b = &buckets_[current_];
            if (b->request) finish(*b);  // its previous reduction must land before reuse
        } else {
            finish(*b);
        }
    }
    place(*b, index, grad, gdtype, scale);
}

// What is buffered is reduced first (arrival order), then each piece of at
// most capacity elements is placed, reduced and its owned fragments added
// before the next: the same additions, element by element, as one bucket
// holding the whole parameter.
void BucketReducer::add_in_pieces(size_t index, const void* grad, int gdtype, float scale) {
    Bucket& other = buckets_[current_ ^ 1];
    if (other.request) finish(other);
    Bucket& b = buckets_[current_];
    start(b);
    finish(b);
    const int bk = dtype_to_kernel(dtype_);
    const int64_t gs = gdtype == DSK_F32 ? 4 : 2;
    for (int64_t begin = 0; begin < numel_[index]; begin += capacity_) {
        const int64_t len = std::min(capacity_, numel_[index] - begin);
        char* dst = static_cast<char*>(b.buffer.data_ptr());
        b.buffer.view({len}).zero();
        kernels_.axpy(dst, bk, static_cast<const char*>(grad) + begin * gs, gdtype, scale, static_cast<size_t>(len));
        b.entries.push_back({index, 0, begin, len});
        b.fill = len;
        start(b);
        finish(b);
    }
}

// Writes scale * grad into the bucket (AllReduce: at `fill`; ReduceScatter:
// chunk r at segment r, offset `fill`, zero-padded).
void BucketReducer::place(Bucket& b, size_t index, const void* grad, int gdtype, float scale) {
    const int bk = dtype_to_kernel(dtype_);
    const int64_t es = static_cast<int64_t>(b.buffer.element_size());
    const int64_t gs = gdtype == DSK_F32 ? 4 : 2;
    char* base = static_cast<char*>(b.buffer.data_ptr());  // host or device memory: touched by kernels and views only
    if (mode_ == Mode::AllReduce) {
        char* dst = base + b.fill * es;
        b.buffer.view({numel_[index]}, b.fill).zero();
        kernels_.axpy(dst, bk, grad, gdtype, scale, static_cast<size_t>(numel_[index]));
    } else {
        const int64_t c = chunk_[index], n = numel_[index];
        for (int32_t r = 0; r < world_; ++r) {
            char* dst = base + (r * capacity_ + b.fill) * es;
            b.buffer.view({c}, r * capacity_ + b.fill).zero();
            const int64_t begin = r * c, len = std::max<int64_t>(0, std::min(c, n - begin));
            if (len > 0)
                kernels_.axpy(dst, bk, static_cast<const char*>(grad) + begin * gs, gdtype, scale,
                         static_cast<size_t>(len));
        }
    }
    b.entries.push_back({index, b.fill});
    b.fill += footprint(index);
}

void BucketReducer::start(Bucket& b) {
    if (b.fill == 0) return;
    void* p = b.buffer.data_ptr();
    if (mode_ == Mode::AllReduce && !overlap_) return;  // reduced piece by piece in finish
    if (mode_ == Mode::AllReduce) {
        void* out = b.received.defined() ? b.received.data_ptr() : p;
        b.request = comm_->allreduce_async(p, out, static_cast<size_t>(b.fill), dtype_, comm::Op::Sum);
        return;
    }
    if (b.fill < capacity_) compact(b);
    b.request = comm_->reduce_scatter_async(p, b.received.data_ptr(), static_cast<size_t>(b.fill), dtype_,
                                            comm::Op::Sum);
}

// Segments sit capacity apart; a partial bucket is compacted so segment r
// starts at r * fill, as the reduce-scatter expects. The ranges may overlap:
// on the host a memmove; in device memory, where a copy must not overlap,
// each segment goes through the (still unused) result buffer.
void BucketReducer::compact(Bucket& b) {
    if (b.buffer.device().is_cpu()) {
        const size_t es = b.buffer.element_size();
        char* base = static_cast<char*>(b.buffer.data_ptr());
        for (int32_t r = 1; r < world_; ++r)
            std::memmove(base + static_cast<size_t>(r * b.fill) * es, base + static_cast<size_t>(r * capacity_) * es,
                         static_cast<size_t>(b.fill) * es);
        return;
    }
    Tensor bounce = b.received.view({b.fill}, 0);
    for (int32_t r = 1; r < world_; ++r) {
        bounce.copy_from(b.buffer.view({b.fill}, r * capacity_));
        b.buffer.view({b.fill}, r * b.fill).copy_from(bounce);
    }
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
    const int64_t es = static_cast<int64_t>(b.buffer.element_size());
    char* part = static_cast<char*>(partition_.data_ptr());
    if (mode_ == Mode::AllReduce && !overlap_) {
        // Piece by piece, each into the result buffer (or in place), its owned
        // fragments added before the next: every partition element still gets
        // its additions in entry order.
        char* base = static_cast<char*>(b.buffer.data_ptr());
        for (int64_t off = 0; off < b.fill; off += piece_) {
            const int64_t len = std::min(piece_, b.fill - off);
            char* in = base + off * es;
            char* out = b.received.defined() ? static_cast<char*>(b.received.data_ptr()) : in;
            comm_->allreduce_async(in, out, static_cast<size_t>(len), dtype_, comm::Op::Sum)->wait();
            add_owned(b, out, off, off + len);
        }
    } else if (mode_ == Mode::AllReduce) {
        const Tensor& sum = b.received.defined() ? b.received : b.buffer;
        add_owned(b, static_cast<const char*>(sum.data_ptr()), 0, b.fill);
    } else {
        const char* got = static_cast<const char*>(b.received.data_ptr());
        for (const Entry& e : b.entries)
            kernels_.axpy(part + rank_offset_[e.index] * es, bk, got + e.offset * es, bk, 1.0f,
                     static_cast<size_t>(chunk_[e.index]));
    }
    b.entries.clear();
    b.fill = 0;
}

// The owned fragments of b's entries that lie in bucket elements [lo, hi),
// whose reduced values are at src (element lo first), added into the partition.
void BucketReducer::add_owned(const Bucket& b, const char* src, int64_t lo, int64_t hi) {
    const int bk = dtype_to_kernel(dtype_);
    const int64_t es = static_cast<int64_t>(b.buffer.element_size());
    char* part = static_cast<char*>(partition_.data_ptr());
    for (const Entry& e : b.entries) {
        const int64_t e_end = e.len < 0 ? numel_[e.index] : e.begin + e.len;
        for (const FlatFragment& f : flat_->fragments[e.index]) {
            if (f.rank != rank_) continue;
            // Param elements [a, z): in the owned fragment, in this entry's
            // piece of the param, and at bucket positions inside [lo, hi).
            const int64_t a = std::max({f.param_offset, e.begin, lo - e.offset + e.begin});
            const int64_t z = std::min({f.param_offset + f.length, e_end, hi - e.offset + e.begin});
            if (a >= z) continue;
            kernels_.axpy(part + (f.partition_offset + (a - f.param_offset)) * es, bk,
                          src + (e.offset + (a - e.begin) - lo) * es, bk, 1.0f, static_cast<size_t>(z - a));
        }
    }
}

void BucketReducer::flush() {
    // Older reduction first so gradients are added in arrival order.
    Bucket& other = buckets_[current_ ^ 1];
    if (other.request) finish(other);
    Bucket& cur = buckets_[current_];
    start(cur);
    finish(cur);
}

void BucketReducer::discard() noexcept {
    for (Bucket& b : buckets_) {
        if (b.request) {
            try {
                b.request->wait();
            } catch (...) {  // a failed reduction: nothing of it is kept either way
            }
            b.request.reset();
        }
        b.entries.clear();
        b.fill = 0;
    }
}

}  // namespace ds::zero
