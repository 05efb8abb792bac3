// ZeRO stage 3 with several ranks (DEEPSPEED_SEMANTICS.md §6.2): each rank keeps one
// chunk of every trainable parameter (master, working copy, gradient,
// optimizer state), concatenated in parameter order; with
// offload_optimizer.device "nvme" the master chunks and the optimizer state
// are in the rank's swap file (offload_optimizer.h). Gradients are
// reduce-scattered in buckets as they arrive (BucketReducer); whole working
// weights exist while gathered — DeepSpeed's GatheredParameters — or always
// for persistent parameters (numel <= param_persistence_threshold), and are
// re-gathered after each step.
//
// Device-resident (StrategyContext::device cuda:N, no optimizer offload):
// every buffer, the buckets and the gathered whole weights are in device
// memory and move over StrategyContext::data_comm; parked on the host (for
// the checkpoint code) the gathered copies are parked with the flat buffers.
// With offload_param "cpu" the 16-bit chunks stay in host memory (page-locked
// with its pin_memory), with "nvme" in host memory swapped per page as on
// the CPU engine (never page-locked: pages leave by madvise): a gather
// copies this rank's chunk (swapped in) into its slot of the device copy and
// all-gathers in place; after a step the device master is rounded on the
// device and copied into them (FlatStrategy::master_to_host_working), then
// written to the swap file.
//
// Prefetch and reuse (prefetch_plan.h): a gather asked for in the last
// window's order starts the non-blocking all-gathers of the parameters that
// follow it in that order; the request for one of them waits for its gather
// instead of starting one. A release keeps the whole copy of a parameter
// asked for again within max_reuse_distance elements of the trace. Whatever
// is in flight is waited for, and the unclaimed and kept copies freed,
// before anything writes the working chunks they read: the step, a load,
// set_full, parking, and at the end of every window.
#include <algorithm>
#include <cstring>
#include <exception>
#include <map>
#include <unordered_map>

#include "core/error.h"
#include "core/tensor_transfer.h"
#include "deepspeed_c.h"
#include "optim/optimizer.h"
#include "zero/bucket_reducer.h"
#include "zero/flat_strategy.h"
#include "zero/param_swapper.h"
#include "zero/prefetch_plan.h"

namespace ds::zero {

namespace {

class Stage3 final : public FlatStrategy {
public:
    using FlatStrategy::FlatStrategy;

    ~Stage3() override {
        try {
            settle_prefetches();
        } catch (...) {  // a broken communicator: the copies are freed all the same
        }
    }

    bool collective(Collective) const override { return true; }
    Tensor flat_working() const override { return {}; }  // this rank's chunks only

    void materialize(ParamStore& params, size_t n_states, DType state_dtype) override {
        materialize_chunks(params, n_states, state_dtype);
        // Buckets of reduce_bucket_size elements (two with overlap_comm): per
        // rank segment, never larger than the model nor smaller than its
        // largest chunk.
        const config::ZeroConfig& z = ctx_.config->zero_optimization;
        int64_t largest_chunk = 0;
        std::vector<int64_t> numel;
        for (const Param& p : params.all())
            if (p.trainable) numel.push_back(p.numel);
        for (int64_t c : flat_.chunk) largest_chunk = std::max(largest_chunk, c);
        const int64_t cap = std::max(largest_chunk, std::min(z.reduce_bucket_size / world_, flat_.padded));
        reducer_ = std::make_unique<BucketReducer>(BucketReducer::Mode::ReduceScatter, ctx_.buffer_comm(),
                                                   &flat_.layout, numel, flat_.chunk, flat_.rank_offset,
                                                   ctx_.grad_dtype, cap, z.overlap_comm, *ctx_.alloc, ctx_.kernels,
                                                   ctx_.device);
        reducer_->set_target(flat_.grad, &flat_.grad_stale);
        pre_scale_ = reduction_scales(/*zero_reduce_scatter=*/true).first;
        if (params_on_nvme(*ctx_.config)) start_param_swap(params);
        start_prefetch_plan(params);
        refresh_gathered();
    }

    // The end of a window (a step, a skipped one, dropped gradients): what
    // was prefetched and not asked for goes; the window's order is the trace.
    void drop_gradients() override {
        settle_prefetches();
        plan_.end_window();
        FlatStrategy::drop_gradients();
    }

    // offload_param.device "nvme" (param_swapper.h).
    static bool params_on_nvme(const config::Config& c) { return c.zero_optimization.offloads_params_to("nvme"); }

    // offload_param.device "cpu" or "nvme" on a device-resident engine: the
    // working chunks in host memory, swapped to NVMe per page with "nvme" (on
    // the CPU engine, and with ZeRO-Offload, they are there anyway).
    bool params_on_host() const {
        return ctx_.device.is_cuda() && ctx_.config->zero_optimization.offloads_params();
    }

    void run_optimizer(optim::Optimizer& opt, const optim::StepContext& sc) override {
        settle_prefetches();  // they read the working chunks the step writes
        if (!param_swap_) return FlatStrategy::run_optimizer(opt, sc);
        param_swap_->step_begin();  // the step overwrites pages that are out: no prefetch meanwhile
        try {
            FlatStrategy::run_optimizer(opt, sc);
        } catch (...) {
            param_swap_->step_abort();
            throw;
        }
        stepped_ = true;
    }

    void write_full(Param& p, FullTensor which, size_t state, const Tensor& src) override {
        if (which == FullTensor::Param) settle_prefetches();
        if (!param_swap_ || which != FullTensor::Param || !p.trainable) {
            FlatStrategy::write_full(p, which, state, src);  // the master fragments, and the whole copy if gathered
            // The working chunk too (a separate 16-bit buffer): the next gather reads it.
            if (which == FullTensor::Param && p.trainable && !offload_ &&
                flat_.working.data_ptr() != flat_.master.data_ptr())
                write_working_chunk(p, src);
            return;
        }
        const auto [b, e] = chunk_bytes(p);
        param_swap_->acquire(b, e);
        try {
            FlatStrategy::write_full(p, which, state, src);  // master (and, from NVMe state, the working chunk)
            if (!offload_) write_working_chunk(p, src);
        } catch (...) {
            param_swap_->release(b, e);
            throw;
        }
        param_swap_->write_back(b, e);
        param_swap_->release(b, e);
    }

    std::vector<StateBuffer> state_buffers(uint32_t kinds) override {
        // Working weights swapped per page are on NVMe already.
        if (param_swap_) kinds &= ~static_cast<uint32_t>(DS_OFFLOAD_LP_PARAMS);
        return FlatStrategy::state_buffers(kinds);
    }

    void disk_bytes(int64_t* params, int64_t* optimizer_state) const override {
        FlatStrategy::disk_bytes(params, optimizer_state);
        if (param_swap_) *params += param_swap_->disk_bytes();
    }

    int64_t released_bytes(MemCategory c) const override {
        return param_swap_ && c == MemCategory::Params ? param_swap_->released_bytes() : 0;
    }

    void accumulate(Param& p, const void* grad, int gdtype, float scale) override {
        // Into the bucket, pre-divided for the data-parallel mean.
        reducer_->add(static_cast<size_t>(p.trainable_index), grad, gdtype, scale * pre_scale_);
    }

    void on_backward() override { reducer_->flush(); }  // reduces every micro-step

    void reduce() override {
        if (!reducer_->idle()) reducer_->flush();
        clear_stale_partition();
    }

    void after_step() override {
        refresh_working_from_master(static_cast<size_t>(flat_.part_numel));
        if (param_swap_ && stepped_) {
            // Every working byte is new: to the file, then out of memory.
            param_swap_->step_done();
            stepped_ = false;
            last_order_.swap(order_);
            order_.clear();
            seen_.assign(seen_.size(), 0);
        }
        refresh_gathered();
    }

    bool writes_optimizer_file() const override { return true; }

    void gather(Param& p) override {
        if (!p.trainable) return;
        if (p.gather_count == 0 && !p.persistent) {
            if (p.working.defined()) count_reuse(0, 1);  // kept at its last release (max_reuse_distance)
            else gather_param(p);
        }
        ++p.gather_count;
        try {
            prefetch_after(p);
        } catch (...) {  // as if never gathered (the caller releases the others it made)
            if (--p.gather_count == 0 && !p.persistent) drop_temporary(p);
            throw;
        }
    }

    void check_release(const Param& p) const override {
        if (p.trainable)
            DS_CHECK(p.gather_count > 0, DS_ERR_INVALID_STATE,
                     "ds_engine_release('%s') without a matching ds_engine_gather", p.name.c_str());
    }

    void release(Param& p) override {
        if (!p.trainable) return;
        if (--p.gather_count != 0 || p.persistent) return;
        // max_reuse_distance: asked for again soon in the trace, so it stays
        // whole (until then, or the window's end).
        if (plan_.reused_soon(static_cast<size_t>(p.trainable_index), [this](size_t tj) { return whole_numel(tj); })) {
            count_reuse(1, 0);
            return;
        }
        drop_temporary(p);
    }

    void gather_temporary(Param& p) override { gather_param(p); }

    bool released(const Param& p) const override { return p.trainable && !p.persistent && p.gather_count == 0; }

    bool has_reduction_buckets() const override { return true; }

    // DeepSpeed's empty_partition_cache: every gathered copy goes (the
    // host's outstanding gathers with it); persistent parameters stay whole.
    void empty_partition_cache() override {
        settle_prefetches();
        for (Param& p : params_->all()) {
            if (!p.trainable || p.gather_count == 0) continue;
            p.gather_count = 0;
            if (!p.persistent) drop_temporary(p);
        }
    }

    void drop_temporary(Param& p) override {
        p.working = Tensor();
        p.full = Tensor();  // frees the whole copy
    }

    // The gathered whole copies are parked with the flat buffers (copied
    // first: a failure leaves everything on the device).
    void park_on_host() override {
        settle_prefetches();
        if (parked() || ctx_.device.is_cpu()) return;
        std::vector<std::pair<Param*, Tensor>> host;
        for (Param& p : params_->all())
            if (p.trainable && p.full.defined()) host.emplace_back(&p, copy_of(p.full, Device::cpu(), nullptr));
        FlatStrategy::park_on_host();
        parked_full_.clear();
        for (auto& [p, h] : host) {
            parked_full_.emplace(p, p->full);
            point_whole(*p, h);
        }
    }

    // Whatever is gathered now (it may have changed while parked: a
    // checkpoint's 16-bit gathers, a load) goes back to device memory,
    // reusing the parked device copy; copied before the flat buffers move,
    // so a failure leaves everything parked.
    void unpark(bool write_back) override {
        if (!parked()) return;
        std::vector<std::pair<Param*, Tensor>> dev;
        for (Param& p : params_->all()) {
            if (!p.trainable || !p.full.defined()) continue;
            auto it = parked_full_.find(&p);
            dev.emplace_back(&p, copy_of(p.full, ctx_.device, it == parked_full_.end() ? nullptr : &it->second));
        }
        FlatStrategy::unpark(write_back);
        for (Param& p : params_->all())
            if (p.trainable) point_whole(p, Tensor());
        for (auto& [p, d] : dev) point_whole(*p, d);
        parked_full_.clear();
    }

    void load_fragments(Param& p, const uint8_t* working, const std::vector<SavedFragment>& saved,
                        bool master_from_fp32) override {
        settle_prefetches();  // the load writes the working chunks they read
        FlatStrategy::load_fragments(p, working, saved, master_from_fp32);
    }

    void load_working(Param& p, const uint8_t* bytes) override {
        settle_prefetches();
        FlatStrategy::load_working(p, bytes);  // where gathered
        if (!p.trainable) return;
        // This rank's chunk (the fp32 working weights are the master itself,
        // which the checkpoint's master ranges then write).
        if (ctx_.working_dtype == DType::F32 && flat_.working.data_ptr() == flat_.master.data_ptr()) return;
        const int64_t wes = static_cast<int64_t>(dtype_size(ctx_.working_dtype));
        const auto [b, e] = param_swap_ ? chunk_bytes(p) : std::pair<size_t, size_t>{0, 0};
        if (param_swap_) param_swap_->acquire(b, e);
        for (const FlatFragment& f : flat_.layout.fragments[static_cast<size_t>(p.trainable_index)])
            if (f.rank == rank_)
                std::memcpy(static_cast<char*>(flat_.working.data_ptr()) + f.partition_offset * wes,
                            bytes + f.param_offset * wes, static_cast<size_t>(f.length * wes));
        if (param_swap_) {
            param_swap_->write_back(b, e);
            param_swap_->release(b, e);
        }
    }

private:
    // This rank's chunk of every trainable parameter, concatenated in
    // parameter order; the fragments name every rank's chunk.
    void materialize_chunks(ParamStore& params, size_t n_states, DType state_dtype) {
        params_ = &params;
        const DType working_dtype = ctx_.working_dtype;
        Allocator& alloc = *ctx_.alloc;
        const config::ZeroConfig& z = ctx_.config->zero_optimization;
        const int32_t W = world_, r = rank_;
        const std::vector<int64_t> sizes = params.index_trainable();
        const Stage3Layout L3 = make_stage3_layout(sizes, W, z.sub_group_size);
        const std::vector<uint8_t> persistent =
            mark_persistent_params(sizes, z.param_persistence_threshold, z.model_persistence_threshold);
        flat_.chunk.assign(sizes.size(), 0);
        flat_.rank_offset.assign(sizes.size(), 0);
        flat_.layout = FlatPartitionLayout{};
        flat_.layout.dp = W;
        flat_.layout.param_numel = sizes;
        flat_.layout.fragments.assign(sizes.size(), {});
        int64_t offset = 0;
        for (size_t i = 0; i < sizes.size(); ++i) {
            flat_.chunk[i] = L3.params[i].partition_numel;
            flat_.rank_offset[i] = offset;
            for (int32_t q = 0; q < W; ++q) {
                const int64_t len = L3.params[i].owned_numel(q);
                if (len > 0) flat_.layout.fragments[i].push_back({q, -1, offset, L3.params[i].owned_begin(q), len});
            }
            offset += flat_.chunk[i];
        }
        flat_.numel = 0;
        for (int64_t n : sizes) flat_.numel += n;
        flat_.padded = offset;
        flat_.part_begin = 0;
        flat_.part_numel = offset;
        flat_.grad_partitioned = true;
        flat_.optimizer_partitioned = true;
        flat_.grad_stale = true;
        // NVMe optimizer state: the master chunks and the state live in the
        // swap file (flat_.master / flat_.state stay empty), the working
        // chunks in their own buffer.
        flat_.chunked = true;
        flat_.working_on_host = params_on_host();
        const bool nvme = OffloadOptimizer::wanted(*ctx_.config);
        const Device where = ctx_.device;  // cuda:N: device-resident (no optimizer offload there)
        if (offset > 0) {
            if (!nvme) flat_.master = Tensor::zeros({offset}, DType::F32, where, alloc, MemCategory::Params);
            if (flat_.working_on_host)
                flat_.working = working_buffer(offset, working_dtype, Device::cpu());  // pinned with pin_memory
            else if (working_dtype == DType::F32 && !nvme && !params_on_nvme(*ctx_.config))
                flat_.working = flat_.master;
            else
                flat_.working = Tensor::zeros({offset}, working_dtype, where, alloc, MemCategory::Params);
            flat_.grad = Tensor::zeros({offset}, ctx_.grad_dtype, where, alloc, MemCategory::Grads);
            for (size_t i = 0; i < n_states && !nvme; ++i)
                flat_.state.push_back(Tensor::zeros({offset}, state_dtype, where, alloc, MemCategory::OptimizerState));
        }
        std::vector<InitPiece> pieces;
        std::vector<std::pair<int64_t, int64_t>> spans;
        for (Param& p : params.all()) {
            if (!p.trainable) continue;
            const size_t ti = static_cast<size_t>(p.trainable_index);
            const int64_t begin = L3.params[ti].owned_begin(r), len = L3.params[ti].owned_numel(r);
            if (len <= 0) continue;
            Tensor src = p.master.view({len}, begin);
            if (nvme) {
                pieces.push_back({flat_.rank_offset[ti], len, src.data<float>()});
                spans.emplace_back(flat_.rank_offset[ti], len);
            } else {
                flat_.master.view({len}, flat_.rank_offset[ti]).copy_from(src);
            }
            if (flat_.working.data_ptr() != flat_.master.data_ptr()) {
                Tensor to = flat_.working.view({len}, flat_.rank_offset[ti]);
                copy_converting(to, src, alloc);
            }
        }
        if (nvme) start_offload(std::move(pieces), std::move(spans), n_states, state_dtype);
        for (Param& p : params.all()) {
            if (!p.trainable) {
                ParamStore::materialize_frozen(p, working_dtype, alloc);
                if (where.is_cuda()) place_on_device(p, /*whole=*/true);
                continue;
            }
            const size_t ti = static_cast<size_t>(p.trainable_index);
            p.persistent = persistent[ti] != 0;
            p.master = Tensor();
            p.working = Tensor();  // until gathered
            p.grad = Tensor();
            p.grad_stale = true;
        }
    }

    // All-gathers one parameter's chunks into its whole working weights
    // (its chunk swapped in for the exchange where parameters are on NVMe),
    // in the flat buffers' memory: the device's, or the host's while parked;
    // or waits for its prefetched gather.
    void gather_param(Param& p) {
        if (claim_prefetched(p)) return;
        const size_t ti = static_cast<size_t>(p.trainable_index);
        const auto [b, e] = param_swap_ ? chunk_bytes(p) : std::pair<size_t, size_t>{0, 0};
        if (param_swap_) {
            param_swap_->acquire(b, e);
            note_use(ti);
        }
        try {
            if (auto r = start_gather(p)) r->wait();
        } catch (...) {
            if (param_swap_) param_swap_->release(b, e);
            throw;
        }
        if (param_swap_) param_swap_->release(b, e);
        p.working = p.full.view(p.shape, 0);
    }

    // p.full, the whole copy's memory, allocated when missing (host memory
    // while parked).
    void ensure_full(Param& p) {
        if (p.full.defined()) return;
        p.full = Tensor::empty({whole_numel(static_cast<size_t>(p.trainable_index))}, ctx_.working_dtype,
                               parked() ? Device::cpu() : ctx_.device, *ctx_.alloc, MemCategory::Params);
    }

    // Starts the all-gather of `p`'s chunks into p.full (allocated when
    // missing); p.working stays as it was. Null: nothing to move.
    std::unique_ptr<comm::Request> start_gather(Param& p) {
        const size_t ti = static_cast<size_t>(p.trainable_index);
        const int64_t chunk = flat_.chunk[ti];
        const DType wd = ctx_.working_dtype;
        comm::Communicator& mover = parked() ? comm_ : data_;
        ensure_full(p);
        const int64_t es = static_cast<int64_t>(p.full.element_size());
        const char* mine = static_cast<const char*>(flat_.working.data_ptr()) + flat_.rank_offset[ti] * es;
        if (flat_.working_on_host && !parked() && chunk > 0) {
            // This rank's host chunk into its slot of the device copy: gathered in place.
            p.full.view({chunk}, rank_ * chunk).copy_from(flat_.working.view({chunk}, flat_.rank_offset[ti]));
            mine = static_cast<const char*>(p.full.data_ptr()) + rank_ * chunk * es;
        }
        if (chunk == 0) return nullptr;
        return mover.allgather_async(mine, p.full.data_ptr(), static_cast<size_t>(chunk), wd);
    }

    // ---- prefetch (prefetch_plan.h) ----------------------------------------

    // A gather in flight: its request (Async), or none yet (Deferred: it runs
    // when claimed), or done already (Eager).
    struct InFlight {
        std::unique_ptr<comm::Request> request;
        bool deferred = false;
    };

    void start_prefetch_plan(ParamStore& params) {
        const config::ZeroConfig& z = ctx_.config->zero_optimization;
        // Parameters on NVMe prefetch their pages instead (note_use); the
        // all-gathers run on request. allgather_sequential: one at a time.
        const int64_t bucket = param_swap_ ? 0 : z.allgather_sequential ? 1 : z.prefetch_bucket_size;
        plan_ = PrefetchPlan(bucket, z.max_live_parameters, param_swap_ ? 0 : z.max_reuse_distance);
        by_trainable_.assign(flat_.chunk.size(), nullptr);
        temporary_numel_ = 0;
        for (Param& p : params.all()) {
            if (!p.trainable) continue;
            by_trainable_[static_cast<size_t>(p.trainable_index)] = &p;
            if (!p.persistent) temporary_numel_ += whole_numel(static_cast<size_t>(p.trainable_index));
        }
    }

    int64_t whole_numel(size_t ti) const { return flat_.chunk[ti] * world_; }

    // Elements of whole copies that are not persistent, in flight included;
    // only counted when max_live_parameters could bind.
    int64_t live_numel() const {
        if (temporary_numel_ <= ctx_.config->zero_optimization.max_live_parameters) return 0;
        int64_t n = 0;
        for (const Param* p : by_trainable_)
            if (!p->persistent && p->full.defined()) n += whole_numel(static_cast<size_t>(p->trainable_index));
        return n;
    }

    // After the request for `p`: start the gathers the trace says come next.
    void prefetch_after(const Param& p) {
        if (!plan_.enabled()) return;
        if (parked()) plan_.leave_trace();  // a checkpoint's gathers: host memory, host communicator
        const auto avail = [this](size_t tj) {
            const Param& q = *by_trainable_[tj];
            if (q.persistent) return PrefetchPlan::Avail::Always;
            return q.working.defined() || in_flight_.count(tj) != 0 ? PrefetchPlan::Avail::Busy
                                                                    : PrefetchPlan::Avail::Absent;
        };
        const auto numel = [this](size_t tj) { return whole_numel(tj); };
        for (size_t tj : plan_.on_request(static_cast<size_t>(p.trainable_index), avail, numel, in_flight_numel_,
                                          live_numel()))
            start_prefetch(tj);
    }

    void start_prefetch(size_t tj) {
        Param& q = *by_trainable_[tj];
        InFlight f;
        try {
            switch (prefetch_mode()) {
            case PrefetchMode::Async: f.request = start_gather(q); break;
            case PrefetchMode::Deferred:
                ensure_full(q);
                f.deferred = true;
                break;
            case PrefetchMode::Eager:
                if (auto r = start_gather(q)) r->wait();
                break;
            }
        } catch (...) {
            q.full = Tensor();
            throw;
        }
        in_flight_.emplace(tj, std::move(f));
        in_flight_numel_ += whole_numel(tj);
        count_prefetch(1, 0, 0);
    }

    // `p`'s prefetched gather, waited for: p is whole. False: none in flight.
    bool claim_prefetched(Param& p) {
        const size_t ti = static_cast<size_t>(p.trainable_index);
        auto it = in_flight_.find(ti);
        if (it == in_flight_.end()) return false;
        InFlight f = std::move(it->second);
        in_flight_.erase(it);
        in_flight_numel_ -= whole_numel(ti);
        try {
            if (f.request) f.request->wait();
            if (f.deferred)
                if (auto r = start_gather(p)) r->wait();
        } catch (...) {
            p.full = Tensor();
            throw;
        }
        count_prefetch(0, 1, 0);
        p.working = p.full.view(p.shape, 0);
        return true;
    }

    // Every gather in flight finished and its copy freed (nobody asked for
    // it), and the copies kept for reuse freed. Throws the first failure,
    // after all are done.
    void settle_prefetches() {
        for (Param* p : by_trainable_)
            if (p->gather_count == 0 && !p->persistent && p->working.defined()) drop_temporary(*p);
        std::exception_ptr first;
        for (auto& [tj, f] : in_flight_) {
            try {
                if (f.request) f.request->wait();
            } catch (...) {
                if (!first) first = std::current_exception();
            }
            by_trainable_[tj]->full = Tensor();
            count_prefetch(0, 0, 1);
        }
        in_flight_.clear();
        in_flight_numel_ = 0;
        if (first) std::rethrow_exception(first);
    }

    // This rank's chunk of `p` in the working partition, in bytes.
    std::pair<size_t, size_t> chunk_bytes(const Param& p) const {
        const size_t ti = static_cast<size_t>(p.trainable_index);
        const size_t es = dtype_size(ctx_.working_dtype);
        const size_t b = static_cast<size_t>(flat_.rank_offset[ti]) * es;
        return {b, b + static_cast<size_t>(flat_.chunk[ti]) * es};
    }

    // set_full_fp32_param's (host) value into this rank's working chunk.
    void write_working_chunk(Param& p, const Tensor& src) {
        Tensor v = src.is_contiguous() && src.dtype() == DType::F32 ? src
                                                                    : src.to(DType::F32, *ctx_.alloc, MemCategory::Buffers);
        for (const FlatFragment& f : flat_.layout.fragments[static_cast<size_t>(p.trainable_index)]) {
            if (f.rank != rank_ || f.length == 0) continue;
            Tensor to = flat_.working.view({f.length}, f.partition_offset);
            copy_converting(to, v.view({f.length}, f.param_offset), *ctx_.alloc);
        }
    }

    // A copy of `t` on `where` (into `reuse` when it has t's shape).
    Tensor copy_of(const Tensor& t, Device where, const Tensor* reuse) const {
        Tensor c = reuse && reuse->defined() && reuse->shape() == t.shape() && reuse->device() == where
                       ? *reuse
                       : Tensor::empty(t.shape(), t.dtype(), where, *ctx_.alloc,
                                       where.is_cpu() ? MemCategory::Buffers : MemCategory::Params);
        c.copy_from(t);
        return c;
    }

    // `p` whole as `full` (undefined: not gathered).
    static void point_whole(Param& p, const Tensor& full) {
        p.full = full;
        p.working = full.defined() ? full.view(p.shape, 0) : Tensor();
    }

    // The swap file of the working partition; the first max_in_cpu
    // elements of parameters (registration order) stay in memory.
    void start_param_swap(ParamStore& params) {
        const config::OffloadParamConfig& o = *ctx_.config->zero_optimization.offload_param;
        DS_CHECK(o.nvme_path.has_value(), DS_ERR_INVALID_CONFIG,
                 "zero_optimization.offload_param.nvme_path: required with device \"nvme\"");
        DS_CHECK(!ctx_.config->optimizer || optim::Optimizer::create(*ctx_.config->optimizer,
                                                                      ctx_.config->model_dtype())->elementwise(),
                 DS_ERR_UNSUPPORTED,
                 "zero_optimization.offload_param.device: \"nvme\" with a per-tensor optimizer (Lamb) is not built");
        for (const Param& p : params.all())
            if (p.trainable)
                DS_CHECK(flat_.chunk[static_cast<size_t>(p.trainable_index)] <= o.buffer_size, DS_ERR_INVALID_CONFIG,
                         "zero_optimization.offload_param.buffer_size = %lld is smaller than parameter '%s''s "
                         "partition (%lld elements)",
                         static_cast<long long>(o.buffer_size), p.name.c_str(),
                         static_cast<long long>(flat_.chunk[static_cast<size_t>(p.trainable_index)]));
        if (flat_.padded == 0) return;
        AioOptions aio;
        aio.block_size = ctx_.config->sections.aio.block_size;
        aio.queue_depth = ctx_.config->sections.aio.queue_depth;
        aio.single_submit = ctx_.config->sections.aio.single_submit;
        param_swap_ = std::make_unique<ParamSwapper>(*o.nvme_path, rank_, aio,
                                                     static_cast<uint8_t*>(flat_.working.data_ptr()),
                                                     static_cast<size_t>(flat_.padded) * flat_.working.element_size());
        int64_t budget = o.max_in_cpu;
        for (const Param& p : params.all()) {
            if (!p.trainable) continue;
            const int64_t c = flat_.chunk[static_cast<size_t>(p.trainable_index)];
            if (c > budget) break;
            budget -= c;
            const auto [b, e] = chunk_bytes(p);
            param_swap_->pin(b, e);
        }
        prefetch_count_ = static_cast<size_t>(std::max<int64_t>(0, o.buffer_count));
        seen_.assign(flat_.chunk.size(), 0);
        param_index_.assign(flat_.chunk.size(), 0);
        for (size_t i = 0; i < params.all().size(); ++i)
            if (params.all()[i].trainable) param_index_[static_cast<size_t>(params.all()[i].trainable_index)] = i;
        param_swap_->release_unused();
    }

    // Records the gather order of this step; prefetches the parameters that
    // followed `ti` in the last step's order (at most buffer_count).
    void note_use(size_t ti) {
        if (!seen_[ti]) {
            seen_[ti] = 1;
            order_.push_back(ti);
        }
        if (prefetch_count_ == 0 || last_order_.empty()) return;
        auto it = std::find(last_order_.begin(), last_order_.end(), ti);
        if (it == last_order_.end()) return;
        std::vector<std::pair<size_t, size_t>> next;
        for (++it; it != last_order_.end() && next.size() < prefetch_count_; ++it)
            next.push_back(chunk_bytes(params_->all()[param_index_[*it]]));
        param_swap_->prefetch(next);
    }

    // Re-gathers what is whole: persistent parameters and gathered ones.
    void refresh_gathered() {
        for (Param& p : params_->all())
            if (p.trainable && (p.persistent || p.gather_count > 0)) gather_param(p);
    }

    float pre_scale_ = 1.0f;  // the reduction's scale, applied as gradients enter the bucket
    // offload_param "nvme": the working partition's swap, whether the
    // optimizer ran (after_step writes it back), the gather order of this
    // step and the last (for prefetch), trainable index -> ParamStore index.
    std::unique_ptr<ParamSwapper> param_swap_;
    bool stepped_ = false;
    size_t prefetch_count_ = 0;
    std::vector<size_t> order_, last_order_;
    std::vector<uint8_t> seen_;
    std::vector<size_t> param_index_;
    // While parked: the device copies of the parameters gathered then.
    std::unordered_map<const Param*, Tensor> parked_full_;
    // Prefetch: the plan, the gathers in flight (trainable index ->) and
    // their elements, trainable index -> parameter, and the elements of
    // every parameter that is not persistent.
    PrefetchPlan plan_{0, 0, 0};
    std::map<size_t, InFlight> in_flight_;
    int64_t in_flight_numel_ = 0;
    std::vector<Param*> by_trainable_;
    int64_t temporary_numel_ = 0;
};

}  // namespace

std::unique_ptr<Strategy> make_stage3(const StrategyContext& ctx) { return std::make_unique<Stage3>(ctx); }

}  // namespace ds::zero
