// deepspeed_c.hpp, host-driven training: views (shape, strides, iteration,
// aliasing), accumulate_grad from spans (also column-major), one AdamW and
// one SGD step against float64 formulas, a small regression whose loss
// falls, the getters, full fp32 copies, named_parameters, checkpoints with
// client state, and the engine's log callback.
#include <atomic>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include <unistd.h>

#include "cpp_test_util.h"

using cpptest::adamw_config;
using cpptest::sgd_config;

TEST(CppTraining, ViewsShapeStridesAndIteration) {
    ds::Engine e(sgd_config(0.1));
    std::vector<float> w(6);
    std::iota(w.begin(), w.end(), 1.0f);
    std::vector<float> frozen{7, 8};
    e.add_param("w", {w, {2, 3}});
    e.add_param("f", {frozen, {2}}, /*trainable=*/false);
    e.init();
    ds::View<const float> v = e.param<float>("w");
    EXPECT_EQ(v.size(), 6u);
    EXPECT_EQ(v.ndim(), 2);
    ASSERT_EQ(v.shape().size(), 2u);
    EXPECT_EQ(v.shape()[0], 2);
    EXPECT_EQ(v.shape()[1], 3);
    EXPECT_EQ(v.strides(), (std::vector<int64_t>{3, 1}));
    EXPECT_EQ(std::vector<float>(v.begin(), v.end()), w);
    EXPECT_EQ(v.device().device_type, kDLCPU);
    EXPECT_EQ(v.to_floats(), w);
    EXPECT_DS_ERROR(e.grad<float>("f"), ds::Status::invalid_argument, "f");  // frozen: no gradient

    // The grad view is the accumulation buffer: writes through it are what step applies.
    ds::View<float> g = e.grad<float>("w");
    for (float& x : g) x = 1.0f;
    e.backward();
    e.step();
    EXPECT_EQ(v.data(), e.param<float>("w").data());  // ZeRO-0: the storage is fixed for the engine's life
    for (size_t i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(v[i], w[i] - 0.1f) << i;
}

TEST(CppTraining, AccumulateGradDividesAndTakesStrides) {
    ds::Engine e(sgd_config(1.0, /*gas=*/2));
    std::vector<float> w(6, 0.0f);
    e.add_param("w", {w, {2, 3}});
    e.init();
    // row-major g[i][j] = 10 i + j, handed over once row-major and once column-major
    std::vector<float> rm{0, 1, 2, 10, 11, 12};
    std::vector<float> cm{0, 10, 1, 11, 2, 12};  // the same matrix stored by columns
    e.accumulate_grad("w", rm, {2, 3});
    e.accumulate_grad("w", ds::TensorRef(cm, {2, 3}, {1, 2}));
    auto g = e.grad<float>("w");
    for (size_t i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(g[i], rm[i]) << i;  // (g + g) / gas
    // predivided: added as it is
    std::vector<float> ones(6, 1.0f);
    e.accumulate_grad("w", ones, {2, 3}, ds::Grad::predivided);
    EXPECT_FLOAT_EQ(e.grad<float>("w")[0], 1.0f);
    EXPECT_FLOAT_EQ(e.get_full_grad("w")[5], 13.0f);
}

// torch.optim.AdamW, step t, in float64.
static void adamw_ref(double& p, double& m, double& v, double g, int t, double lr, double wd) {
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
    p -= lr * wd * p;
    m = b1 * m + (1 - b1) * g;
    v = b2 * v + (1 - b2) * g * g;
    const double mh = m / (1 - std::pow(b1, t)), vh = v / (1 - std::pow(b2, t));
    p -= lr * mh / (std::sqrt(vh) + eps);
}

TEST(CppTraining, AdamWStepsMatchFloat64Formula) {
    const double lr = 0.05, wd = 0.1;
    ds::Engine e(adamw_config(lr, wd));
    std::vector<float> w{0.5f, -1.25f, 2.0f, 0.0f};
    e.add_param("w", {w, {4}});
    e.init();
    std::vector<double> p(w.begin(), w.end()), m(4, 0.0), v(4, 0.0);
    const std::vector<std::vector<float>> grads{{0.1f, -0.2f, 3.0f, 1e-3f}, {-0.4f, 0.05f, 1.0f, -2.0f}};
    for (int t = 1; t <= 2; ++t) {
        e.accumulate_grad("w", grads[static_cast<size_t>(t - 1)], {4});
        e.backward();
        ds::StepInfo s = e.step();
        EXPECT_TRUE(s.stepped);
        EXPECT_FALSE(s.skipped);
        EXPECT_EQ(s.global_step, t);
        EXPECT_DOUBLE_EQ(s.lr, lr);
        double norm = 0;
        for (int i = 0; i < 4; ++i) {
            const double gi = grads[static_cast<size_t>(t - 1)][static_cast<size_t>(i)];
            norm += gi * gi;
            adamw_ref(p[static_cast<size_t>(i)], m[static_cast<size_t>(i)], v[static_cast<size_t>(i)], gi, t, lr, wd);
        }
        EXPECT_NEAR(s.grad_norm, std::sqrt(norm), 1e-6 * std::sqrt(norm));
        const std::vector<float> master = e.get_full_fp32_param("w");
        const std::vector<float> exp_avg = e.get_full_optimizer_state("w", "exp_avg");
        const std::vector<float> exp_avg_sq = e.get_full_optimizer_state("w", "exp_avg_sq");
        for (size_t i = 0; i < 4; ++i) {
            EXPECT_NEAR(master[i], p[i], 1e-6 * (1 + std::fabs(p[i]))) << "t=" << t << " i=" << i;
            EXPECT_NEAR(exp_avg[i], m[i], 1e-6 * (1 + std::fabs(m[i])));
            EXPECT_NEAR(exp_avg_sq[i], v[i], 1e-6 * (1 + std::fabs(v[i])));
        }
    }
    EXPECT_DS_ERROR(e.get_full_optimizer_state("w", "momentum"), ds::Status::not_found, "exp_avg");
}

TEST(CppTraining, SgdStepMatchesFormulaWithAccumulation) {
    ds::Engine e(sgd_config(0.25, /*gas=*/2));
    std::vector<float> w{1.0f, -2.0f};
    e.add_param("w", {w, {2}});
    e.init();
    const std::vector<float> g1{0.5f, 1.5f}, g2{-1.0f, 0.25f};
    e.accumulate_grad("w", g1, {2});
    e.backward();
    EXPECT_FALSE(e.step().stepped);  // first micro-step of the window
    EXPECT_TRUE(e.is_gradient_accumulation_boundary());
    e.accumulate_grad("w", g2, {2});
    e.backward();
    ds::StepInfo s = e.step();
    EXPECT_TRUE(s.stepped);
    auto v = e.param<float>("w");
    for (size_t i = 0; i < 2; ++i) {
        const double expect = double(w[i]) - 0.25 * (double(g1[i]) + double(g2[i])) / 2.0;
        EXPECT_NEAR(v[i], expect, 1e-7) << i;
    }
    EXPECT_EQ(e.micro_steps(), 2);
    EXPECT_EQ(e.global_steps(), 1);
    EXPECT_EQ(e.global_samples(), 2);
    EXPECT_EQ(e.skipped_steps(), 0);
}

TEST(CppTraining, LinearRegressionLossFalls) {
    // y = a.x with a fixed a; the engine learns w (AdamW, 4 inputs).
    ds::Engine e(adamw_config(0.05, 0.0));
    std::vector<float> w(4, 0.0f);
    const float a[4] = {1.0f, -2.0f, 0.5f, 3.0f};
    e.add_param("w", {w, {4}});
    e.init();
    uint32_t state = 12345;
    auto rnd = [&] { state = state * 1664525u + 1013904223u; return float(state >> 8) / float(1 << 24) - 0.5f; };
    double first = 0, last = 0;
    for (int step = 0; step < 200; ++step) {
        float x[4], y = 0, pred = 0;
        auto wv = e.param<float>("w");
        for (int i = 0; i < 4; ++i) { x[i] = rnd(); y += a[i] * x[i]; pred += wv[static_cast<size_t>(i)] * x[i]; }
        const float d = pred - y;
        if (step < 20) first += d * d;
        if (step >= 180) last += d * d;
        std::vector<float> g(4);
        const float mult = e.loss_multiplier();
        for (size_t i = 0; i < 4; ++i) g[i] = mult * 2.0f * d * x[i];
        e.accumulate_grad("w", g, {4}, ds::Grad::predivided);
        e.backward();
        e.step();
    }
    EXPECT_LT(last, 0.05 * first) << "first " << first << " last " << last;
}

TEST(CppTraining, GettersNamedParametersAndConfig) {
    ds::Engine e(sgd_config(0.125));
    std::vector<float> w(12, 0.5f), b(3, 0.0f);
    e.add_param("layer.weight", {w, {3, 4}});
    e.add_param("layer.bias", {b, {3}}, false);
    e.init();
    EXPECT_EQ(e.rank(), 0);
    EXPECT_EQ(e.world_size(), 1);
    EXPECT_FLOAT_EQ(e.loss_scale(), 1.0f);
    EXPECT_FLOAT_EQ(e.loss_multiplier(), 1.0f);
    EXPECT_DOUBLE_EQ(e.lr(), 0.125);
    e.set_lr(0.5);
    EXPECT_DOUBLE_EQ(e.lr(), 0.5);
    const auto ps = e.named_parameters();
    ASSERT_EQ(ps.size(), 2u);
    EXPECT_EQ(ps[0].name, "layer.weight");
    EXPECT_EQ(std::vector<int64_t>(ps[0].shape.begin(), ps[0].shape.end()), (std::vector<int64_t>{3, 4}));
    EXPECT_EQ(ps[0].numel, 12);
    EXPECT_TRUE(ps[0].trainable);
    EXPECT_TRUE(ds::same_dtype(ps[0].dtype, ds::dtype_of<float>::value));
    EXPECT_EQ(ps[1].name, "layer.bias");
    EXPECT_FALSE(ps[1].trainable);
    EXPECT_DS_ERROR(e.param_info(2), ds::Status::invalid_argument, "2");
    EXPECT_NE(e.config_json().find("\"gradient_accumulation_steps\""), std::string_view::npos);
    const ds::MemoryReport m = e.memory_report();
    EXPECT_GE(m.params_bytes, 15 * 4);
    EXPECT_EQ(m.total_bytes, m.params_bytes + m.grads_bytes + m.optimizer_state_bytes + m.buffers_bytes);
    const ds::MemoryReport d = e.disk_report();  // nothing on disk without NVMe offload
    EXPECT_EQ(d.params_bytes + d.optimizer_state_bytes + d.total_bytes, 0);
    EXPECT_DS_ERROR(e.comms_log_summary(), ds::Status::invalid_state, "comms_logger");
    e.set_gradient_accumulation_boundary(true);  // managed accumulation: allowed to force
    EXPECT_TRUE(e.is_gradient_accumulation_boundary());
    // gather/release are name checks below ZeRO-3
    e.gather({"layer.weight"});
    e.release({"layer.weight"});
    EXPECT_DS_ERROR(e.gather({"nope"}), ds::Status::not_found, "nope");
}

TEST(CppTraining, CommsLogSummaryWhenEnabled) {
    ds::Engine e(R"({"train_batch_size": 1, "comms_logger": {"enabled": true},
                     "optimizer": {"type": "SGD", "params": {"lr": 0.1}}})");
    std::vector<float> w{1, 2};
    e.add_param("w", {w, {2}});
    e.init();
    e.accumulate_grad("w", w, {2});
    e.backward();
    e.step();
    const std::string table = e.comms_log_summary();  // a copy: valid after the next call
    EXPECT_EQ(e.world_size(), 1);
    EXPECT_FALSE(table.empty());
}

TEST(CppTraining, HalfPrecisionViews) {
    // Values exact in fp16 and bf16: the 16-bit views widen back to them.
    const std::vector<float> w{1.0f, -0.5f, 3.0f, 0.125f};
    for (const char* which : {"bf16", "fp16"}) {
        const bool bf = std::string(which) == "bf16";
        ds::Engine e(std::string(R"({"train_batch_size": 1, "optimizer": {"type": "SGD", "params": {"lr": 0.1}}, ")") +
                     which + R"(": {"enabled": true)" + (bf ? "" : R"(, "initial_scale_power": 5)") + "}}");
        e.add_param("w", {w, {2, 2}});
        e.init();
        EXPECT_EQ(e.param_info(0).dtype.bits, 16) << which;
        std::vector<float> back = bf ? e.param<ds::bfloat16>("w").to_floats() : e.param<ds::half>("w").to_floats();
        EXPECT_EQ(back, w) << which;
        EXPECT_DS_ERROR(e.param<float>("w"), ds::Status::invalid_argument, std::string(which) + ", not fp32");
        EXPECT_FLOAT_EQ(e.loss_scale(), bf ? 1.0f : 32.0f) << which;  // fp16: 2^initial_scale_power
    }
}

TEST(CppTraining, FullCopiesRoundTrip) {
    ds::Engine e(adamw_config(0.01, 0.0));
    std::vector<float> w{1, 2, 3, 4};
    e.add_param("w", {w, {2, 2}});
    e.init();
    const std::vector<float> nv{-1, -2, -3, -4};
    e.set_full_fp32_param("w", nv);
    EXPECT_EQ(e.get_full_fp32_param("w"), nv);
    EXPECT_EQ(std::vector<float>(e.param<float>("w").begin(), e.param<float>("w").end()), nv);
    e.set_full_grad("w", w);
    EXPECT_EQ(e.get_full_grad("w"), w);
    e.set_full_optimizer_state("w", "exp_avg", w);
    EXPECT_EQ(e.get_full_optimizer_state("w", "exp_avg"), w);
}

TEST(CppTraining, CheckpointRoundTripWithClientState) {
    namespace fs = std::filesystem;
    // Per process: the C++17 and C++20 builds of this test may run at once (ctest -j).
    const fs::path dir = fs::path(::testing::TempDir()) / ("cpp_ckpt_test_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    ds::Engine e(adamw_config(0.01, 0.0));
    std::vector<float> w{1, 2, 3};
    e.add_param("w", {w, {3}});
    e.init();
    const std::vector<float> g{1, -1, 0.5f};
    e.accumulate_grad("w", g, {3});
    e.backward();
    e.step();
    const std::vector<float> saved = e.get_full_fp32_param("w");
    e.save_checkpoint(dir.string(), "t1", R"({"epoch": 3, "note": "x"})");
    EXPECT_TRUE(fs::exists(dir / "t1" / "manifest.json"));
    EXPECT_DS_ERROR(e.save_checkpoint(dir.string(), "bad/tag"), ds::Status::invalid_argument, "tag");
    EXPECT_DS_ERROR(e.save_checkpoint(dir.string(), "t2", "{not json"), ds::Status::invalid_argument, "client_state");
    e.save_checkpoint(dir.string());  // default tag global_step1, no client state
    EXPECT_TRUE(fs::exists(dir / "global_step1"));

    e.set_full_fp32_param("w", std::vector<float>{9, 9, 9});
    const std::string cs = e.load_checkpoint(dir.string(), "t1");
    EXPECT_NE(cs.find("\"epoch\""), std::string::npos) << cs;
    EXPECT_NE(cs.find('3'), std::string::npos) << cs;
    EXPECT_EQ(e.get_full_fp32_param("w"), saved);
    EXPECT_EQ(e.global_steps(), 1);
    EXPECT_EQ(e.load_checkpoint(dir.string()), "{}");  // latest = global_step1, saved without client state

    // flags pass through: module only restores the weights, not the counters
    e.accumulate_grad("w", g, {3});
    e.backward();
    e.step();
    EXPECT_EQ(e.global_steps(), 2);
    e.load_checkpoint(dir.string(), "t1", ds::load_module_only);
    EXPECT_EQ(e.get_full_fp32_param("w"), saved);
    EXPECT_EQ(e.global_steps(), 2);
    EXPECT_DS_ERROR(e.load_checkpoint(dir.string(), "t1", 64u), ds::Status::invalid_argument, "flag");
    EXPECT_DS_ERROR(e.load_checkpoint(dir.string(), "missing_tag"), ds::Status::not_found, "missing_tag");

    e.save_16bit_model(dir.string(), "weights.safetensors");
    EXPECT_TRUE(fs::exists(dir / "weights.safetensors"));
    EXPECT_DS_ERROR(e.save_16bit_model(dir.string(), "a/b"), ds::Status::invalid_argument, "a/b");
    e.save_16bit_model(dir.string(), "trainable.safetensors", /*exclude_frozen=*/true);
    EXPECT_TRUE(fs::exists(dir / "trainable.safetensors"));
    EXPECT_DS_ERROR(e.save_16bit_model(dir.string(), std::string_view()), ds::Status::invalid_argument, "filename");
    fs::remove_all(dir);
}

TEST(CppTraining, EngineLogCallbackGetsMessagesAndSwallowsExceptions) {
    std::atomic<int> seen{0}, init_lines{0};
    ds::EngineOptions o;
    o.log_level = DS_LOG_INFO;
    o.log = [&](ds::LogLevel level, std::string_view msg) {
        ++seen;
        if (level == ds::LogLevel::info && msg.find("engine initialized") != std::string_view::npos) ++init_lines;
        throw std::runtime_error("a sink that throws must not unwind into the library");
    };
    ds::Engine a(sgd_config(0.1), std::move(o));
    std::vector<float> w{1};
    a.add_param("w", {w, {1}});
    ds::Engine e = std::move(a);  // the sink moves with the engine
    e.init();
    EXPECT_GE(init_lines.load(), 1);
    EXPECT_GE(seen.load(), 1);
    EXPECT_EQ(e.num_params(), 1);  // usable after the sink threw
}
