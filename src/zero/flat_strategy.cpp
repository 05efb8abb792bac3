// The operations on the flat buffers that the stage families share
// (DEEPSPEED_SEMANTICS.md §5.3, §5.4, §6.1): layout, accumulation with the norm, the
// boundary all-reduce, the norm across ranks, and the optimizer over this
// rank's range.
#include "zero/flat_strategy.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "core/error.h"
#include "core/tensor_transfer.h"

namespace ds::zero {

FlatStrategy::FlatStrategy(const StrategyContext& ctx)
    : ctx_(ctx), comm_(*ctx.comm), data_(*ctx.buffer_comm()), rank_(ctx.comm->rank()),
      world_(ctx.comm->size()) {
    DS_CHECK(data_.size() == world_ && data_.rank() == rank_, DS_ERR_INTERNAL,
             "the data communicator (rank %d of %d) does not match the host one (rank %d of %d)", data_.rank(),
             data_.size(), rank_, world_);
}

int FlatStrategy::stage() const { return static_cast<int>(ctx_.config->zero_optimization.stage); }

// DeepSpeed broadcasts the model from rank 0 at initialize; so does this,
// with every parameter's initial values (init has already checked that
// every rank registered the same parameters: engine/rank_agreement.h).
void FlatStrategy::broadcast_initial(ParamStore& params) {
    if (world_ == 1) return;
    for (Param& p : params.all())
        if (p.numel > 0) comm_.broadcast(p.master.data_ptr(), static_cast<size_t>(p.numel), DType::F32, 0);
}

Tensor FlatStrategy::working_buffer(int64_t numel, DType dtype, Device where, bool zeroed) const {
    Tensor t = where.is_cpu() && ctx_.pin_working
                   ? Tensor::empty_pinned({numel}, dtype, *ctx_.alloc, MemCategory::Params)
                   : Tensor::empty({numel}, dtype, where, *ctx_.alloc, MemCategory::Params);
    if (zeroed) t.zero();
    return t;
}

void FlatStrategy::materialize_flat(ParamStore& params, size_t n_states, DType state_dtype,
                                    bool partition_optimizer, bool partition_grads) {
    params_ = &params;
    const DType working_dtype = ctx_.working_dtype;
    Allocator& alloc = *ctx_.alloc;
    const std::vector<int64_t> sizes = params.index_trainable();
    flat_.layout = make_flat_partition_layout(sizes, world_, ctx_.config->zero_optimization.round_robin_gradients);
    const FlatPartitionLayout& L = flat_.layout;
    flat_.numel = L.numel;
    flat_.padded = L.padded_numel;
    if (!sizes.empty() && flat_.padded == 0) flat_.padded = L.alignment;  // only empty parameters
    if (partition_optimizer) {
        flat_.part_begin = L.partition_begin(rank_);
        flat_.part_numel = L.partition_numel;
    } else {
        flat_.part_begin = 0;
        flat_.part_numel = flat_.padded;
    }
    flat_.grad_partitioned = partition_grads;
    flat_.optimizer_partitioned = partition_optimizer;
    flat_.grad_stale = true;
    const Device where = ctx_.device;  // cuda:N: a device-resident engine (flat_device.cpp)
    const bool whole = !partition_optimizer;  // this rank holds every parameter's master
    if (OffloadOptimizer::wanted(*ctx_.config)) {
        materialize_offloaded(params, n_states, state_dtype, whole);
        return;
    }
    if (flat_.padded > 0) {
        const bool master_is_working = working_dtype == DType::F32 && whole;  // fp32: one buffer for both
        flat_.master = master_is_working
                           ? working_buffer(flat_.part_numel, DType::F32, where)
                           : Tensor::zeros({flat_.part_numel}, DType::F32, where, alloc, MemCategory::Params);
        flat_.working = master_is_working ? flat_.master : working_buffer(flat_.padded, working_dtype, where);
        flat_.grad = Tensor::zeros({partition_grads ? flat_.part_numel : flat_.padded}, ctx_.grad_dtype, where,
                                   alloc, MemCategory::Grads);
        for (size_t i = 0; i < n_states; ++i)
            flat_.state.push_back(
                Tensor::zeros({flat_.part_numel}, state_dtype, where, alloc, MemCategory::OptimizerState));
    }
    float* master = flat_.master.defined() && where.is_cpu() ? flat_.master.data<float>() : nullptr;
    for (Param& p : params.all()) {
        if (!p.trainable) {
            ParamStore::materialize_frozen(p, working_dtype, alloc);
            if (where.is_cuda()) place_on_device(p, whole);
            continue;
        }
        const size_t ti = static_cast<size_t>(p.trainable_index);
        p.flat_offset = L.param_flat_offset[ti];
        if (where.is_cuda()) {
            place_on_device(p, whole);
            continue;
        }
        // The master copies of the fragments this rank owns.
        const float* init = p.numel > 0 ? p.master.data<float>() : nullptr;
        for (const FlatFragment& f : L.fragments[ti]) {
            if (!whole && f.rank != rank_) continue;
            const int64_t dst = whole ? f.flat_offset : f.partition_offset;
            std::copy(init + f.param_offset, init + f.param_offset + f.length, master + dst);
        }
        p.working = flat_.working.view(p.shape, p.flat_offset);
        if (!(working_dtype == DType::F32 && whole)) p.working.copy_from(p.master);
        if (whole) {
            p.master = flat_.master.view(p.shape, p.flat_offset);
            for (size_t i = 0; i < n_states; ++i) p.state.push_back(flat_.state[i].view(p.shape, p.flat_offset));
        } else {
            p.master = Tensor();  // partitioned: see flat_.layout.fragments
        }
        if (!partition_grads) p.grad = flat_.grad.view(p.shape, p.flat_offset);
        p.grad_stale = true;
    }
}

// buffer += scale * grad (or buffer = scale * grad when the buffer holds
// nothing of this window yet: no zeroing pass, no read of the old values),
// and the buffer's sum of squares and Inf/NaN flag, in one streaming pass
// (dsk_axpy_sumsq), so ds_step needs no separate pass over the gradients
// (world of one; with several ranks the reduction changes the buffer and the
// step sums it).
void FlatStrategy::accumulate_with_norm(Param& p, const void* grad, int gdtype, float scale) {
    const int gk = dtype_to_kernel(ctx_.grad_dtype);
    const bool first = p.grad_stale;
    int nonfinite = 0;
    const double sumsq = ctx_.kernels.axpy_sumsq(p.grad.data_ptr(), gk, grad, gdtype, scale, first ? 1 : 0,
                                        static_cast<size_t>(p.numel), &nonfinite);
    p.grad_stale = false;
    p.norm_sumsq = sumsq;
    p.norm_nonfinite = nonfinite != 0;
    p.norm_cached = true;
}

// A parameter that got no gradient this window steps with zeros (as ZeRO's
// zero-filled flat buffers); normally none is stale here.
void FlatStrategy::clear_stale_params() {
    for (Param& p : params_->all())
        if (p.trainable) ParamStore::clear_if_stale(p);
}

void FlatStrategy::clear_stale_partition() {
    if (flat_.grad_stale) {
        flat_.grad.zero();
        flat_.grad_stale = false;
    }
}

void FlatStrategy::drop_gradients() {
    // Also what a backward that failed part-way left in the buckets, not yet reduced.
    if (reducer_) reducer_->discard();
    flat_.grad_stale = true;
    reduced_this_window_ = false;
}

// (scale before the reduction, scale after it) for the data-parallel mean
// (DEEPSPEED_SEMANTICS.md §5.3). "sum" drops every division by the world size. ZeRO 1/2
// with reduce_scatter divide by N before communicating and ignore
// gradient_predivide_factor; otherwise the engine's pre/post formula.
std::pair<float, float> FlatStrategy::reduction_scales(bool zero_reduce_scatter) const {
    const config::Config& c = *ctx_.config;
    const double n = static_cast<double>(world_);
    if (c.gradient_allreduce_op == "sum" || world_ == 1) return {1.0f, 1.0f};
    if (zero_reduce_scatter && c.zero_optimization.reduce_scatter) return {static_cast<float>(1.0 / n), 1.0f};
    if (c.prescale_gradients) return {static_cast<float>(1.0 / n), 1.0f};
    const double f = c.gradient_predivide_factor;
    return {static_cast<float>(1.0 / f), static_cast<float>(f / n)};
}

void FlatStrategy::allreduce_full_gradient(int64_t bucket) {
    if (reduced_this_window_ || flat_.padded == 0) return;
    const auto [pre, post] = reduction_scales(/*zero_reduce_scatter=*/stage() >= 1);
    const int gk = dtype_to_kernel(ctx_.grad_dtype);
    char* g = static_cast<char*>(flat_.grad.data_ptr());
    const size_t es = flat_.grad.element_size();
    const int64_t total = flat_.padded;
    if (pre != 1.0f) ctx_.kernels.scale(g, gk, pre, static_cast<size_t>(total));
    for (int64_t off = 0; off < total; off += bucket) {
        const int64_t len = std::min(bucket, total - off);
        void* p = g + off * static_cast<int64_t>(es);
        data_.allreduce(p, p, static_cast<size_t>(len), ctx_.grad_dtype, comm::Op::Sum);
    }
    if (post != 1.0f) ctx_.kernels.scale(g, gk, post, static_cast<size_t>(total));
    reduced_this_window_ = true;
}

double FlatStrategy::local_sumsq(int64_t begin, int64_t count, int* nonfinite) const {
    *nonfinite = 0;
    if (count <= 0) return 0.0;
    const char* base = static_cast<const char*>(flat_.grad.data_ptr());
    const int64_t es = static_cast<int64_t>(flat_.grad.element_size());
    const int gk = dtype_to_kernel(ctx_.grad_dtype);
    auto sumsq = [&](int64_t b, int64_t n) {
        int nf = 0;
        const double s = ctx_.kernels.sumsq(base + b * es, gk, static_cast<size_t>(n), &nf);
        *nonfinite |= nf;
        return s;
    };
    // Parameters another rank counts (Param::norm_excluded) are cut out of
    // [begin, begin + count), which indexes flat_.grad (partitioned: from part_begin).
    const int64_t shift = flat_.grad_partitioned ? flat_.part_begin : 0;
    std::vector<std::pair<int64_t, int64_t>> holes;
    for (const Param& p : params_->all()) {
        if (!p.norm_excluded || !p.trainable) continue;
        const int64_t lo = std::max(begin, p.flat_offset - shift);
        const int64_t hi = std::min(begin + count, p.flat_offset - shift + p.numel);
        if (lo < hi) holes.emplace_back(lo, hi);
    }
    if (holes.empty()) return sumsq(begin, count);
    std::sort(holes.begin(), holes.end());
    double total = 0.0;
    int64_t at = begin;
    for (const auto& h : holes) {
        if (h.first > at) total += sumsq(at, h.first - at);
        at = std::max(at, h.second);
    }
    if (at < begin + count) total += sumsq(at, begin + count - at);
    return total;
}

// Exchange (sumsq, overflow) and add in rank order: every rank gets the
// bit-identical norm (DeepSpeed: fp64 norms all-reduced over the group).
void FlatStrategy::exchange_norm(double local, int nonfinite, double* sumsq, bool* overflow) {
    struct Part {
        double sumsq;
        int64_t overflow;
    } mine{local, nonfinite != 0 ? 1 : 0};
    std::vector<Part> all(static_cast<size_t>(world_));
    comm_.allgather(&mine, all.data(), sizeof(Part), DType::U8);
    double total = 0.0;
    bool any = false;
    for (const Part& p : all) {
        total += p.sumsq;
        any = any || p.overflow != 0;
    }
    *sumsq = total;
    *overflow = any;
}

void FlatStrategy::grad_norm(double* sumsq, bool* overflow) {
    int nonfinite = 0;
    const double local = local_sumsq(flat_.grad_partitioned ? 0 : flat_.part_begin, flat_.part_numel, &nonfinite);
    exchange_norm(local, nonfinite, sumsq, overflow);
}

void FlatStrategy::run_optimizer(optim::Optimizer& opt, const optim::StepContext& ctx) {
    run_over(opt, ctx, static_cast<size_t>(flat_.part_numel));
}

bool FlatStrategy::cached_norm(double* sumsq, bool* overflow) const {
    double total = 0.0;
    bool any = false;
    for (const Param& p : params_->all()) {
        if (!p.trainable || p.norm_excluded) continue;
        if (!p.norm_cached || p.grad_viewed) return false;
        total += p.norm_sumsq;
        any = any || p.norm_nonfinite;
    }
    *sumsq = total;
    *overflow = any;
    return true;
}

namespace {
std::atomic<int64_t> g_step_piece{int64_t{1} << 20};  // elements, a multiple of 1024
}  // namespace

void FlatStrategy::set_step_piece_for_testing(int64_t elements) noexcept {
    g_step_piece.store(std::max<int64_t>(1024, elements / 1024 * 1024), std::memory_order_relaxed);
}

// This rank updates flat range [part_begin, part_begin + n).
void FlatStrategy::run_over(optim::Optimizer& opt, const optim::StepContext& ctx, size_t n) {
    FlatBuffers& flat = flat_;
    working_copied_ = false;
    const DType working_dtype = ctx_.working_dtype;
    const int gk = dtype_to_kernel(ctx_.grad_dtype);
    char* grad_base = static_cast<char*>(flat.grad.data_ptr()) +
                      (flat.grad_partitioned ? 0 : flat.part_begin * static_cast<int64_t>(flat.grad.element_size()));
    char* work_base = static_cast<char*>(flat.working.data_ptr()) +
                      flat.part_begin * static_cast<int64_t>(flat.working.element_size());
    const bool has_w16 = working_dtype != DType::F32 && !flat.working_on_host;
    auto run = [&](float* master, void* grad, void* working, size_t count, int64_t offset) {
        std::vector<void*>& states = state_ptrs_;  // reused: no allocation per step
        states.clear();
        for (Tensor& s : flat.state)
            states.push_back(static_cast<char*>(s.data_ptr()) + offset * static_cast<int64_t>(s.element_size()));
        optim::ParamBuffers b;
        b.master = master;
        b.grad = grad;
        b.grad_dtype = gk;
        b.w16 = has_w16 ? working : nullptr;
        b.w_dtype = has_w16 ? dtype_to_kernel(working_dtype) : DSK_F32;
        b.numel = count;
        b.states = states.data();
        opt.update(b, ctx);
    };
    opt.use_kernels(ctx_.kernels);  // the table of the memory the flat buffers are in
    if (offload_) {  // sub-groups streamed from the swap file, each handed to the sink once written
        std::function<void(int64_t, int64_t)> written;
        if (step_sink_)
            written = [this, &flat](int64_t begin, int64_t count) { step_sink_(flat.part_begin + begin, count); };
        offload_->step(opt, ctx, static_cast<int64_t>(n), grad_base, ctx_.grad_dtype, work_base, working_dtype,
                       written);
        return;
    }
    // The step writes the working weights itself: 16-bit ones, or fp32 ones
    // that are the master (one buffer for both: held whole). fp32 working
    // weights that are a copy of this rank's master range (several ranks:
    // the master holds one partition) are copied piece by piece instead of
    // after the step when there is a sink.
    const bool writes_working = has_w16 || flat.working.data_ptr() == flat.master.data_ptr();
    const bool copies_working = !writes_working && !flat.working_on_host && working_dtype == DType::F32 &&
                                flat.working.device().is_cpu() && flat.master.device().is_cpu();
    if (opt.elementwise() && step_sink_ && (writes_working || copies_working)) {
        // The same fused pass in pieces, each handed to the sink as soon as
        // its working weights are written (the engine's copy to the GPU runs
        // while the next piece steps). Pieces start on multiples of 1024
        // elements, so the SIMD lanes line up as in one whole-range call:
        // bit for bit the same update.
        const int64_t piece = g_step_piece.load(std::memory_order_relaxed);
        const size_t ges = flat.grad.element_size(), wes = flat.working.element_size();
        for (size_t a = 0; a < n; a += static_cast<size_t>(piece)) {
            const size_t len = std::min(static_cast<size_t>(piece), n - a);
            run(flat.master.data<float>() + a, grad_base + a * ges, work_base + a * wes, len,
                static_cast<int64_t>(a));
            if (copies_working)
                std::memcpy(work_base + a * wes, flat.master.data<float>() + a, len * sizeof(float));
            step_sink_(flat.part_begin + static_cast<int64_t>(a), static_cast<int64_t>(len));
        }
        working_copied_ = copies_working;  // refresh_working_from_master has nothing left to copy
    } else if (opt.elementwise()) {
        // One fused pass over this rank's range of every trainable parameter.
        if (n > 0) run(flat.master.data<float>(), grad_base, work_base, n, 0);
    } else {
        for (Param& p : params_->all())
            if (p.trainable)
                run(p.master.data<float>(), p.grad.data_ptr(), p.working.data_ptr(), static_cast<size_t>(p.numel),
                    p.flat_offset);
    }
}

void FlatStrategy::refresh_working_from_master(size_t n) {
    if (offload_) return;  // the offloaded step wrote the working weights
    if (working_copied_) {  // run_over copied them piece by piece
        working_copied_ = false;
        return;
    }
    if (n == 0) return;
    Tensor range = flat_.working.view({static_cast<int64_t>(n)}, flat_.part_begin);
    if (flat_.working_on_host) {
        master_to_host_working(static_cast<int64_t>(n));
        return;
    }
    if (ctx_.working_dtype != DType::F32) return;  // the step wrote them
    if (range.data_ptr() != flat_.master.data_ptr())  // on the device too: a copy in device memory
        range.copy_from(flat_.master.view({static_cast<int64_t>(n)}));
}

// The device master rounded to the working dtype by the device's kernel, in
// pieces through one bounded device buffer, each piece then copied into the
// host chunks: the 16-bit bytes cross, not the fp32 ones.
void FlatStrategy::master_to_host_working(int64_t n) {
    Tensor range = flat_.working.view({n}, flat_.part_begin);
    const DType wd = ctx_.working_dtype;
    if (wd == DType::F32 || parked()) {  // nothing to round on the device
        copy_converting(range, flat_.master.view({n}), *ctx_.alloc);
        return;
    }
    constexpr int64_t kPiece = int64_t{1} << 22;  // elements: 8 MiB of 16-bit scratch at most
    const int64_t piece = std::min(n, kPiece);
    const Tensor stage = Tensor::empty({piece}, wd, ctx_.device, *ctx_.alloc, MemCategory::Buffers);
    const auto* master = static_cast<const float*>(flat_.master.data_ptr());
    for (int64_t a = 0; a < n; a += piece) {
        const int64_t len = std::min(piece, n - a);
        ctx_.kernels.convert(master + a, DSK_F32, stage.data_ptr(), dtype_to_kernel(wd), static_cast<size_t>(len));
        range.view({len}, a).copy_from(stage.view({len}, 0));
    }
}

Holding FlatStrategy::holding(Param& p) {
    if (offload_) return offloaded_holding(p);
    Holding h;
    if (!p.trainable || p.numel == 0) return h;
    if (p.master.defined()) {  // held whole
        h.ranges.push_back({0, p.numel, 0});
        h.master = p.master.data<float>();
        h.states = p.state;
        return h;
    }
    for (const FlatFragment& f : flat_.layout.fragments[static_cast<size_t>(p.trainable_index)])
        if (f.rank == rank_) h.ranges.push_back({f.param_offset, f.length, f.partition_offset});
    if (!h.ranges.empty()) {
        h.master = flat_.master.data<float>();
        h.states = flat_.state;
    }
    return h;
}

void FlatStrategy::load_working(Param& p, const uint8_t* bytes) {
    if (p.working.defined()) std::memcpy(p.working.data_ptr(), bytes, p.working.nbytes());
}

void FlatStrategy::load_fragments(Param& p, const uint8_t* working, const std::vector<SavedFragment>& saved,
                                  bool master_from_fp32) {
    if (offload_) {
        load_fragments_offloaded(p, working, saved, master_from_fp32);
        return;
    }
    const int wk = dtype_to_kernel(ctx_.working_dtype);
    const int64_t wes = static_cast<int64_t>(dtype_size(ctx_.working_dtype));
    Holding h = holding(p);
    for (const OwnedRange& r : h.ranges) {
        if (!master_from_fp32)  // the 16-bit (or fp32) weights, widened: DeepSpeed's refresh of the fp32 copy
            ctx_.kernels.convert(working + r.param_offset * wes, wk, h.master + r.dst, DSK_F32, static_cast<size_t>(r.length));
        for (const SavedFragment& g : saved) {
            const int64_t a = std::max(r.param_offset, g.offset);
            const int64_t b = std::min(r.param_offset + r.length, g.offset + g.numel);
            if (a >= b) continue;
            const int64_t dst = r.dst + (a - r.param_offset), src = a - g.offset;
            if (master_from_fp32) std::memcpy(h.master + dst, g.master + src * 4, static_cast<size_t>(b - a) * 4);
            for (size_t i = 0; i < g.states.size(); ++i) {
                Tensor& st = h.states[i];
                const size_t es = st.element_size();
                std::memcpy(static_cast<uint8_t*>(st.data_ptr()) + static_cast<size_t>(dst) * es,
                            g.states[i] + static_cast<size_t>(src) * es, static_cast<size_t>(b - a) * es);
            }
        }
    }
}

void FlatStrategy::check_save_16bit_model() const {
    const config::ZeroConfig& z = ctx_.config->zero_optimization;
    // DeepSpeed at ZeRO-3 without gather_16bit_weights_on_model_save logs
    // and returns False, writing nothing: here that is an error status.
    DS_CHECK(z.stage != 3 || z.gather_16bit_weights_on_model_save, DS_ERR_INVALID_CONFIG,
             "ds_save_16bit_model at ZeRO stage 3 needs zero_optimization.stage3_gather_16bit_weights_on_model_save "
             "= true (it is false: nothing was written; DeepSpeed returns False here). Use ds_save_checkpoint and "
             "ds-to-fp32 for the weights otherwise");
}

}  // namespace ds::zero
