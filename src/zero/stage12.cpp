// ZeRO stages 1 and 2 with several ranks (DEEPSPEED_SEMANTICS.md §6.1): the fp32 master
// and the optimizer state hold this rank's partition of the flat buffer;
// at stage 2 the gradient too, reduced in buckets as it arrives
// (BucketReducer, all-reduce mode), at stage 1 the whole flat gradient is
// all-reduced at the boundary. Each rank updates its partition, then the
// working weights are all-gathered.
#include <algorithm>
#include <cstring>

#include "zero/bucket_reducer.h"
#include "zero/flat_strategy.h"

namespace ds::zero {

namespace {

class Stage12 final : public FlatStrategy {
public:
    explicit Stage12(const StrategyContext& ctx)
        : FlatStrategy(ctx), partition_grads_(ctx.config->zero_optimization.stage >= 2) {}

    bool collective(Collective call) const override {
        return call == Collective::GetFull || (call == Collective::Backward && partition_grads_);
    }

    bool has_reduction_buckets() const override { return reducer_ != nullptr; }

    void materialize(ParamStore& params, size_t n_states, DType state_dtype) override {
        materialize_flat(params, n_states, state_dtype, /*partition_optimizer=*/true, partition_grads_);
        if (!partition_grads_) return;
        // Buckets of reduce_bucket_size elements (two with overlap_comm), never
        // larger than the model; a larger parameter is reduced in pieces.
        const config::ZeroConfig& z = ctx_.config->zero_optimization;
        std::vector<int64_t> numel;
        for (const Param& p : params.all())
            if (p.trainable) numel.push_back(p.numel);
        const int64_t cap = std::max<int64_t>(1, std::min(z.reduce_bucket_size, flat_.padded));
        reducer_ = std::make_unique<BucketReducer>(
            BucketReducer::Mode::AllReduce, ctx_.buffer_comm(), &flat_.layout, numel,
            flat_.chunk, flat_.rank_offset, ctx_.grad_dtype, cap, z.overlap_comm, *ctx_.alloc, ctx_.kernels,
            ctx_.device);
        reducer_->set_target(flat_.grad, &flat_.grad_stale);
        pre_scale_ = reduction_scales(/*zero_reduce_scatter=*/true).first;
    }

    void accumulate(Param& p, const void* grad, int gdtype, float scale) override {
        // Stage 2: into the bucket, pre-divided for the data-parallel mean.
        if (reducer_) reducer_->add(static_cast<size_t>(p.trainable_index), grad, gdtype, scale * pre_scale_);
        else accumulate_with_norm(p, grad, gdtype, scale);
    }

    void on_backward() override {
        if (reducer_) reducer_->flush();  // stage 2 reduces every micro-step
    }

    void reduce() override {
        if (reducer_) {
            if (!reducer_->idle()) reducer_->flush();
            clear_stale_partition();
            return;
        }
        clear_stale_params();
        allreduce_full_gradient(std::max<int64_t>(1, ctx_.config->zero_optimization.reduce_bucket_size));
    }

    void after_step() override {
        refresh_working_from_master(static_cast<size_t>(flat_.part_numel));
        allgather_working();
    }

    bool writes_optimizer_file() const override { return true; }

private:
    // Every rank's updated partition of the working weights to all.
    void allgather_working() {
        const int64_t P = flat_.part_numel;
        if (P == 0) return;
        const DType wd = ctx_.working_dtype;
        char* w = static_cast<char*>(flat_.working.data_ptr());
        const int64_t es = static_cast<int64_t>(flat_.working.element_size());
        // In place: rank r's partition is already at [r*P, (r+1)*P). Sharded as
        // DeepSpeed does when the group exceeds allgather_bucket_size.
        const std::vector<int64_t> bounds =
            allgather_shard_bounds(P, world_, ctx_.config->zero_optimization.allgather_bucket_size);
        if (bounds.size() <= 2) {
            data_.allgather(w + rank_ * P * es, w, static_cast<size_t>(P), wd);
            return;
        }
        // Shards: gather piece [a, b) of every partition through a staging
        // buffer in the working weights' memory.
        int64_t widest = 0;
        for (size_t i = 0; i + 1 < bounds.size(); ++i) widest = std::max(widest, bounds[i + 1] - bounds[i]);
        const Tensor stage = Tensor::empty({widest * world_}, wd, ctx_.device, *ctx_.alloc, MemCategory::Buffers);
        for (size_t i = 0; i + 1 < bounds.size(); ++i) {
            const int64_t a = bounds[i], len = bounds[i + 1] - bounds[i];
            data_.allgather(w + (rank_ * P + a) * es, stage.data_ptr(), static_cast<size_t>(len), wd);
            for (int r = 0; r < world_; ++r)
                if (r != rank_) flat_.working.view({len}, r * P + a).copy_from(stage.view({len}, r * len));
        }
    }

    const bool partition_grads_;  // stage 2
    float pre_scale_ = 1.0f;  // the reduction's scale, applied as gradients enter the bucket
};

}  // namespace

std::unique_ptr<Strategy> make_stage12(const StrategyContext& ctx) { return std::make_unique<Stage12>(ctx); }

}  // namespace ds::zero
