// zero::Strategy on its own, in a world of one (the MPI tests run ZeRO 1/2/3
// across ranks against stage 0): every configured stage trains whole
// buffers, calls no collective, accumulates a window with its norm and runs
// the optimizer over every real element — checked against float64 formulas.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "comm/factory.h"
#include "config/config.h"
#include "core/allocator.h"
#include "core/error.h"
#include "kernels.h"
#include "optim/optimizer.h"
#include "zero/strategy.h"

namespace {

std::string config_json(int stage) {
    return R"({"train_batch_size": 2, "gradient_accumulation_steps": 2,
               "zero_allow_untested_optimizer": true,
               "optimizer": {"type": "SGD", "params": {"lr": 0.25}},
               "zero_optimization": {"stage": )" +
           std::to_string(stage) + "}}";
}

ds::Tensor tensor_of(std::vector<float>& v, ds::Shape shape) {
    ds::Shape strides(shape.size(), 1);
    for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) strides[d] = strides[d + 1] * shape[d + 1];
    return ds::Tensor::borrow(v.data(), shape, strides, ds::DType::F32, ds::Device::cpu());
}

struct Fixture {
    ds::config::Config config;
    ds::Allocator alloc;
    ds::ParamStore params;
    std::unique_ptr<ds::zero::Strategy> strategy;

    explicit Fixture(int stage) : config(ds::config::parse(config_json(stage), 1)) {
        ds::zero::StrategyContext ctx;
        ctx.comm = ds::comm::make_local(ds::comm::Options{});
        ctx.config = &config;
        ctx.alloc = &alloc;
        strategy = ds::zero::Strategy::create(ctx);
    }
};

TEST(ZeroStrategy, WorldOfOneStepsWholeBuffersWithoutCollectives) {
    for (int stage = 0; stage <= 3; ++stage) {
        SCOPED_TRACE("stage " + std::to_string(stage));
        Fixture f(stage);
        ds::zero::Strategy& z = *f.strategy;
        EXPECT_EQ(z.stage(), stage);
        for (auto c : {ds::zero::Collective::Backward, ds::zero::Collective::Gather, ds::zero::Collective::GetFull})
            EXPECT_FALSE(z.collective(c));

        std::vector<float> w0 = {1.0f, -2.0f, 0.5f, 3.0f, -0.25f, 4.0f};
        std::vector<float> b0 = {0.75f, -1.5f};
        std::vector<float> frozen0 = {9.0f};
        f.params.add("w", tensor_of(w0, {2, 3}), true, ds::DType::F32, f.alloc);
        f.params.add("frozen", tensor_of(frozen0, {1}), false, ds::DType::F32, f.alloc);
        f.params.add("b", tensor_of(b0, {2}), true, ds::DType::F32, f.alloc);
        z.broadcast_initial(f.params);
        z.materialize(f.params, /*n_states=*/0, ds::DType::F32);

        // Two micro-batches, each scaled by 1/2 (the window's mean).
        std::vector<float> gw1 = {0.5f, 1.0f, -1.5f, 2.0f, 0.0f, -3.0f}, gw2 = {1.5f, -1.0f, 0.5f, 2.0f, 4.0f, 1.0f};
        std::vector<float> gb1 = {-2.0f, 6.0f}, gb2 = {1.0f, 1.0f};
        ds::Param& w = f.params.get("w");
        ds::Param& b = f.params.get("b");
        z.accumulate(w, gw1.data(), DSK_F32, 0.5f);
        z.accumulate(b, gb1.data(), DSK_F32, 0.5f);
        z.accumulate(w, gw2.data(), DSK_F32, 0.5f);
        z.accumulate(b, gb2.data(), DSK_F32, 0.5f);
        z.on_backward();
        EXPECT_FALSE(z.gradients_pending());
        z.reduce();

        std::vector<double> gw(6), gb(2);
        double ref_sumsq = 0.0;
        for (size_t i = 0; i < 6; ++i) ref_sumsq += (gw[i] = 0.5 * gw1[i] + 0.5 * gw2[i]) * gw[i];
        for (size_t i = 0; i < 2; ++i) ref_sumsq += (gb[i] = 0.5 * gb1[i] + 0.5 * gb2[i]) * gb[i];
        double sumsq = -1.0;
        bool overflow = true;
        z.grad_norm(&sumsq, &overflow);
        EXPECT_NEAR(sumsq, ref_sumsq, 1e-9 * ref_sumsq);
        EXPECT_FALSE(overflow);

        // This rank's checkpoint fragment: the whole parameter.
        ds::zero::Holding h = z.holding(w);
        ASSERT_EQ(h.ranges.size(), 1u);
        EXPECT_EQ(h.ranges[0].param_offset, 0);
        EXPECT_EQ(h.ranges[0].length, 6);
        EXPECT_TRUE(z.holding(f.params.get("frozen")).ranges.empty());
        EXPECT_TRUE(z.writes_optimizer_file());

        ds::config::OptimizerConfig oc = *f.config.optimizer;
        auto opt = ds::optim::Optimizer::create(oc, f.config.model_dtype());
        ds::optim::StepContext ctx;
        ctx.lr = 0.25;
        ctx.grad_scale = 0.5f;  // e.g. a loss scale of 2
        z.run_optimizer(*opt, ctx);
        z.after_step();
        z.drop_gradients();
        const float* wm = w.master.data<float>();
        const float* bm = b.master.data<float>();
        for (size_t i = 0; i < 6; ++i) EXPECT_NEAR(wm[i], w0[i] - 0.25 * 0.5 * gw[i], 1e-6) << "w[" << i << "]";
        for (size_t i = 0; i < 2; ++i) EXPECT_NEAR(bm[i], b0[i] - 0.25 * 0.5 * gb[i], 1e-6) << "b[" << i << "]";
        EXPECT_EQ(f.params.get("frozen").master.data<float>()[0], 9.0f);  // not stepped
    }
}

TEST(ZeroStrategy, Save16bitModelAtStage3NeedsGatherEvenInAWorldOfOne) {
    Fixture f3(3);
    try {
        f3.strategy->check_save_16bit_model();
        ADD_FAILURE() << "stage 3 without stage3_gather_16bit_weights_on_model_save was accepted";
    } catch (const ds::Error& e) {
        EXPECT_EQ(e.status(), DS_ERR_INVALID_CONFIG);
        EXPECT_NE(std::string(e.what()).find("stage3_gather_16bit_weights_on_model_save"), std::string::npos)
            << e.what();
    }
    Fixture f2(2);
    EXPECT_NO_THROW(f2.strategy->check_save_16bit_model());
}

}  // namespace
