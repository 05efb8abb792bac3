// deepspeed_c.hpp: the built-in model API (Model, Engine::with_model,
// forward with and without targets, backward, eval), Comm, the
// library-level functions (version, ABI, convert, estimators, the global
// log sink).
#include <atomic>
#include <cmath>
#include <string>
#include <vector>

#include "cpp_test_util.h"

namespace {

const char* kSpec =
    R"({"type": "sequential", "seed": 7, "loss": "mse", "layers": [)"
    R"({"type": "linear", "in_features": 3, "out_features": 8}, {"type": "gelu"},)"
    R"({"type": "linear", "in_features": 8, "out_features": 2}]})";
const char* kConfig =
    R"({"train_micro_batch_size_per_gpu": 4, "optimizer": {"type": "AdamW", "params": {"lr": 0.02}}})";

// targets = a fixed linear map of the features
void make_batch(uint32_t& s, std::vector<float>& x, std::vector<float>& t) {
    for (size_t r = 0; r < 4; ++r) {
        float f[3];
        for (float& v : f) { s = s * 1664525u + 1013904223u; v = float(s >> 8) / float(1 << 24) - 0.5f; }
        for (size_t i = 0; i < 3; ++i) x[r * 3 + i] = f[i];
        t[r * 2 + 0] = f[0] - 2 * f[1];
        t[r * 2 + 1] = 0.5f * f[2] + f[0];
    }
}

}  // namespace

TEST(CppModel, BadSpecNamesTheKey) {
    EXPECT_DS_ERROR(ds::Model(R"({"type": "sequential", "layers": [{"type": "linear", "in_features": 3}]})"),
                    ds::Status::invalid_config, "out_features");
    ds::Model m(kSpec);
    EXPECT_DS_ERROR(ds::Engine::with_model(R"({"train_batch_size": 4, "optimiser": {}})", m),
                    ds::Status::invalid_config, "optimiser");
    EXPECT_DS_ERROR(ds::Engine::with_model(kConfig, ds::Model()), ds::Status::invalid_handle, "");
}

// ParamInfo::expert (DS_PARAM_EXPERT) marks exactly the MoE experts' parameters.
TEST(CppModel, ExpertParametersAreMarked) {
    ds::Model m(R"({"type": "gpt", "vocab_size": 16, "block_size": 8, "n_layer": 2, "n_head": 2, "n_embd": 16,)"
                R"( "moe": {"num_experts": 2}})");
    ds::Engine e = ds::Engine::with_model(kConfig, m);
    int experts = 0;
    for (int64_t i = 0; i < e.num_params(); ++i) {
        const ds::ParamInfo p = e.param_info(i);
        const bool named = std::string(p.name).find(".deepspeed_experts.") != std::string::npos;
        EXPECT_EQ(p.expert, named) << p.name;
        experts += p.expert;
    }
    EXPECT_EQ(experts, 2 * 4);  // 2 experts x (c_fc, c_proj) x (weight, bias)
}

TEST(CppModel, TrainsAndLossFalls) {
    ds::Model m(kSpec);
    EXPECT_EQ(m.num_params(), 3 * 8 + 8 + 8 * 2 + 2);
    ds::Engine e = ds::Engine::with_model(kConfig, m);
    m = ds::Model();  // the engine keeps the model alive
    EXPECT_EQ(e.num_params(), 4);
    std::vector<float> x(12), t(8);
    uint32_t s = 99;
    std::vector<float> wrong_batch(6 * 3);
    EXPECT_DS_ERROR(e.forward({wrong_batch, {6, 3}}, {t, {4, 2}}), ds::Status::invalid_argument, "");
    double first = 0, last = 0;
    for (int step = 0; step < 150; ++step) {
        make_batch(s, x, t);
        const float loss = e.forward({x, {4, 3}}, {t, {4, 2}});
        ASSERT_TRUE(std::isfinite(loss));
        if (step < 10) first += loss;
        if (step >= 140) last += loss;
        e.backward();
        e.step();
    }
    EXPECT_LT(last, 0.5 * first) << first << " -> " << last;
    EXPECT_DS_ERROR(e.backward(), ds::Status::invalid_state, "");  // no forward since the last backward

    // eval: any batch size, output without targets
    e.eval();
    std::vector<float> x1(3 * 1, 0.1f), y1(2);
    ds::TensorRef out(y1, {1, 2});
    e.forward({x1, {1, 3}}, out);
    EXPECT_TRUE(std::isfinite(y1[0]) && std::isfinite(y1[1]));
    const std::vector<float> cy(2);
    ds::TensorRef ro(cy, {1, 2});
    EXPECT_DS_ERROR(e.forward({x1, {1, 3}}, ro), ds::Status::invalid_argument, "read-only");
    e.train();

    // forward without targets + backward(out_grad) = output.backward(out_grad)
    std::vector<float> y(8), dy(8, 0.0f);
    ds::TensorRef yo(y, {4, 2});
    e.forward({x, {4, 3}}, yo);
    std::vector<float> bad_dy(3);
    EXPECT_DS_ERROR(e.backward({bad_dy, {3}}), ds::Status::invalid_argument, "");
    e.backward({dy, {4, 2}});
    EXPECT_TRUE(e.step().stepped);
}

TEST(CppModel, HostEngineRefusesForward) {
    ds::Engine e(cpptest::sgd_config(0.1));
    std::vector<float> w{1};
    e.add_param("w", {w, {1}});
    e.init();
    std::vector<float> x(3), t(2);
    EXPECT_DS_ERROR(e.forward({x, {1, 3}}, {t, {1, 2}}), ds::Status::invalid_state, "");
    EXPECT_DS_ERROR(e.eval(), ds::Status::invalid_state, "");
}

TEST(CppComm, WorldOfOneAndEngineJoinsIt) {
    ds::CommOptions o;
    o.backend = ds::Backend::local;
    o.timeout_ms = 60000;
    ds::Comm c = ds::Comm::world(o);
    EXPECT_EQ(c.rank(), 0);
    EXPECT_EQ(c.size(), 1);
    EXPECT_EQ(c.backend(), ds::Backend::local);
    ds::EngineOptions eo;
    eo.comm = &c;
    ds::Engine e(cpptest::sgd_config(0.1), std::move(eo));
    EXPECT_EQ(e.world_size(), 1);
    c.finalize();
    EXPECT_DS_ERROR(c.finalize(), ds::Status::invalid_state, "");
    EXPECT_EQ(c.size(), 1);  // still answers after finalize

    ds::CommOptions bad;
    bad.timeout_ms = -5;
    EXPECT_DS_ERROR(ds::Comm::world(bad), ds::Status::invalid_argument, "timeout_ms");
    ds::Comm a = ds::Comm::world();
    a.abort("stopped by the test");
    EXPECT_DS_ERROR(a.finalize(), ds::Status::comm, "stopped by the test");
}

TEST(CppComm, FromMpiWithoutMpiNamesTheCause) {
    // This process never initialised MPI: a host communicator cannot exist.
    try {
        ds::Comm c = ds::Comm::from_mpi(0);
        FAIL() << "no throw";
    } catch (const ds::Error& e) {
        EXPECT_TRUE(e.status() == ds::Status::invalid_state || e.status() == ds::Status::unsupported) << e.what();
        EXPECT_NE(std::string(e.what()).find("MPI"), std::string::npos) << e.what();
    }
}

TEST(CppLibrary, VersionAbiConvertEstimators) {
    EXPECT_EQ(ds::version(), static_cast<uint32_t>(DS_VERSION_NUMBER));
    EXPECT_EQ(ds::version_string(), std::string_view(ds_version_string()));
    EXPECT_NO_THROW(ds::check_abi());
    EXPECT_EQ(ds::abi_version(), static_cast<uint32_t>(DS_ABI_VERSION));
    EXPECT_NE(ds::build_info().find("\"version\""), std::string_view::npos);

    // fp32 -> bf16 -> fp32: values exact in bf16 come back unchanged, 1 + 2^-10 rounds to 1
    std::vector<float> src{1.0f, -2.5f, 0.15625f, 1.0f + 1.0f / 1024};
    std::vector<ds::bfloat16> mid(4);
    std::vector<float> back(4);
    ds::TensorRef s(src, {4}), m(mid, {4}), b(back, {4});
    ds::convert(s, m);
    ds::convert(m, b);
    EXPECT_EQ(mid[0].bits, 0x3F80u);
    EXPECT_EQ(back, (std::vector<float>{1.0f, -2.5f, 0.15625f, 1.0f}));
    std::vector<float> wrong(3);
    ds::TensorRef w(wrong, {3});
    EXPECT_DS_ERROR(ds::convert(s, w), ds::Status::invalid_argument, "shape");

    // ZeRO-2 without offload: gpu = 2P + int(18P / T), cpu = 4P * gpus_per_node * factor
    const int64_t P = 1000000;
    ds::MemEstimate z2 = ds::estimate_zero2_mem(P, 4, 2, false);
    EXPECT_EQ(z2.gpu_bytes, 2 * P + (18 * P) / 8);
    EXPECT_EQ(z2.cpu_bytes, static_cast<int64_t>(4.0 * P * 4 * 1.5));
    EXPECT_DS_ERROR(ds::estimate_zero2_mem(P, 0, 1, false), ds::Status::invalid_argument, "num_gpus_per_node");
    ds::MemEstimate z3 = ds::estimate_zero3_mem(P, 1000, 1, 1, false, false, true);
    EXPECT_EQ(z3.largest_layer_bytes, 4 * 1000);
    EXPECT_GT(z3.gpu_bytes, 0);
}

TEST(CppLibrary, GlobalLogSink) {
    std::atomic<int> hits{0};
    ds::set_log_callback([&](ds::LogLevel, std::string_view msg) {
        if (msg.find("cpp-global-sink") != std::string_view::npos) ++hits;
    });
    {
        ds::Comm c = ds::Comm::world();
        c.abort("cpp-global-sink");
    }
    ds::set_log_callback(nullptr);  // back to stderr
    EXPECT_GE(hits.load(), 1);
}
