// ZeRO stage 3 with several ranks (DEEPSPEED_SEMANTICS.md §6.2): each rank keeps one
// chunk of every trainable parameter (master, working copy, gradient,
// optimizer state), concatenated in parameter order; with
// offload_optimizer.device "nvme" the master chunks and the optimizer state
// are in the rank's swap file (offload_optimizer.h). Gradients are
// reduce-scattered in buckets as they arrive (BucketReducer); whole working
// weights exist while gathered — DeepSpeed's GatheredParameters — or always
// for persistent parameters (numel <= param_persistence_threshold), and are
// re-gathered after each step.
#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "zero/bucket_reducer.h"
#include "zero/flat_strategy.h"

namespace ds::zero {

namespace {

class Stage3 final : public FlatStrategy {
public:
    using FlatStrategy::FlatStrategy;

    bool collective(Collective) const override { return true; }

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
        reducer_ = std::make_unique<BucketReducer>(BucketReducer::Mode::ReduceScatter, ctx_.comm, &flat_.layout,
                                                   numel, flat_.chunk, flat_.rank_offset, ctx_.grad_dtype, cap,
                                                   z.overlap_comm, *ctx_.alloc, ctx_.kernels);
        reducer_->set_target(flat_.grad, &flat_.grad_stale);
        pre_scale_ = reduction_scales(/*zero_reduce_scatter=*/true).first;
        refresh_gathered();
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
        refresh_gathered();
    }

    bool writes_optimizer_file() const override { return true; }

    void gather(Param& p) override {
        if (!p.trainable) return;
        if (p.gather_count == 0 && !p.persistent) gather_param(p);
        ++p.gather_count;
    }

    void check_release(const Param& p) const override {
        if (p.trainable)
            DS_CHECK(p.gather_count > 0, DS_ERR_INVALID_STATE,
                     "ds_engine_release('%s') without a matching ds_engine_gather", p.name.c_str());
    }

    void release(Param& p) override {
        if (!p.trainable) return;
        if (--p.gather_count == 0 && !p.persistent) drop_temporary(p);
    }

    void gather_temporary(Param& p) override { gather_param(p); }

    bool has_reduction_buckets() const override { return true; }

    // DeepSpeed's empty_partition_cache: every gathered copy goes (the
    // host's outstanding gathers with it); persistent parameters stay whole.
    void empty_partition_cache() override {
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

    void load_working(Param& p, const uint8_t* bytes) override {
        FlatStrategy::load_working(p, bytes);  // where gathered
        if (!p.trainable) return;
        // This rank's chunk (the fp32 working weights are the master itself,
        // which the checkpoint's master ranges then write).
        if (ctx_.working_dtype == DType::F32 && flat_.working.data_ptr() == flat_.master.data_ptr()) return;
        const int64_t wes = static_cast<int64_t>(dtype_size(ctx_.working_dtype));
        for (const FlatFragment& f : flat_.layout.fragments[static_cast<size_t>(p.trainable_index)])
            if (f.rank == rank_)
                std::memcpy(static_cast<char*>(flat_.working.data_ptr()) + f.partition_offset * wes,
                            bytes + f.param_offset * wes, static_cast<size_t>(f.length * wes));
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
        const bool nvme = OffloadOptimizer::wanted(*ctx_.config);
        const Device cpu = Device::cpu();
        if (offset > 0) {
            if (!nvme) flat_.master = Tensor::zeros({offset}, DType::F32, cpu, alloc, MemCategory::Params);
            flat_.working = working_dtype == DType::F32 && !nvme
                                ? flat_.master
                                : Tensor::zeros({offset}, working_dtype, cpu, alloc, MemCategory::Params);
            flat_.grad = Tensor::zeros({offset}, ctx_.grad_dtype, cpu, alloc, MemCategory::Grads);
            for (size_t i = 0; i < n_states && !nvme; ++i)
                flat_.state.push_back(Tensor::zeros({offset}, state_dtype, cpu, alloc, MemCategory::OptimizerState));
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
            if (flat_.working.data_ptr() != flat_.master.data_ptr())
                flat_.working.view({len}, flat_.rank_offset[ti]).copy_from(src);
        }
        if (nvme) start_offload(std::move(pieces), std::move(spans), n_states, state_dtype);
        for (Param& p : params.all()) {
            if (!p.trainable) {
                ParamStore::materialize_frozen(p, working_dtype, alloc);
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

    // All-gathers one parameter's chunks into its whole working weights.
    void gather_param(Param& p) {
        const size_t ti = static_cast<size_t>(p.trainable_index);
        const int64_t chunk = flat_.chunk[ti];
        const DType wd = ctx_.working_dtype;
        if (!p.full.defined())
            p.full = Tensor::empty({chunk * world_}, wd, Device::cpu(), *ctx_.alloc, MemCategory::Params);
        const int64_t es = static_cast<int64_t>(p.full.element_size());
        const char* mine = static_cast<const char*>(flat_.working.data_ptr()) + flat_.rank_offset[ti] * es;
        if (chunk > 0) comm_.allgather(mine, p.full.data_ptr(), static_cast<size_t>(chunk), wd);
        p.working = p.full.view(p.shape, 0);
    }

    // Re-gathers what is whole: persistent parameters and gathered ones.
    void refresh_gathered() {
        for (Param& p : params_->all())
            if (p.trainable && (p.persistent || p.gather_count > 0)) gather_param(p);
    }

    std::unique_ptr<BucketReducer> reducer_;
    float pre_scale_ = 1.0f;  // the reduction's scale, applied as gradients enter the bucket
};

}  // namespace

std::unique_ptr<Strategy> make_stage3(const StrategyContext& ctx) { return std::make_unique<Stage3>(ctx); }

}  // namespace ds::zero
