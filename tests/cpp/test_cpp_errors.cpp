// deepspeed_c.hpp: errors become ds::Error with the C status and a message
// naming what was wrong, the engine stays usable after one, wrapper-side
// checks (NUL in a name, data that does not match its shape, a view of the
// wrong dtype) refuse before the library is called, and the RAII types are
// move-only with moved-from objects holding no handle.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <type_traits>
#include <vector>

#include "cpp_test_util.h"

using cpptest::sgd_config;

static_assert(!std::is_copy_constructible_v<ds::Engine> && !std::is_copy_assignable_v<ds::Engine>);
static_assert(std::is_nothrow_move_constructible_v<ds::Engine> && std::is_nothrow_move_assignable_v<ds::Engine>);
static_assert(!std::is_copy_constructible_v<ds::Model> && std::is_nothrow_move_constructible_v<ds::Model>);
static_assert(!std::is_copy_constructible_v<ds::Comm> && std::is_nothrow_move_constructible_v<ds::Comm>);
static_assert(std::is_base_of_v<std::runtime_error, ds::Error>);
static_assert(std::is_same_v<ds::Engine, deepspeed_c::Engine>);

TEST(CppErrors, UnknownConfigKeyNamesTheKey) {
    EXPECT_DS_ERROR(ds::Engine("{\"train_batch_size\": 1, \"zero_optimisation\": {}}"), ds::Status::invalid_config,
                    "zero_optimisation");
    EXPECT_DS_ERROR(ds::Engine("{\"train_batch_size\": "), ds::Status::invalid_config, "line");
}

TEST(CppErrors, ErrorCarriesStatusCodeAndText) {
    try {
        ds::Engine e("{\"train_batch_size\": -3}");
        FAIL() << "no throw";
    } catch (const ds::Error& e) {
        EXPECT_EQ(e.code(), DS_ERR_INVALID_CONFIG);
        EXPECT_EQ(e.status(), ds::Status::invalid_config);
        EXPECT_EQ(std::string(e.what()), std::string(ds::last_error()));
        EXPECT_NE(std::string(e.what()).find("train_batch_size"), std::string::npos) << e.what();
        EXPECT_EQ(ds::status_string(e.status()), std::string_view(ds_status_string(DS_ERR_INVALID_CONFIG)));
    }
}

TEST(CppErrors, FromFileNamesTheMissingPath) {
    EXPECT_DS_ERROR(ds::Engine::from_file("/nonexistent/dir/cfg.json"), ds::Status::io, "/nonexistent/dir/cfg.json");
    const std::string path = ::testing::TempDir() + "cpp_cfg.json";
    {
        std::ofstream f(path);
        f << sgd_config(0.1);
    }
    ds::Engine e = ds::Engine::from_file(path);
    EXPECT_EQ(e.world_size(), 1);
    std::remove(path.c_str());
}

TEST(CppErrors, EngineUsableAfterErrors) {
    ds::Engine e(sgd_config(0.5));
    std::vector<float> w{1, 2, 3};
    e.add_param("w", {w, {3}});
    EXPECT_DS_ERROR(e.add_param("w", {w, {3}}), ds::Status::invalid_argument, "w");  // duplicate
    EXPECT_DS_ERROR(e.param<float>("w"), ds::Status::invalid_state, "");              // before init
    EXPECT_DS_ERROR(e.step(), ds::Status::invalid_state, "");
    e.init();
    EXPECT_DS_ERROR(e.init(), ds::Status::invalid_state, "");
    EXPECT_DS_ERROR(e.param<float>("nope"), ds::Status::not_found, "nope");
    std::vector<float> bad(4, 1.0f);
    EXPECT_DS_ERROR(e.accumulate_grad("w", bad, {4}), ds::Status::invalid_argument, "w");  // wrong shape
    EXPECT_DS_ERROR(e.set_lr(-1.0), ds::Status::invalid_argument, "");
    EXPECT_DS_ERROR(e.set_stream(nullptr), ds::Status::invalid_state, "trains on the CPU");  // no stream
    EXPECT_DS_ERROR(e.load_checkpoint("/nonexistent/ckpt"), ds::Status::not_found, "/nonexistent/ckpt");
    // still trains: p -= lr * g
    std::vector<float> g{1, 1, 1};
    e.accumulate_grad("w", g, {3});
    e.backward();
    ds::StepInfo s = e.step();
    EXPECT_TRUE(s.stepped);
    auto v = e.param<float>("w");
    EXPECT_FLOAT_EQ(v[0], 0.5f);
    EXPECT_FLOAT_EQ(v[2], 2.5f);
}

TEST(CppErrors, WrapperChecksNameAndShape) {
    ds::Engine e(sgd_config(0.1));
    std::vector<float> w(6, 1.0f);
    using namespace std::string_view_literals;
    EXPECT_DS_ERROR(e.add_param("a\0b"sv, {w, {6}}), ds::Status::invalid_argument, "NUL");
    EXPECT_DS_ERROR(e.add_param("w", {w, {2, 4}}), ds::Status::invalid_argument, "[2, 4] needs 8 elements");
    EXPECT_DS_ERROR(ds::TensorRef(w, {2, 3}, {1}), ds::Status::invalid_argument, "strides");
    EXPECT_DS_ERROR(ds::TensorRef(w, {-1}), ds::Status::invalid_argument, "negative");
    EXPECT_EQ(e.num_params(), 0);  // nothing reached the library
    e.add_param("w", {w, {2, 3}});
    e.init();
    EXPECT_DS_ERROR(e.param<ds::half>("w"), ds::Status::invalid_argument, "fp32, not fp16");
    EXPECT_DS_ERROR(e.grad<ds::bfloat16>("w"), ds::Status::invalid_argument, "not bf16");
    EXPECT_DS_ERROR(e.get_full_fp32_param("missing"), ds::Status::not_found, "missing");
    std::vector<float> short_value(5);
    EXPECT_DS_ERROR(e.set_full_fp32_param("w", short_value), ds::Status::invalid_argument,
                    "set_full_fp32_param(\"w\"): TensorRef: shape [2, 3] needs 6 elements, the data has 5");
    EXPECT_DS_ERROR(e.accumulate_grad("w", short_value, {2, 3}), ds::Status::invalid_argument,
                    "accumulate_grad(\"w\"): TensorRef: shape [2, 3] needs 6");
    const std::vector<float> cdata(6);
    ds::TensorRef ro(cdata, {6});
    EXPECT_FALSE(ro.writable());
    EXPECT_DS_ERROR(ro.get_mutable("out"), ds::Status::invalid_argument, "read-only");
}

TEST(CppErrors, MoveSemantics) {
    ds::Engine a(sgd_config(0.1));
    ds_engine_t* h = a.get();
    ASSERT_NE(h, nullptr);
    ds::Engine b(std::move(a));
    EXPECT_EQ(b.get(), h);
    EXPECT_EQ(a.get(), nullptr);  // NOLINT(bugprone-use-after-move): the moved-from state is specified
    EXPECT_FALSE(static_cast<bool>(a));
    EXPECT_DS_ERROR(a.world_size(), ds::Status::invalid_handle, "");
    EXPECT_EQ(b.world_size(), 1);

    ds::Engine c(sgd_config(0.2));
    c = std::move(b);  // c's first engine is destroyed, b's moves in
    EXPECT_EQ(c.get(), h);
    EXPECT_EQ(b.get(), nullptr);  // NOLINT
    std::vector<float> w1{1};
    c.add_param("w", {w1, {1}});
    c.init();
    EXPECT_DOUBLE_EQ(c.lr(), 0.1);  // b's config, not c's first one

    ds::Engine empty;
    EXPECT_DS_ERROR(empty.init(), ds::Status::invalid_handle, "");

    ds::Model m("{\"type\": \"sequential\", \"layers\": [{\"type\": \"linear\", \"in_features\": 2, \"out_features\": 1}]}");
    ds::Model m2(std::move(m));
    EXPECT_EQ(m.get(), nullptr);  // NOLINT
    EXPECT_EQ(m2.num_params(), 3);
    EXPECT_DS_ERROR(m.num_params(), ds::Status::invalid_handle, "");

    ds::Comm w = ds::Comm::world();
    ds::Comm w2;
    w2 = std::move(w);
    EXPECT_EQ(w.get(), nullptr);  // NOLINT
    EXPECT_EQ(w2.size(), 1);
    EXPECT_DS_ERROR(w.rank(), ds::Status::invalid_handle, "");
}

TEST(CppErrors, ViewOutlivesMoveOfItsEngine) {
    // The handle (not the Engine object) owns the storage: a move keeps views valid.
    ds::Engine a(sgd_config(0.1));
    std::vector<float> w{4, 5};
    a.add_param("w", {w, {2}});
    a.init();
    auto v = a.param<float>("w");
    ds::Engine b = std::move(a);
    EXPECT_EQ(v[1], 5.0f);
    EXPECT_EQ(b.param<float>("w").data(), v.data());
}
