// End-to-end numerics of the training step through the public C API,
// against an independent float64 implementation of DEEPSPEED_SEMANTICS.md §2–§5
// (AdamW, clipping, WarmupLR, gradient accumulation, loss scaling).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "api_test_util.h"
#include "deepspeed_c.h"

namespace {

constexpr auto f32 = &api_test::f32_tensor;
using Engine = api_test::ScopedEngine;

// float64 model of one AdamW run (DEEPSPEED_SEMANTICS.md §2.1 closed form, §3.4 WarmupLR
// linear, §5.4 clip, averaging over the accumulation window).
struct RefAdamW {
    std::vector<std::vector<double>> p, m, v;
    double lr_max, b1, b2, eps, wd, clip;
    int64_t warmup;
    int64_t t = 0;

    double lr_at(int64_t s) const {  // optimizer step s (0-based) uses index s-1
        int64_t idx = s - 1;
        double N = static_cast<double>(std::max<int64_t>(2, warmup));
        if (idx < 0) return 0.0;
        double gamma = idx < N ? idx / N : 1.0;
        return lr_max * gamma;
    }

    double step(const std::vector<std::vector<double>>& g) {
        double sumsq = 0;
        for (auto& gi : g)
            for (double x : gi) sumsq += x * x;
        double norm = std::sqrt(sumsq);
        double combined = 1.0;
        double c = (norm + 1e-6) / clip;
        if (clip > 0 && c > 1) combined = c;
        double lr = lr_at(t);
        ++t;
        double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
        for (size_t i = 0; i < p.size(); ++i)
            for (size_t j = 0; j < p[i].size(); ++j) {
                double gj = g[i][j] / combined;
                m[i][j] = b1 * m[i][j] + (1 - b1) * gj;
                v[i][j] = b2 * v[i][j] + (1 - b2) * gj * gj;
                double denom = std::sqrt(v[i][j]) / std::sqrt(bc2) + eps;
                p[i][j] = p[i][j] * (1 - lr * wd) - lr / bc1 * m[i][j] / denom;
            }
        return norm;
    }
};

TEST(EngineNumerics, AdamWClipWarmupMatchesFloat64Over50Steps) {
    const int gas = 2;
    Engine eng(
        "{\"train_micro_batch_size_per_gpu\": 4, \"gradient_accumulation_steps\": 2,"
        " \"gradient_clipping\": 0.5,"
        " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01, \"betas\": [0.8, 0.95],"
        "   \"eps\": 1e-6, \"weight_decay\": 0.1}},"
        " \"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_num_steps\": 10,"
        "   \"warmup_type\": \"linear\", \"warmup_max_lr\": 0.01}}}");
    ASSERT_NE(eng.e, nullptr);
    std::mt19937 rng(1234);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const std::vector<int64_t> sizes = {1, 7, 33, 1000, 4099};
    std::vector<std::vector<float>> init(sizes.size());
    RefAdamW ref{{}, {}, {}, 0.01, 0.8, 0.95, 1e-6, 0.1, 0.5, 10};
    std::vector<int64_t> shapes(sizes.begin(), sizes.end());
    for (size_t i = 0; i < sizes.size(); ++i) {
        init[i].resize(sizes[i]);
        for (auto& x : init[i]) x = nd(rng);
        DLTensor t = f32(init[i].data(), &shapes[i], 1);
        ASSERT_EQ(ds_engine_add_param(eng.e, ("p" + std::to_string(i)).c_str(), &t, DS_PARAM_TRAINABLE), DS_OK)
            << ds_last_error();
        ref.p.emplace_back(init[i].begin(), init[i].end());
        ref.m.emplace_back(sizes[i], 0.0);
        ref.v.emplace_back(sizes[i], 0.0);
    }
    ASSERT_EQ(ds_engine_init(eng.e), DS_OK) << ds_last_error();

    int clipped_steps = 0;
    for (int step = 0; step < 50; ++step) {
        std::vector<std::vector<double>> gsum(sizes.size());
        for (size_t i = 0; i < sizes.size(); ++i) gsum[i].assign(sizes[i], 0.0);
        ds_step_info_t info;
        info.struct_size = sizeof info;
        for (int micro = 0; micro < gas; ++micro) {
            // Gradient magnitude varies so clipping is active on some steps only.
            float mag = (step % 3 == 0) ? 0.2f : 0.002f;
            for (size_t i = 0; i < sizes.size(); ++i) {
                std::vector<float> g(sizes[i]);
                for (auto& x : g) x = mag * nd(rng);
                for (size_t j = 0; j < g.size(); ++j) gsum[i][j] += static_cast<double>(g[j]) / gas;
                DLTensor t = f32(g.data(), &shapes[i], 1);
                ASSERT_EQ(ds_engine_accumulate_grad(eng.e, ("p" + std::to_string(i)).c_str(), &t), DS_OK);
            }
            ASSERT_EQ(ds_backward(eng.e, nullptr), DS_OK);
            ASSERT_EQ(ds_step(eng.e, &info), DS_OK) << ds_last_error();
        }
        ASSERT_EQ(info.stepped, 1);
        double expected_lr = ref.lr_at(ref.t);
        double norm = ref.step(gsum);
        if ((norm + 1e-6) / 0.5 > 1) ++clipped_steps;
        EXPECT_NEAR(info.lr, expected_lr, 1e-15) << "step " << step;
        EXPECT_NEAR(info.grad_norm, norm, 1e-6 * norm) << "step " << step;
    }
    EXPECT_GT(clipped_steps, 5);
    EXPECT_LT(clipped_steps, 45);

    // Relative to the parameters' scale (initialised ~N(0,1)): an element
    // that crossed zero carries the fp32 absolute error of 50 updates
    // (~3e-8), which no per-element relative bound can absorb.
    double max_rel = 0, diff2 = 0, ref2 = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
        std::vector<float> out(sizes[i]);
        DLTensor t = f32(out.data(), &shapes[i], 1);
        ASSERT_EQ(ds_engine_get_full_fp32_param(eng.e, ("p" + std::to_string(i)).c_str(), &t), DS_OK);
        for (int64_t j = 0; j < sizes[i]; ++j) {
            double want = ref.p[i][j];
            double rel = std::fabs(out[j] - want) / std::max(std::fabs(want), 1.0);
            max_rel = std::max(max_rel, rel);
            diff2 += (out[j] - want) * (out[j] - want);
            ref2 += want * want;
        }
        std::vector<float> m(sizes[i]);
        DLTensor tm = f32(m.data(), &shapes[i], 1);
        ASSERT_EQ(ds_engine_get_full_optimizer_state(eng.e, ("p" + std::to_string(i)).c_str(), "exp_avg", &tm),
                  DS_OK);
        for (int64_t j = 0; j < sizes[i]; ++j)
            EXPECT_NEAR(m[j], ref.m[i][j], 1e-6 * std::max(std::fabs(ref.m[i][j]), 1e-3));
    }
    EXPECT_LT(max_rel, 1e-6);
    EXPECT_LT(std::sqrt(diff2 / ref2), 1e-6);  // normwise
    double lr = 0;
    ASSERT_EQ(ds_engine_get_lr(eng.e, &lr), DS_OK);
    EXPECT_DOUBLE_EQ(lr, 0.01);
}

// fp16 dynamic loss scaling through the engine: grads arrive scaled, the
// engine unscales with the (updated-first) scale and skips overflowed steps;
// the scale trajectory follows DEEPSPEED_SEMANTICS.md §16.2.
TEST(EngineNumerics, Fp16LossScaleTrajectoryAndGrowthQuirk) {
    Engine eng(
        "{\"train_batch_size\": 1, \"gradient_clipping\": 0,"
        " \"fp16\": {\"enabled\": true, \"initial_scale_power\": 4, \"loss_scale_window\": 3,"
        "   \"hysteresis\": 2},"
        " \"optimizer\": {\"type\": \"SGD\", \"params\": {\"lr\": 1.0}}}");
    ASSERT_NE(eng.e, nullptr);
    float w = 0.0f;
    int64_t shape = 1;
    DLTensor tw = f32(&w, &shape, 1);
    ASSERT_EQ(ds_engine_add_param(eng.e, "w", &tw, DS_PARAM_TRAINABLE), DS_OK);
    ASSERT_EQ(ds_engine_init(eng.e), DS_OK);
    // overflow pattern from §16.2 (calls 0..12)
    const bool ovf[] = {false, true, false, true, true, false, false, false, false, false, false, false, true};
    const double want_scale[] = {16, 16, 16, 8, 4, 4, 4, 4, 8, 8, 8, 16, 16};
    double expected_w = 0.0;
    for (int call = 0; call < 13; ++call) {
        float scale = 0;
        ASSERT_EQ(ds_engine_loss_scale(eng.e, &scale), DS_OK);
        float g = ovf[call] ? INFINITY : 1.0f * scale;  // the host's grad of scale*loss, loss grad = 1
        DLTensor tg = f32(&g, &shape, 1);
        ASSERT_EQ(ds_engine_accumulate_grad(eng.e, "w", &tg), DS_OK);
        ASSERT_EQ(ds_backward(eng.e, nullptr), DS_OK);
        ds_step_info_t info;
        info.struct_size = sizeof info;
        ASSERT_EQ(ds_step(eng.e, &info), DS_OK) << ds_last_error();
        EXPECT_EQ(info.skipped, ovf[call] ? 1 : 0) << "call " << call;
        EXPECT_EQ(info.loss_scale, want_scale[call]) << "call " << call;
        if (!ovf[call]) {
            // unscaled with the scale AFTER the update: halved on growth steps
            expected_w -= 1.0 * (scale / want_scale[call]);
            EXPECT_NEAR(info.grad_norm, 1.0, 0) << "call " << call;  // reported with the old scale
        }
        float got = 0;
        DLTensor tout = f32(&got, &shape, 1);
        ASSERT_EQ(ds_engine_get_full_fp32_param(eng.e, "w", &tout), DS_OK);
        EXPECT_EQ(got, static_cast<float>(expected_w)) << "call " << call;
    }
    int64_t skipped = 0;
    ASSERT_EQ(ds_engine_skipped_steps(eng.e, &skipped), DS_OK);
    EXPECT_EQ(skipped, 4);
}

TEST(EngineNumerics, MinimumLossScaleOverflowIsInvalidStateAndChangesNothing) {
    Engine eng(
        "{\"train_batch_size\": 1, \"fp16\": {\"enabled\": true, \"initial_scale_power\": 1,"
        " \"hysteresis\": 1, \"min_loss_scale\": 1},"
        " \"optimizer\": {\"type\": \"Adam\"}}");
    ASSERT_NE(eng.e, nullptr);
    float w = 1.0f, g = INFINITY;
    int64_t shape = 1;
    DLTensor tw = f32(&w, &shape, 1), tg = f32(&g, &shape, 1);
    ASSERT_EQ(ds_engine_add_param(eng.e, "w", &tw, DS_PARAM_TRAINABLE), DS_OK);
    ASSERT_EQ(ds_engine_init(eng.e), DS_OK);
    ds_step_info_t info;
    info.struct_size = sizeof info;
    ASSERT_EQ(ds_engine_accumulate_grad(eng.e, "w", &tg), DS_OK);
    ASSERT_EQ(ds_backward(eng.e, nullptr), DS_OK);
    ASSERT_EQ(ds_step(eng.e, &info), DS_OK);  // 2 -> 1
    EXPECT_EQ(info.loss_scale, 1.0f);
    ASSERT_EQ(ds_engine_accumulate_grad(eng.e, "w", &tg), DS_OK);
    ASSERT_EQ(ds_backward(eng.e, nullptr), DS_OK);
    EXPECT_EQ(ds_step(eng.e, &info), DS_ERR_INVALID_STATE);
    EXPECT_NE(std::string(ds_last_error()).find("minimum"), std::string::npos) << ds_last_error();
    int64_t steps = -1;
    ASSERT_EQ(ds_engine_global_steps(eng.e, &steps), DS_OK);
    EXPECT_EQ(steps, 1);
    // the engine stays usable: a clean gradient steps normally
    g = 0.5f;
    ASSERT_EQ(ds_engine_set_full_grad(eng.e, "w", &tg), DS_OK);
    ASSERT_EQ(ds_step(eng.e, &info), DS_OK) << ds_last_error();
    EXPECT_EQ(info.skipped, 0);
    EXPECT_EQ(info.global_step, 2);
}

}  // namespace
