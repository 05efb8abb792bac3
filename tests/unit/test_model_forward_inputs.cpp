// ds_forward's inputs are borrowed for the call only (include/deepspeed_c.h,
// "Memory": the library copies what it keeps). A caller that reuses its
// input and target buffers between ds_forward and ds_backward gets every
// gradient bit for bit as one that leaves them alone: a GPT (int32 token ids
// and class targets) and a sequential MLP (fp32 features, mse targets).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "api_test_util.h"
#include "deepspeed_c.h"

namespace {

constexpr int64_t kB = 2, kT = 8;
const char* const kConfig =
    R"({"train_micro_batch_size_per_gpu": 2, "optimizer": {"type": "SGD", "params": {"lr": 0.1}}})";

// Every parameter's gradient after one forward + backward of `in`; with
// `scribble`, the caller overwrites both input buffers (other valid values)
// between the two calls.
template <class T>
std::vector<std::vector<float>> grads_after(const char* spec, std::vector<T> x, std::vector<T> y,
                                            const std::vector<int64_t>& x_shape,
                                            const std::vector<int64_t>& y_shape, DLDataType dt, bool scribble) {
    ds_model_t* m = nullptr;
    EXPECT_EQ(ds_model_create(spec, &m), DS_OK) << ds_last_error();
    ds_engine_t* e = nullptr;
    EXPECT_EQ(ds_engine_create_with_model(kConfig, m, nullptr, &e), DS_OK) << ds_last_error();
    ds_model_destroy(m);
    if (!e) return {};
    std::vector<int64_t> xs = x_shape, ys = y_shape;
    DLTensor in[2] = {{x.data(), {kDLCPU, 0}, int32_t(xs.size()), dt, xs.data(), nullptr, 0},
                      {y.data(), {kDLCPU, 0}, int32_t(ys.size()), dt, ys.data(), nullptr, 0}};
    float loss = 0.0f;
    DLTensor lo{&loss, {kDLCPU, 0}, 0, {kDLFloat, 32, 1}, nullptr, nullptr, 0};
    EXPECT_EQ(ds_forward(e, in, 2, &lo), DS_OK) << ds_last_error();
    if (scribble) {
        std::vector<T> x2 = x, y2 = y;
        for (size_t i = 0; i < x.size(); ++i) x[i] = x2[(i + 3) % x.size()];
        for (size_t i = 0; i < y.size(); ++i) y[i] = y2[(i + 5) % y.size()];
    }
    EXPECT_EQ(ds_backward(e, nullptr), DS_OK) << ds_last_error();
    auto out = api_test::full_grads(e);
    ds_engine_destroy(e);
    return out;
}

TEST(ModelForwardInputs, GptReusedIdsAndTargetsChangeNoGradient) {
    const char* spec =
        R"({"type": "gpt", "vocab_size": 16, "block_size": 8, "n_layer": 1, "n_head": 2, "n_embd": 16, "seed": 3})";
    std::vector<int32_t> ids(kB * kT), targets(kB * kT);
    for (size_t i = 0; i < ids.size(); ++i) {
        ids[i] = int32_t(i * 5 + 1) % 16;
        targets[i] = int32_t(i * 7 + 2) % 16;
    }
    const auto want = grads_after(spec, ids, targets, {kB, kT}, {kB, kT}, {kDLInt, 32, 1}, false);
    const auto got = grads_after(spec, ids, targets, {kB, kT}, {kB, kT}, {kDLInt, 32, 1}, true);
    ASSERT_FALSE(want.empty());
    ASSERT_EQ(got.size(), want.size());
    for (size_t p = 0; p < want.size(); ++p) EXPECT_EQ(got[p], want[p]) << "parameter " << p;
}

TEST(ModelForwardInputs, MlpReusedFeaturesAndTargetsChangeNoGradient) {
    const char* spec = R"({"type": "sequential", "loss": "mse", "seed": 4, "layers": [
        {"type": "linear", "in_features": 6, "out_features": 8}, {"type": "gelu"},
        {"type": "linear", "in_features": 8, "out_features": 3}]})";
    std::vector<float> x(kB * 6), y(kB * 3);
    for (size_t i = 0; i < x.size(); ++i) x[i] = 0.1f * float(i % 7) - 0.3f;
    for (size_t i = 0; i < y.size(); ++i) y[i] = 0.2f * float(i % 5) - 0.4f;
    const auto want = grads_after(spec, x, y, {kB, 6}, {kB, 3}, {kDLFloat, 32, 1}, false);
    const auto got = grads_after(spec, x, y, {kB, 6}, {kB, 3}, {kDLFloat, 32, 1}, true);
    ASSERT_FALSE(want.empty());
    ASSERT_EQ(got.size(), want.size());
    for (size_t p = 0; p < want.size(); ++p) EXPECT_EQ(got[p], want[p]) << "parameter " << p;
}

}  // namespace
