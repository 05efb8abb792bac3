// The data-parallel parts of a step (reference §5.3, §5.4, §6.1):
// gradient averaging at ZeRO 0/1, the global norm and overflow flag across
// ranks, and the all-gather of updated working weights at ZeRO >= 1.
#include <cstring>

#include "core/error.h"
#include "engine/engine.h"
#include "kernels.h"
#include "zero/partition.h"

namespace ds {

// (scale before the reduction, scale after it) for the data-parallel mean
// (reference §5.3). "sum" drops every division by the world size. ZeRO 1/2
// with reduce_scatter divide by N before communicating and ignore
// gradient_predivide_factor; otherwise the engine's pre/post formula.
std::pair<float, float> Engine::reduction_scales() const {
    const double n = static_cast<double>(world_size_);
    if (config_.gradient_allreduce_op == "sum" || world_size_ == 1) return {1.0f, 1.0f};
    if (zero_stage_ >= 1 && config_.zero_optimization.reduce_scatter)
        return {static_cast<float>(1.0 / n), 1.0f};
    if (config_.prescale_gradients) return {static_cast<float>(1.0 / n), 1.0f};
    const double f = config_.gradient_predivide_factor;
    return {static_cast<float>(1.0 / f), static_cast<float>(f / n)};
}

void Engine::reduce_full_gradients() {
    FlatBuffers& flat = params_.flat();
    if (world_size_ == 1 || flat.grad_partitioned || reduced_this_window_ || flat.padded == 0) return;
    const auto [pre, post] = reduction_scales();
    const int gk = dtype_to_kernel(grad_dtype_);
    char* g = static_cast<char*>(flat.grad.data_ptr());
    const size_t es = flat.grad.element_size();
    const int64_t total = flat.padded;
    // Buckets: ZeRO-1 reduces in reduce_bucket_size pieces, the engine's
    // fallback (ZeRO-0) in DeepSpeed's fixed 5e8-element buckets.
    const int64_t bucket = zero_stage_ >= 1 ? std::max<int64_t>(1, config_.zero_optimization.reduce_bucket_size)
                                            : 500000000;
    if (pre != 1.0f) dsk_scale(g, gk, pre, static_cast<size_t>(total));
    for (int64_t off = 0; off < total; off += bucket) {
        const int64_t len = std::min(bucket, total - off);
        void* p = g + off * static_cast<int64_t>(es);
        comm_->allreduce(p, p, static_cast<size_t>(len), grad_dtype_, comm::Op::Sum);
    }
    if (post != 1.0f) dsk_scale(g, gk, post, static_cast<size_t>(total));
    reduced_this_window_ = true;
}

void Engine::global_norm_and_overflow(double* sumsq, bool* overflow) {
    FlatBuffers& flat = params_.flat();
    const int gk = dtype_to_kernel(grad_dtype_);
    // The range this rank owns; without partitioning every rank holds the
    // same reduced gradient and the local norm is the global one.
    const bool split = partitioned();
    const int64_t begin = split && !flat.grad_partitioned ? flat.part_begin : 0;
    const int64_t count = split ? flat.part_numel : flat.numel;
    int nonfinite = 0;
    double local = 0.0;
    if (count > 0)
        local = dsk_sumsq(static_cast<const char*>(flat.grad.data_ptr()) + begin * static_cast<int64_t>(flat.grad.element_size()),
                          gk, static_cast<size_t>(count), &nonfinite);
    if (!split) {
        *sumsq = local;
        *overflow = nonfinite != 0;
        return;
    }
    // Exchange (sumsq, overflow) and add in rank order: every rank gets the
    // bit-identical norm (DeepSpeed: fp64 norms all-reduced over the group).
    struct Part {
        double sumsq;
        int64_t overflow;
    } mine{local, nonfinite != 0 ? 1 : 0};
    std::vector<Part> all(static_cast<size_t>(world_size_));
    comm_->allgather(&mine, all.data(), sizeof(Part), DType::U8);
    double total = 0.0;
    bool any = false;
    for (const Part& p : all) {
        total += p.sumsq;
        any = any || p.overflow != 0;
    }
    *sumsq = total;
    *overflow = any;
}

void Engine::allgather_working() {
    FlatBuffers& flat = params_.flat();
    const int64_t P = flat.part_numel;
    if (P == 0) return;
    char* w = static_cast<char*>(flat.working.data_ptr());
    const int64_t es = static_cast<int64_t>(flat.working.element_size());
    // In place: rank r's partition is already at [r*P, (r+1)*P). Sharded as
    // DeepSpeed does when the group exceeds allgather_bucket_size.
    const std::vector<int64_t> bounds =
        zero::allgather_shard_bounds(P, world_size_, config_.zero_optimization.allgather_bucket_size);
    if (bounds.size() <= 2) {
        comm_->allgather(w + rank_ * P * es, w, static_cast<size_t>(P), working_dtype_);
        return;
    }
    // Shards: gather piece [a, b) of every partition through a staging buffer.
    int64_t widest = 0;
    for (size_t i = 0; i + 1 < bounds.size(); ++i) widest = std::max(widest, bounds[i + 1] - bounds[i]);
    std::vector<char> stage(static_cast<size_t>(widest * world_size_ * es));
    for (size_t i = 0; i + 1 < bounds.size(); ++i) {
        const int64_t a = bounds[i], len = bounds[i + 1] - bounds[i];
        comm_->allgather(w + (rank_ * P + a) * es, stage.data(), static_cast<size_t>(len), working_dtype_);
        for (int r = 0; r < world_size_; ++r)
            if (r != rank_)
                std::memcpy(w + (r * P + a) * es, stage.data() + r * len * es, static_cast<size_t>(len * es));
    }
}

}  // namespace ds

namespace ds {

// DeepSpeed broadcasts the model from rank 0 at initialize; the engine does
// the same with every parameter's initial values (init has already checked
// that every rank registered the same parameters: rank_agreement.h).
void Engine::sync_initial_params() {
    if (world_size_ == 1) return;
    for (Param& p : params_.all())
        if (p.numel > 0) comm_->broadcast(p.master.data_ptr(), static_cast<size_t>(p.numel), DType::F32, 0);
}

}  // namespace ds
