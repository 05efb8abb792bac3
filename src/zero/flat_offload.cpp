// The flat stages with optimizer state on NVMe (offload_optimizer.h): the
// layout (working weights and gradients in memory, master and state in the
// swap file) and the full-tensor copies read from / written to the file.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

#include "core/error.h"
#include "zero/flat_strategy.h"

namespace ds::zero {

// Memory at init stays near max(registration copies, working + gradients):
// each parameter's fp32 registration copy is converted into the working
// buffer and freed as soon as the swap file holds all of it, the working
// buffer's pages are touched only as parameters land in it, the freed
// copies are unmapped at once (not cached), and the gradient buffer comes last.
// (Laying it all out first held copies + working + gradients at once: at
// 3e9 bf16 parameters 12 + 6 + 6 GB.)
void FlatStrategy::materialize_offloaded(ParamStore& params, size_t n_states, DType state_dtype, bool whole) {
    const FlatPartitionLayout& L = flat_.layout;
    Allocator& alloc = *ctx_.alloc;
    const Device cpu = Device::cpu();
    const int64_t wes = static_cast<int64_t>(dtype_size(ctx_.working_dtype));
    // The working copy is its own buffer even in fp32 (the master is on
    // disk). Zeroed where no trainable parameter lands (padding, gaps).
    std::vector<std::pair<int64_t, int64_t>> covered;  // (flat offset, numel) of trainable parameters
    for (Param& p : params.all())
        if (p.trainable && p.numel > 0)
            covered.emplace_back(L.param_flat_offset[static_cast<size_t>(p.trainable_index)], p.numel);
    std::sort(covered.begin(), covered.end());
    if (flat_.padded > 0) {
        flat_.working = working_buffer(flat_.padded, ctx_.working_dtype, cpu, /*zeroed=*/false);
        char* w = static_cast<char*>(flat_.working.data_ptr());
        int64_t at = 0;
        for (const auto& [off, len] : covered) {
            if (off > at) std::memset(w + at * wes, 0, static_cast<size_t>((off - at) * wes));
            at = std::max(at, off + len);
        }
        if (flat_.padded > at) std::memset(w + at * wes, 0, static_cast<size_t>((flat_.padded - at) * wes));
    }
    // The rank's master range, piece by piece from the registered values,
    // and the parameters' spans in it (whole parameters: Lamb's sub-groups).
    std::vector<InitPiece> pieces;
    std::vector<std::pair<int64_t, int64_t>> spans;
    struct Pending {
        int64_t end;  // range element after this parameter's last piece (0: none here)
        Param* p;
    };
    std::vector<Pending> pending;
    for (Param& p : params.all()) {
        if (!p.trainable || p.numel == 0) continue;
        const size_t ti = static_cast<size_t>(p.trainable_index);
        const float* init = p.master.data<float>();
        int64_t end = 0;
        for (const FlatFragment& f : L.fragments[ti]) {
            if (!whole && f.rank != rank_) continue;
            const int64_t dst = whole ? f.flat_offset : f.partition_offset;
            pieces.push_back({dst, f.length, init + f.param_offset});
            end = std::max(end, dst + f.length);
            if (!whole) spans.emplace_back(dst, f.length);
        }
        if (whole) spans.emplace_back(L.param_flat_offset[ti], p.numel);
        pending.push_back({end, &p});
    }
    std::sort(pending.begin(), pending.end(), [](const Pending& a, const Pending& b) { return a.end < b.end; });
    size_t next = 0;
    // Parameters whose values are all on disk: into the working buffer, registration copy freed.
    // The freed copies are unmapped at once: the allocator's cache of freed
    // mappings would keep them resident up to its high-water mark.
    auto land = [&](int64_t upto) {
        const size_t first = next;
        for (; next < pending.size() && pending[next].end <= upto; ++next) {
            Param& p = *pending[next].p;
            p.flat_offset = L.param_flat_offset[static_cast<size_t>(p.trainable_index)];
            p.working = flat_.working.view(p.shape, p.flat_offset);
            p.working.copy_from(p.master);
            p.master = Tensor();  // in the swap file
        }
        if (next > first) Allocator::release_cached();
    };
    start_offload(std::move(pieces), std::move(spans), n_states, state_dtype, land);
    land(INT64_MAX);
    if (flat_.padded > 0)
        flat_.grad = Tensor::zeros({flat_.grad_partitioned ? flat_.part_numel : flat_.padded}, ctx_.grad_dtype, cpu,
                                   alloc, MemCategory::Grads);
    for (Param& p : params.all()) {
        if (!p.trainable) {
            ParamStore::materialize_frozen(p, ctx_.working_dtype, alloc);
            continue;
        }
        if (p.numel == 0) {
            p.flat_offset = L.param_flat_offset[static_cast<size_t>(p.trainable_index)];
            p.working = flat_.working.view(p.shape, p.flat_offset);
            p.working.copy_from(p.master);
            p.master = Tensor();
        }
        if (!flat_.grad_partitioned) p.grad = flat_.grad.view(p.shape, p.flat_offset);
        p.grad_stale = true;
    }
}

void FlatStrategy::start_offload(std::vector<InitPiece> pieces, std::vector<std::pair<int64_t, int64_t>> spans,
                                 size_t n_states, DType state_dtype, const std::function<void(int64_t)>& written) {
    std::sort(pieces.begin(), pieces.end(), [](const InitPiece& a, const InitPiece& b) { return a.dst < b.dst; });
    std::sort(spans.begin(), spans.end());
    offload_ = std::make_unique<OffloadOptimizer>(*ctx_.config, rank_, flat_.part_numel, n_states, state_dtype,
                                                  std::move(spans), *ctx_.alloc, ctx_.kernels);
    offload_->initialize([&](int64_t begin, int64_t count, float* dst) {
        if (written) written(begin);  // sub-groups before this one are on disk
        for (const InitPiece& pc : pieces) {
            const int64_t a = std::max(begin, pc.dst), b = std::min(begin + count, pc.dst + pc.len);
            if (a < b) std::memcpy(dst + (a - begin), pc.src + (a - pc.dst), static_cast<size_t>(b - a) * sizeof(float));
        }
    });
}

// The offloaded master (t = 0) or state t - 1 of `p`: from the file,
// gathered across ranks where the state is partitioned.
void FlatStrategy::read_full_offloaded(Param& p, size_t t, Tensor& dst) {
    const DType dt = offload_->dtype(t);
    const int dk = dtype_to_kernel(dt);
    const size_t es = dtype_size(dt);
    std::vector<uint8_t> raw;
    if (!flat_.optimizer_partitioned) {
        raw.resize(static_cast<size_t>(p.numel) * es);
        offload_->read(t, p.flat_offset, p.numel, raw.data());
        ctx_.kernels.convert(raw.data(), dk, dst.data<float>(), DSK_F32, static_cast<size_t>(p.numel));
        return;
    }
    gather_partitioned(p, [&](const FlatFragment& f, float* out) {
        raw.resize(static_cast<size_t>(f.length) * es);
        offload_->read(t, f.partition_offset, f.length, raw.data());
        ctx_.kernels.convert(raw.data(), dk, out, DSK_F32, static_cast<size_t>(f.length));
    }, dst.data<float>());
}

void FlatStrategy::write_full_offloaded(Param& p, size_t t, const Tensor& src) {
    Tensor value32 = src.is_contiguous() && src.dtype() == DType::F32 ? src
                                                                       : src.to(DType::F32, *ctx_.alloc, MemCategory::Buffers);
    const float* v = value32.data<float>();
    const DType dt = offload_->dtype(t);
    const int dk = dtype_to_kernel(dt);
    const size_t es = dtype_size(dt);
    std::vector<uint8_t> raw;
    auto put = [&](int64_t param_offset, int64_t range_offset, int64_t length) {
        raw.resize(static_cast<size_t>(length) * es);
        ctx_.kernels.convert(v + param_offset, DSK_F32, raw.data(), dk, static_cast<size_t>(length));
        offload_->write(t, range_offset, length, raw.data());
    };
    if (!flat_.optimizer_partitioned) {
        put(0, p.flat_offset, p.numel);
    } else {
        for (const FlatFragment& f : flat_.layout.fragments[static_cast<size_t>(p.trainable_index)])
            if (f.rank == rank_) put(f.param_offset, f.partition_offset, f.length);
    }
    if (t != 0) return;
    // The working weights: this rank's chunks at ZeRO-3 (whole ones only while gathered), else whole.
    if (!flat_.chunk.empty()) {
        const int wk = dtype_to_kernel(ctx_.working_dtype);
        const int64_t wes = static_cast<int64_t>(dtype_size(ctx_.working_dtype));
        for (const FlatFragment& f : flat_.layout.fragments[static_cast<size_t>(p.trainable_index)])
            if (f.rank == rank_)
                ctx_.kernels.convert(v + f.param_offset, DSK_F32,
                                     static_cast<char*>(flat_.working.data_ptr()) + f.partition_offset * wes, wk,
                                     static_cast<size_t>(f.length));
    }
    if (p.working.defined()) p.working.copy_from(src);
}

Holding FlatStrategy::offloaded_holding(Param& p) {
    Holding h;
    if (!p.trainable || p.numel == 0) return h;
    if (!flat_.optimizer_partitioned) {
        h.ranges.push_back({0, p.numel, p.flat_offset});
    } else {
        for (const FlatFragment& f : flat_.layout.fragments[static_cast<size_t>(p.trainable_index)])
            if (f.rank == rank_) h.ranges.push_back({f.param_offset, f.length, f.partition_offset});
    }
    if (!h.ranges.empty()) {
        OffloadOptimizer* off = offload_.get();
        h.read = [off](size_t t, int64_t dst, int64_t count, void* out) { off->read(t, dst, count, out); };
    }
    return h;
}

// The master (from the working weights widened, or the saved fp32 masters)
// and the states of each range this rank holds, written into the swap file
// one overlap at a time (memory: one fragment's overlap).
void FlatStrategy::load_fragments_offloaded(Param& p, const uint8_t* working, const std::vector<SavedFragment>& saved,
                                            bool master_from_fp32) {
    const Holding h = offloaded_holding(p);
    const int wk = dtype_to_kernel(ctx_.working_dtype);
    const int64_t wes = static_cast<int64_t>(dtype_size(ctx_.working_dtype));
    std::vector<float> master;
    for (const OwnedRange& r : h.ranges) {
        if (!master_from_fp32) {
            master.resize(static_cast<size_t>(r.length));
            ctx_.kernels.convert(working + r.param_offset * wes, wk, master.data(), DSK_F32, static_cast<size_t>(r.length));
            offload_->write(0, r.dst, r.length, master.data());
        }
        for (const SavedFragment& g : saved) {
            const int64_t a = std::max(r.param_offset, g.offset);
            const int64_t b = std::min(r.param_offset + r.length, g.offset + g.numel);
            if (a >= b) continue;
            const int64_t dst = r.dst + (a - r.param_offset), src = a - g.offset;
            if (master_from_fp32) offload_->write(0, dst, b - a, g.master + src * 4);
            for (size_t i = 0; i < g.states.size(); ++i) {
                const int64_t es = static_cast<int64_t>(dtype_size(offload_->dtype(1 + i)));
                offload_->write(1 + i, dst, b - a, g.states[i] + src * es);
            }
        }
    }
}

void FlatStrategy::disk_bytes(int64_t* params, int64_t* optimizer_state) const {
    *params = *optimizer_state = 0;
    if (!offload_) return;
    const NvmeSwapper& s = offload_->swapper();
    *params = s.tensor_disk_bytes(0);
    *optimizer_state = s.disk_bytes() - *params;
}

}  // namespace ds::zero
