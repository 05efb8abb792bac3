// Every route into the gradient buffer (ds_engine_accumulate_grad, a view
// from ds_engine_grad_view, ds_engine_set_full_grad, in any order) must be
// what the overflow check and the clip see: checked against a float64 model
// of SGD(lr) with DeepSpeed's clip (DEEPSPEED_SEMANTICS.md §5.4).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "api_test_util.h"
#include "deepspeed_c.h"

namespace {

constexpr auto f32 = &api_test::f32_tensor;
using Engine = api_test::ScopedEngine;

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

namespace {

// --- fp16 with gradient accumulation: DeepSpeed's multiplier and order ----

// fp16 bits of x, which the test keeps exactly representable (normal range)
// or beyond the largest finite half (>= 65520 rounds to Inf).
uint16_t f16_bits(double x) {
    const uint16_t sign = x < 0 ? 0x8000 : 0;
    const double a = std::fabs(x);
    if (a >= 65520.0) return sign | 0x7C00;
    if (a == 0.0) return sign;
    int e = 0;
    const double f = std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1)
    const int biased = e + 14;           // a = (2f) * 2^(e-1)
    const double mant = (2.0 * f - 1.0) * 1024.0;
    EXPECT_TRUE(biased >= 1 && biased <= 30 && mant == std::floor(mant)) << x << " is not an exact normal half";
    return static_cast<uint16_t>(sign | (biased << 10) | static_cast<uint16_t>(mant));
}

// float64 model of DeepSpeed (ZeRO-0 fp16, dynamic scaler, DEEPSPEED_SEMANTICS.md §4,
// §16.2): engine.backward divides the loss by G and scales it; the fp16
// gradients add up in fp16 .grad; at the boundary an Inf/NaN anywhere skips
// the step and the scaler updates (hysteresis; growth after `window` clean
// steps since the last overflow).
struct DeepSpeedFp16Model {
    double scale;
    int64_t window, hysteresis, cur_hyst, cur_iter = 0, last_overflow = -1;
    // Returns whether the step overflowed; updates the scale.
    bool step(const std::vector<double>& micro_grads, int64_t G) {
        double buf = 0.0;
        bool inf = false;
        for (double g : micro_grads) {
            const double h = g / static_cast<double>(G) * scale;  // (loss / G) * scale, its gradient
            if (std::fabs(h) >= 65520.0) inf = true;                // the fp16 backward overflows
            buf += h;
            if (std::fabs(buf) >= 65520.0) inf = true;              // the fp16 .grad sum overflows
        }
        if (inf) {
            if (cur_hyst == 1) scale = std::max(scale / 2.0, 1.0);
            else --cur_hyst;
            last_overflow = cur_iter;
        } else {
            const int64_t stable = cur_iter - last_overflow - 1;
            if (stable > 0 && stable % window == 0) {
                cur_hyst = hysteresis;
                scale *= 2.0;
            }
        }
        ++cur_iter;
        return inf;
    }
};

ds_engine_t* fp16_engine(float* w, int64_t* shape) {
    ds_engine_t* e = nullptr;
    const char* cfg =
        "{\"train_micro_batch_size_per_gpu\": 1, \"gradient_accumulation_steps\": 2,"
        " \"fp16\": {\"enabled\": true, \"initial_scale_power\": 16, \"loss_scale_window\": 3,"
        "   \"hysteresis\": 2, \"min_loss_scale\": 1},"
        " \"optimizer\": {\"type\": \"SGD\", \"params\": {\"lr\": 1e-3}}}";
    EXPECT_EQ(ds_engine_create(cfg, nullptr, &e), DS_OK) << ds_last_error();
    DLTensor t = f32(w, shape, 1);
    EXPECT_EQ(ds_engine_add_param(e, "w", &t, DS_PARAM_TRAINABLE), DS_OK) << ds_last_error();
    EXPECT_EQ(ds_engine_init(e), DS_OK) << ds_last_error();
    return e;
}

}  // namespace

// G = 2, scale 2^16, gradients near the fp16 maximum: the host multiplies
// its loss by ds_engine_loss_multiplier and hands the fp16 gradients over
// predivided; skips, scales and norms follow the float64 DeepSpeed model.
TEST(Fp16Accumulation, LossMultiplierMatchesDeepSpeedSkipsAndScales) {
    const int64_t G = 2;
    // Per step, the two micro-batches' true gradients of the unscaled loss.
    const std::vector<std::vector<double>> steps = {
        {0.5, 0.5},  {1.5, 0.25}, {3.0, 0.125}, {0.5, 0.5},  {3.0, 0.5},   {1.5, 0.25}, {0.75, 0.75},
        {0.5, 0.25}, {1.5, 1.5},  {0.25, 0.25}, {0.5, 0.5},  {0.25, 0.5},  {0.5, 0.5},  {2.5, 0.125},
    };
    float w = 1.0f;
    int64_t shape = 1;
    ds_engine_t* e = fp16_engine(&w, &shape);
    DeepSpeedFp16Model ds{65536.0, 3, 2, 2};
    int skips = 0, old_contract_would_skip = 0;
    for (size_t s = 0; s < steps.size(); ++s) {
        SCOPED_TRACE("step " + std::to_string(s));
        float mult = 0, scale = 0;
        ASSERT_EQ(ds_engine_loss_multiplier(e, &mult), DS_OK) << ds_last_error();
        ASSERT_EQ(ds_engine_loss_scale(e, &scale), DS_OK);
        EXPECT_EQ(static_cast<double>(mult), ds.scale / G);
        for (double g : steps[s])
            if (std::fabs(g * scale) >= 65520.0) ++old_contract_would_skip;
        double buf = 0.0;
        ds_step_info_t info;
        std::memset(&info, 0, sizeof info);
        info.struct_size = sizeof info;
        for (double g : steps[s]) {
            uint16_t h = f16_bits(g * static_cast<double>(mult));  // the host's fp16 backward
            buf += g * static_cast<double>(mult);
            DLTensor t = f32(reinterpret_cast<float*>(&h), &shape, 1);
            t.dtype = {kDLFloat, 16, 1};
            ASSERT_EQ(ds_engine_accumulate_grad_ex(e, "w", &t, DS_GRAD_PREDIVIDED), DS_OK) << ds_last_error();
            ASSERT_EQ(ds_backward(e, nullptr), DS_OK);
            ASSERT_EQ(ds_step(e, &info), DS_OK) << ds_last_error();
        }
        const double scale_before = ds.scale;
        const bool overflow = ds.step(steps[s], G);
        skips += overflow ? 1 : 0;
        EXPECT_EQ(info.stepped, 1);
        EXPECT_EQ(info.skipped, overflow ? 1 : 0);
        EXPECT_EQ(static_cast<double>(info.loss_scale), ds.scale);
        if (!overflow) EXPECT_NEAR(info.grad_norm, std::fabs(buf) / scale_before, 1e-12);
    }
    // The sequence exercises both outcomes, and steps where the old contract
    // (loss x ds_engine_loss_scale, the engine dividing afterwards) overflows
    // in the host's backward although DeepSpeed does not.
    EXPECT_GT(skips, 1);
    EXPECT_LT(skips, static_cast<int>(steps.size()) - 3);
    EXPECT_GT(old_contract_would_skip, skips);
    ds_engine_destroy(e);
}

TEST(Fp16Accumulation, UnknownFlagBitsAreRejected) {
    float w = 1.0f, g = 0.5f;
    int64_t shape = 1;
    ds_engine_t* e = fp16_engine(&w, &shape);
    DLTensor t = f32(&g, &shape, 1);
    EXPECT_EQ(ds_engine_accumulate_grad_ex(e, "w", &t, 0x6u), DS_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ds_last_error()).find("flags"), std::string::npos) << ds_last_error();
    // Without the flag: divided by G, as ds_engine_accumulate_grad.
    ASSERT_EQ(ds_engine_accumulate_grad_ex(e, "w", &t, 0), DS_OK) << ds_last_error();
    float got = 0;
    DLTensor o = f32(&got, &shape, 1);
    ASSERT_EQ(ds_engine_get_full_grad(e, "w", &o), DS_OK) << ds_last_error();
    EXPECT_EQ(got, 0.25f);
    ds_engine_destroy(e);
}

// --- strided and misaligned gradients (bindings.md H8) -------------------

class StridedGrad : public ::testing::TestWithParam<int> {};  // ZeRO stage

// Column-major, padded-row and broadcast (stride 0) layouts are read in
// their logical row-major order; negative strides are rejected by name.
TEST_P(StridedGrad, NonNegativeStridesAreReadInLogicalOrder) {
    const std::string cfg = "{\"train_batch_size\": 1, \"zero_optimization\": {\"stage\": " +
                            std::to_string(GetParam()) +
                            "}, \"zero_allow_untested_optimizer\": true, \"gradient_clipping\": 0, \"optimizer\": {\"type\": \"SGD\", \"params\": {\"lr\": 0.1}}}";
    Engine eng(cfg);
    ASSERT_NE(eng.e, nullptr);
    int64_t shape[2] = {3, 4};
    std::vector<float> init(12, 0.0f);
    DLTensor ti = f32(init.data(), shape, 2);
    ASSERT_EQ(ds_engine_add_param(eng.e, "w", &ti, DS_PARAM_TRAINABLE), DS_OK);
    ASSERT_EQ(ds_engine_init(eng.e), DS_OK) << ds_last_error();
    auto logical = [](int i, int j) { return static_cast<float>(10 * i + j + 1); };

    std::vector<double> sum(12, 0.0);
    for (int layout = 0; layout < 3; ++layout) {
        std::vector<float> data;
        int64_t strides[2];
        if (layout == 0) {  // column-major (Julia/Fortran): strides (1, 3)
            strides[0] = 1, strides[1] = 3;
            data.resize(12);
            for (int i = 0; i < 3; ++i)
                for (int j = 0; j < 4; ++j) data[static_cast<size_t>(i + 3 * j)] = logical(i, j);
        } else if (layout == 1) {  // rows padded to 6: strides (6, 1)
            strides[0] = 6, strides[1] = 1;
            data.assign(18, NAN);  // padding never read
            for (int i = 0; i < 3; ++i)
                for (int j = 0; j < 4; ++j) data[static_cast<size_t>(6 * i + j)] = logical(i, j);
        } else {  // one row broadcast: strides (0, 1)
            strides[0] = 0, strides[1] = 1;
            data.resize(4);
            for (int j = 0; j < 4; ++j) data[static_cast<size_t>(j)] = logical(0, j);
        }
        DLTensor g = f32(data.data(), shape, 2);
        g.strides = strides;
        ASSERT_EQ(ds_engine_accumulate_grad(eng.e, "w", &g), DS_OK) << "layout " << layout << ": " << ds_last_error();
        for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 4; ++j) sum[static_cast<size_t>(4 * i + j)] += logical(layout == 2 ? 0 : i, j);
    }
    int64_t neg[2] = {-4, 1};
    std::vector<float> any(12, 1.0f);
    DLTensor bad = f32(any.data() + 8, shape, 2);
    bad.strides = neg;
    EXPECT_EQ(ds_engine_accumulate_grad(eng.e, "w", &bad), DS_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ds_last_error()).find("strides"), std::string::npos) << ds_last_error();

    ASSERT_EQ(ds_backward(eng.e, nullptr), DS_OK);
    ds_step_info_t info;
    std::memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    ASSERT_EQ(ds_step(eng.e, &info), DS_OK) << ds_last_error();
    double sq = 0;
    for (double x : sum) sq += x * x;
    EXPECT_NEAR(info.grad_norm, std::sqrt(sq), 1e-9 * std::sqrt(sq));
    std::vector<float> w(12);
    DLTensor tw = f32(w.data(), shape, 2);
    ASSERT_EQ(ds_engine_get_full_fp32_param(eng.e, "w", &tw), DS_OK) << ds_last_error();
    for (size_t k = 0; k < 12; ++k) EXPECT_NEAR(w[k], -0.1 * sum[k], 1e-5) << "element " << k;
}

INSTANTIATE_TEST_SUITE_P(Stages, StridedGrad, ::testing::Values(0, 1, 2));

// A gradient whose data + byte_offset is not aligned to its element size
// (fp32 at +1 byte, fp16 at +1 byte) is read bytewise: no misaligned typed
// load (UBSan in the sanitizer build), same values as an aligned copy.
TEST(MisalignedGrad, Fp32AndFp16AtOddAddressesAreReadSafely) {
    for (int bits : {32, 16}) {
        SCOPED_TRACE("bits " + std::to_string(bits));
        const std::string prec = bits == 16 ? ", \"bf16\": {\"enabled\": true}" : "";
        Engine eng("{\"train_batch_size\": 1, \"optimizer\": {\"type\": \"SGD\", \"params\": {\"lr\": 1.0}}" + prec +
                   "}");
        ASSERT_NE(eng.e, nullptr);
        const int64_t n = 37;
        int64_t shape = n;
        std::vector<float> init(n, 0.0f);
        DLTensor ti = f32(init.data(), &shape, 1);
        ASSERT_EQ(ds_engine_add_param(eng.e, "w", &ti, DS_PARAM_TRAINABLE), DS_OK);
        ASSERT_EQ(ds_engine_init(eng.e), DS_OK) << ds_last_error();
        const size_t es = bits / 8;
        std::vector<unsigned char> raw(n * es + 8);
        std::vector<double> want(n);
        for (int64_t i = 0; i < n; ++i) {
            want[static_cast<size_t>(i)] = 0.25 * static_cast<double>(i - 18);  // exact in fp32 and bf16
            if (bits == 32) {
                const float v = static_cast<float>(want[static_cast<size_t>(i)]);
                std::memcpy(raw.data() + 1 + static_cast<size_t>(i) * es, &v, es);
            } else {  // bf16: the top half of the fp32 bits
                const float v = static_cast<float>(want[static_cast<size_t>(i)]);
                uint32_t u;
                std::memcpy(&u, &v, 4);
                const uint16_t h = static_cast<uint16_t>(u >> 16);
                std::memcpy(raw.data() + 1 + static_cast<size_t>(i) * es, &h, es);
            }
        }
        DLTensor g = f32(nullptr, &shape, 1);
        g.data = raw.data();
        g.byte_offset = 1;
        g.dtype = {static_cast<uint8_t>(bits == 16 ? kDLBfloat : kDLFloat), static_cast<uint8_t>(bits), 1};
        ASSERT_EQ(ds_engine_accumulate_grad(eng.e, "w", &g), DS_OK) << ds_last_error();
        std::vector<float> got(n);
        DLTensor o = f32(got.data(), &shape, 1);
        ASSERT_EQ(ds_engine_get_full_grad(eng.e, "w", &o), DS_OK) << ds_last_error();
        for (int64_t i = 0; i < n; ++i) EXPECT_EQ(got[static_cast<size_t>(i)], want[static_cast<size_t>(i)]) << i;
    }
}
