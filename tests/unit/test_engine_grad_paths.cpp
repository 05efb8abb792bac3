// Every route into the gradient buffer (ds_engine_accumulate_grad, a view
// from ds_engine_grad_view, ds_engine_set_full_grad, in any order) must be
// what the overflow check and the clip see: checked against a float64 model
// of SGD(lr) with DeepSpeed's clip (reference §5.4).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "deepspeed_c.h"

namespace {

DLTensor f32(float* data, int64_t* shape, int32_t ndim) {
    DLTensor t;
    std::memset(&t, 0, sizeof t);
    t.data = data;
    t.device = {kDLCPU, 0};
    t.ndim = ndim;
    t.dtype = {kDLFloat, 32, 1};
    t.shape = shape;
    return t;
}

struct Engine {
    ds_engine_t* e = nullptr;
    explicit Engine(const std::string& json) {
        ds_status_t s = ds_engine_create(json.c_str(), nullptr, &e);
        EXPECT_EQ(s, DS_OK) << ds_last_error();
    }
    ~Engine() { ds_engine_destroy(e); }
};

ds_step_info_t step(ds_engine_t* e) {
    ds_step_info_t info;
    std::memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    EXPECT_EQ(ds_backward(e, nullptr), DS_OK) << ds_last_error();
    EXPECT_EQ(ds_step(e, &info), DS_OK) << ds_last_error();
    return info;
}

std::vector<float> full_param(ds_engine_t* e, const char* name, int64_t n) {
    std::vector<float> out(static_cast<size_t>(n));
    int64_t shape = n;
    DLTensor t = f32(out.data(), &shape, 1);
    EXPECT_EQ(ds_engine_get_full_fp32_param(e, name, &t), DS_OK) << ds_last_error();
    return out;
}

// SGD(lr = 1) with clip 1: w -= g / max(1, (|g| + 1e-6) / clip), in float64.
std::vector<double> sgd_clip_ref(const std::vector<double>& w, const std::vector<double>& g, double* norm) {
    double s = 0;
    for (double x : g) s += x * x;
    *norm = std::sqrt(s);
    const double c = (*norm + 1e-6) / 1.0;
    const double div = c > 1.0 ? c : 1.0;
    std::vector<double> out(w.size());
    for (size_t i = 0; i < w.size(); ++i) out[i] = w[i] - g[i] / div;
    return out;
}

class StaleNorm : public ::testing::TestWithParam<int64_t> {};

// The view is taken before accumulate_grad and written after it: the step
// must see what the view wrote (an Inf skips the step; a large value is
// clipped), for a small parameter and one large enough for the parallel path.
TEST_P(StaleNorm, ViewWrittenAfterAccumulateIsSeenByOverflowAndClip) {
    const int64_t n = GetParam();
    Engine eng(
        "{\"train_batch_size\": 1, \"gradient_clipping\": 1.0, \"fp16\": {\"enabled\": false},"
        " \"optimizer\": {\"type\": \"SGD\", \"params\": {\"lr\": 1.0}}}");
    ASSERT_NE(eng.e, nullptr);
    std::vector<float> w0(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) w0[static_cast<size_t>(i)] = 0.5f + 1e-3f * static_cast<float>(i % 17);
    int64_t shape = n;
    DLTensor tw = f32(w0.data(), &shape, 1);
    ASSERT_EQ(ds_engine_add_param(eng.e, "w", &tw, DS_PARAM_TRAINABLE), DS_OK) << ds_last_error();
    ASSERT_EQ(ds_engine_init(eng.e), DS_OK) << ds_last_error();
    std::vector<float> g(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) g[static_cast<size_t>(i)] = 1e-6f * static_cast<float>(i % 7 - 3);
    DLTensor tg = f32(g.data(), &shape, 1);

    // 1. Inf written through the view after accumulate_grad: skipped.
    DLTensor view;
    ASSERT_EQ(ds_engine_grad_view(eng.e, "w", &view), DS_OK) << ds_last_error();
    ASSERT_EQ(ds_engine_accumulate_grad(eng.e, "w", &tg), DS_OK) << ds_last_error();
    float* vb = reinterpret_cast<float*>(static_cast<char*>(view.data) + view.byte_offset);
    vb[n / 2] = INFINITY;
    ds_step_info_t info = step(eng.e);
    EXPECT_EQ(info.stepped, 1);
    EXPECT_EQ(info.skipped, 1) << "an Inf written through the view must skip the step";
    std::vector<float> w = full_param(eng.e, "w", n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(w[static_cast<size_t>(i)], w0[static_cast<size_t>(i)]) << i;

    // 2. A huge value written through the view after accumulate_grad: clipped.
    ASSERT_EQ(ds_engine_grad_view(eng.e, "w", &view), DS_OK) << ds_last_error();
    ASSERT_EQ(ds_engine_accumulate_grad(eng.e, "w", &tg), DS_OK) << ds_last_error();
    vb = reinterpret_cast<float*>(static_cast<char*>(view.data) + view.byte_offset);
    vb[0] = 1000.0f;
    std::vector<double> gd(g.begin(), g.end()), wd(w.begin(), w.end());
    gd[0] = 1000.0;
    double norm = 0;
    std::vector<double> want = sgd_clip_ref(wd, gd, &norm);
    info = step(eng.e);
    EXPECT_EQ(info.skipped, 0);
    EXPECT_NEAR(info.grad_norm, norm, 1e-6 * norm);
    w = full_param(eng.e, "w", n);
    for (int64_t i = 0; i < n; ++i)
        ASSERT_NEAR(w[static_cast<size_t>(i)], want[static_cast<size_t>(i)], 1e-6) << "element " << i;

    // 3. The view stays dangerous after it was handed out: a later window
    //    that only calls accumulate_grad, then writes through the old view
    //    pointer's storage (still the engine's buffer), is still seen.
    ASSERT_EQ(ds_engine_accumulate_grad(eng.e, "w", &tg), DS_OK) << ds_last_error();
    ASSERT_EQ(ds_engine_grad_view(eng.e, "w", &view), DS_OK) << ds_last_error();
    vb = reinterpret_cast<float*>(static_cast<char*>(view.data) + view.byte_offset);
    vb[n - 1] = -INFINITY;
    info = step(eng.e);
    EXPECT_EQ(info.skipped, 1);
}

INSTANTIATE_TEST_SUITE_P(Sizes, StaleNorm, ::testing::Values(int64_t{5}, int64_t{200003}));

// set_full_grad after accumulate_grad replaces the buffer: the step sees the
// new values (Inf: skipped; large: clipped as float64 says), and
// accumulate_grad after set_full_grad adds to what set_full_grad wrote.
TEST(GradPaths, SetFullGradInEitherOrderIsWhatTheStepSees) {
    Engine eng(
        "{\"train_batch_size\": 1, \"gradient_clipping\": 1.0,"
        " \"optimizer\": {\"type\": \"SGD\", \"params\": {\"lr\": 1.0}}}");
    ASSERT_NE(eng.e, nullptr);
    const int64_t n = 3;
    int64_t shape = n;
    float w0[3] = {1.0f, 2.0f, 3.0f};
    DLTensor tw = f32(w0, &shape, 1);
    ASSERT_EQ(ds_engine_add_param(eng.e, "w", &tw, DS_PARAM_TRAINABLE), DS_OK);
    ASSERT_EQ(ds_engine_init(eng.e), DS_OK);
    float small[3] = {1e-3f, -2e-3f, 3e-3f}, inf[3] = {0.0f, INFINITY, 0.0f}, big[3] = {30.0f, -40.0f, 0.0f};
    DLTensor ts = f32(small, &shape, 1), ti = f32(inf, &shape, 1), tb = f32(big, &shape, 1);

    ASSERT_EQ(ds_engine_accumulate_grad(eng.e, "w", &ts), DS_OK);
    ASSERT_EQ(ds_engine_set_full_grad(eng.e, "w", &ti), DS_OK) << ds_last_error();
    EXPECT_EQ(step(eng.e).skipped, 1);

    ASSERT_EQ(ds_engine_accumulate_grad(eng.e, "w", &ts), DS_OK);
    ASSERT_EQ(ds_engine_set_full_grad(eng.e, "w", &tb), DS_OK) << ds_last_error();
    double norm = 0;
    std::vector<double> want = sgd_clip_ref({1, 2, 3}, {30, -40, 0}, &norm);
    ds_step_info_t info = step(eng.e);
    EXPECT_EQ(info.skipped, 0);
    EXPECT_NEAR(info.grad_norm, 50.0, 1e-9);
    std::vector<float> w = full_param(eng.e, "w", n);
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(w[i], want[i], 1e-6) << i;

    ASSERT_EQ(ds_engine_set_full_grad(eng.e, "w", &tb), DS_OK);
    ASSERT_EQ(ds_engine_accumulate_grad(eng.e, "w", &ts), DS_OK);
    std::vector<double> wd(w.begin(), w.end());
    want = sgd_clip_ref(wd, {30.0 + small[0], -40.0 + small[1], small[2]}, &norm);
    info = step(eng.e);
    EXPECT_NEAR(info.grad_norm, norm, 1e-6 * norm);
    w = full_param(eng.e, "w", n);
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(w[i], want[i], 1e-6) << i;
}

}  // namespace
