// The debugging copies (DeepSpeed's safe_get_full_* / safe_set_full_*) on
// the flat buffers: a parameter's fp32 master, gradient or optimizer state
// as one fp32 tensor. Where ZeRO partitions them, read gathers the
// fragments from every rank (a collective: every rank calls it with the
// same name) and write stores this rank's fragments (every rank passes the
// same value). A device-resident engine's buffers are in device memory:
// only the one parameter's slice crosses to or from the host.
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/tensor_transfer.h"
#include "zero/flat_strategy.h"

namespace ds::zero {

namespace {

// The tensor holding the whole parameter's copy on this rank, or an
// undefined Tensor when it is partitioned (then `flat` is the partition).
struct FullSource {
    Tensor whole;
    Tensor flat;         // partition buffer (part_numel elements)
    bool stale = false;  // a gradient that holds nothing this window: zeros
};

FullSource full_source(Param& p, FullTensor which, size_t state, FlatBuffers& flat) {
    FullSource s;
    switch (which) {
        case FullTensor::Param:
            s.whole = p.master;
            s.flat = flat.master;
            break;
        case FullTensor::Grad:
            s.whole = p.grad;
            s.flat = flat.grad;
            s.stale = p.grad.defined() ? p.grad_stale : flat.grad_stale;
            break;
        case FullTensor::OptimizerState:
            s.whole = p.state.empty() ? Tensor() : p.state[state];
            s.flat = flat.state[state];
            break;
    }
    return s;
}

}  // namespace

void FlatStrategy::read_full(Param& p, FullTensor which, size_t state, Tensor& dst) {
    if (offload_ && p.trainable && which != FullTensor::Grad) {
        read_full_offloaded(p, which == FullTensor::Param ? 0 : 1 + state, dst);
        return;
    }
    FullSource s = full_source(p, which, state, flat_);
    if (!p.trainable || s.whole.defined()) {
        if (s.stale) dst.zero();
        else copy_converting(dst, s.whole, *ctx_.alloc);
        return;
    }
    // Partitioned: this rank's fragments from the partition buffer (zeros
    // for a gradient that holds nothing this window), each crossing from the
    // device on its own on a device-resident engine.
    gather_partitioned(p, [&](const FlatFragment& f, float* out) {
        if (s.stale) {
            std::fill(out, out + f.length, 0.0f);
            return;
        }
        Tensor to = Tensor::borrow(out, {f.length}, {}, DType::F32, Device::cpu());
        copy_converting(to, s.flat.view({f.length}, f.partition_offset), *ctx_.alloc);
    }, dst.data<float>());
}

// Every rank packs its fragments (in fp32, through `read_mine`) into a block
// of the largest rank's size, an all-gather exchanges the blocks, and each
// rank unpacks every rank's fragments. Exact, including -0.0.
void FlatStrategy::gather_partitioned(Param& p, const FragmentReader& read_mine, float* d) {
    const std::vector<FlatFragment>& frags = flat_.layout.fragments[static_cast<size_t>(p.trainable_index)];
    std::vector<int64_t> per_rank(static_cast<size_t>(world_), 0);
    for (const FlatFragment& f : frags) per_rank[static_cast<size_t>(f.rank)] += f.length;
    int64_t block = 1;
    for (int64_t n : per_rank) block = std::max(block, n);
    std::vector<float> mine(static_cast<size_t>(block), 0.0f);
    int64_t pos = 0;
    for (const FlatFragment& f : frags) {
        if (f.rank != rank_) continue;
        read_mine(f, mine.data() + pos);
        pos += f.length;
    }
    std::vector<float> all(static_cast<size_t>(block * world_));
    comm_.allgather(mine.data(), all.data(), static_cast<size_t>(block), DType::F32);
    std::vector<int64_t> cursor(static_cast<size_t>(world_), 0);
    for (const FlatFragment& f : frags) {
        const float* src = all.data() + f.rank * block + cursor[static_cast<size_t>(f.rank)];
        std::memcpy(d + f.param_offset, src, static_cast<size_t>(f.length) * sizeof(float));
        cursor[static_cast<size_t>(f.rank)] += f.length;
    }
}

void FlatStrategy::write_full(Param& p, FullTensor which, size_t state, const Tensor& src) {
    if (offload_ && p.trainable && which != FullTensor::Grad) {
        write_full_offloaded(p, which == FullTensor::Param ? 0 : 1 + state, src);
        return;
    }
    FullSource s = full_source(p, which, state, flat_);
    if (!p.trainable || s.whole.defined()) {
        copy_converting(s.whole, src, *ctx_.alloc);
        if (which == FullTensor::Grad) {
            p.grad_stale = false;
            p.norm_cached = false;
        }
    } else {
        // Partitioned: write this rank's fragments.
        Tensor value32 = src.is_contiguous() ? src : src.to(DType::F32, *ctx_.alloc, MemCategory::Buffers);
        if (which == FullTensor::Grad) clear_stale_partition();
        for (const FlatFragment& f : flat_.layout.fragments[static_cast<size_t>(p.trainable_index)]) {
            if (f.rank != rank_ || f.length == 0) continue;
            Tensor to = s.flat.view({f.length}, f.partition_offset);
            copy_converting(to, value32.view({f.length}, f.param_offset), *ctx_.alloc);
        }
    }
    if (which == FullTensor::Param && p.working.data_ptr() != p.master.data_ptr())
        copy_converting(p.working, src, *ctx_.alloc);
}

}  // namespace ds::zero
