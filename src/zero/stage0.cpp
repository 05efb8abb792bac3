// ZeRO stage 0 (and any stage in a world of one): every rank holds the whole
// master weights, gradients and optimizer state. Gradients accumulate with
// their norm in one pass; with several ranks the whole flat gradient is
// all-reduced once per window at the boundary (DeepSpeed's engine
// allreduce_gradients, in its fixed 5e8-element buckets).
#include "zero/flat_strategy.h"

namespace ds::zero {

namespace {

constexpr int64_t kAllreduceBucket = 500000000;

class Stage0 final : public FlatStrategy {
public:
    using FlatStrategy::FlatStrategy;

    // No call runs a collective the ranks could disagree on: gradients are
    // reduced inside ds_step, which always agrees first.
    bool collective(Collective) const override { return false; }

    void materialize(ParamStore& params, size_t n_states, DType state_dtype) override {
        materialize_flat(params, n_states, state_dtype, /*partition_optimizer=*/false, /*partition_grads=*/false);
    }

    void accumulate(Param& p, const void* grad, int gdtype, float scale) override {
        accumulate_with_norm(p, grad, gdtype, scale);
    }

    void reduce() override {
        clear_stale_params();
        if (world_ > 1) allreduce_full_gradient(kAllreduceBucket);
    }

    // World of one: the norm accumulate cached (no reduction changed the
    // buffers). Otherwise every rank holds the same reduced gradient and the
    // local norm is the global one.
    void grad_norm(double* sumsq, bool* overflow) override {
        if (world_ == 1 && cached_norm(sumsq, overflow)) return;
        int nonfinite = 0;
        *sumsq = local_sumsq(0, flat_.numel, &nonfinite);
        *overflow = nonfinite != 0;
    }

    void run_optimizer(optim::Optimizer& opt, const optim::StepContext& ctx) override {
        run_over(opt, ctx, static_cast<size_t>(flat_.numel));  // the real elements only
    }

    void after_step() override {}  // the working weights are updated in place
    bool writes_optimizer_file() const override { return rank_ == 0; }  // the same on every rank
};

}  // namespace

std::unique_ptr<Strategy> make_stage0(const StrategyContext& ctx) { return std::make_unique<Stage0>(ctx); }

}  // namespace ds::zero
