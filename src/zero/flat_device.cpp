// Flat buffers in a GPU's memory (a device-resident engine, ZeRO 0-2 here,
// ZeRO-3's chunks in stage3.cpp; with several ranks they move over
// StrategyContext::data_comm): placing the
// initial values there, and parking on the host
// (strategy.h, "device-resident buffers") so that the checkpoint code, which
// reads and writes host memory, runs unchanged (the full copies move one
// parameter's slice instead: flat_full_copy.cpp).
#include "core/error.h"
#include "zero/flat_strategy.h"

namespace ds::zero {

namespace {

// A host tensor with `d`'s shape, dtype and values (undefined for undefined).
Tensor host_copy(const Tensor& d, Allocator& alloc) {
    if (!d.defined()) return Tensor();
    Tensor h = Tensor::empty(d.shape(), d.dtype(), Device::cpu(), alloc, MemCategory::Buffers);
    h.copy_from(d);
    return h;
}

bool same_storage(const Tensor& a, const Tensor& b) {
    return a.defined() && b.defined() && a.data_ptr() == b.data_ptr();
}

void copy_defined(Tensor& dst, const Tensor& src) {
    if (dst.defined()) dst.copy_from(src);
}

}  // namespace

void FlatStrategy::point_views() {
    for (Param& p : params_->all()) {
        if (!p.trainable || flat_.chunked) continue;  // ZeRO-3 keeps no views (its gathered copies: stage3.cpp)
        p.working = flat_.working.view(p.shape, p.flat_offset);
        if (!flat_.optimizer_partitioned) {
            p.master = flat_.master.view(p.shape, p.flat_offset);
            p.state.clear();
            for (Tensor& s : flat_.state) p.state.push_back(s.view(p.shape, p.flat_offset));
        }
        if (!flat_.grad_partitioned) p.grad = flat_.grad.view(p.shape, p.flat_offset);
    }
}

// `p.master` holds the initial values (host, fp32, already rounded through
// the working dtype by ParamStore::add): they become the device master (whole,
// or the fragments this rank owns), and the working copy is converted from
// them on the device (exact: the values are representable). A frozen
// parameter gets a device copy of its working weights.
void FlatStrategy::place_on_device(Param& p, bool whole) {
    Allocator& alloc = *ctx_.alloc;
    if (!p.trainable) {
        Tensor d = Tensor::empty(p.shape, p.working.dtype(), ctx_.device, alloc, MemCategory::Params);
        d.copy_from(p.working);
        p.working = d;
        return;
    }
    const Tensor init = p.master;
    if (!whole) {
        place_partitioned_on_device(p, init);
        return;
    }
    p.master = flat_.master.view(p.shape, p.flat_offset);
    p.master.copy_from(init);
    p.working = flat_.working.view(p.shape, p.flat_offset);
    if (ctx_.working_dtype != DType::F32 && p.numel > 0)
        ctx_.kernels.convert(p.master.data_ptr(), DSK_F32, p.working.data_ptr(), dtype_to_kernel(ctx_.working_dtype),
                             static_cast<size_t>(p.numel));
    p.state.clear();
    for (Tensor& s : flat_.state) p.state.push_back(s.view(p.shape, p.flat_offset));
    p.grad = flat_.grad.view(p.shape, p.flat_offset);
    p.grad_stale = true;
}

// ZeRO 1/2 with several ranks: this rank's fragments of the master, the
// whole working copy (every rank holds it below ZeRO-3), the gradient whole
// at stage 1; partitioned master, state and (stage 2) gradient have no
// per-parameter views, as on the CPU.
void FlatStrategy::place_partitioned_on_device(Param& p, const Tensor& init) {
    for (const FlatFragment& f : flat_.layout.fragments[static_cast<size_t>(p.trainable_index)]) {
        if (f.rank != rank_ || f.length == 0) continue;
        flat_.master.view({f.length}, f.partition_offset).copy_from(init.view({f.length}, f.param_offset));
    }
    p.master = Tensor();
    p.working = flat_.working.view(p.shape, p.flat_offset);
    if (ctx_.working_dtype == DType::F32) {
        p.working.copy_from(init);
    } else if (p.numel > 0) {
        Tensor init_here = Tensor::empty(p.shape, DType::F32, ctx_.device, *ctx_.alloc, MemCategory::Buffers);
        init_here.copy_from(init);
        ctx_.kernels.convert(init_here.data_ptr(), DSK_F32, p.working.data_ptr(), dtype_to_kernel(ctx_.working_dtype),
                             static_cast<size_t>(p.numel));
    }
    p.state.clear();
    if (!flat_.grad_partitioned) p.grad = flat_.grad.view(p.shape, p.flat_offset);
    p.grad_stale = true;
}

void FlatStrategy::park_on_host() {
    if (parked_ || ctx_.device.is_cpu()) return;
    Allocator& alloc = *ctx_.alloc;
    // Every copy first: a failure leaves everything on the device.
    FlatBuffers host;
    host.master = host_copy(flat_.master, alloc);
    // Working chunks kept in host memory (offload_param) are used in place:
    // with "nvme" most of their pages are in the swap file, which only the
    // strategy's swapper reads.
    host.working = same_storage(flat_.working, flat_.master) ? host.master
                   : flat_.working_on_host                   ? flat_.working
                                                             : host_copy(flat_.working, alloc);
    host.grad = host_copy(flat_.grad, alloc);
    for (const Tensor& s : flat_.state) host.state.push_back(host_copy(s, alloc));
    auto parked = std::make_unique<Parked>();
    std::vector<Tensor> frozen_host;
    for (Param& p : params_->all()) {
        if (p.trainable || !p.working.defined()) continue;
        // fp32: the working weights are the (host) master, as on a CPU engine.
        frozen_host.push_back(p.working.dtype() == DType::F32 ? p.master : host_copy(p.working, alloc));
        parked->frozen.emplace_back(&p, p.working);
    }
    size_t i = 0;
    for (auto& f : parked->frozen) f.first->working = frozen_host[i++];
    std::swap(parked->device.master, flat_.master);
    std::swap(parked->device.working, flat_.working);
    std::swap(parked->device.grad, flat_.grad);
    std::swap(parked->device.state, flat_.state);
    flat_.master = host.master;
    flat_.working = host.working;
    flat_.grad = host.grad;
    flat_.state = host.state;
    parked->kernels = ctx_.kernels;
    ctx_.kernels = cpu_kernels();
    parked_ = std::move(parked);
    point_views();
}

void FlatStrategy::unpark(bool write_back) {
    if (!parked_) return;
    FlatBuffers& d = parked_->device;
    if (write_back) {  // a failure here leaves the engine parked, its state whole on the host
        copy_defined(d.master, flat_.master);
        if (!same_storage(d.working, d.master) && !same_storage(d.working, flat_.working))
            copy_defined(d.working, flat_.working);
        copy_defined(d.grad, flat_.grad);
        for (size_t i = 0; i < d.state.size(); ++i) copy_defined(d.state[i], flat_.state[i]);
        for (auto& [p, dev] : parked_->frozen) dev.copy_from(p->working);
    }
    flat_.master = d.master;
    flat_.working = d.working;
    flat_.grad = d.grad;
    flat_.state = d.state;
    for (auto& [p, dev] : parked_->frozen) p->working = dev;
    ctx_.kernels = parked_->kernels;
    parked_.reset();
    point_views();
}

}  // namespace ds::zero
