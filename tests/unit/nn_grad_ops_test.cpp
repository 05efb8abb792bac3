// Gradient checks of the pointwise layers and losses (src/nn): each layer's
// fp32 analytic backward against central finite differences, in float64, of
// the float64 reference forward (kernels/ref), at the same input point.
// For a layer f and a random upstream gradient w, the checked scalar is
// L(x) = sum(w * f(x)), so dL/dx = backward(w).
//
// Tolerance: |analytic - numeric| <= 1e-5*max|numeric| + 2e-3*|numeric|;
// fp32 rounding stays ~100x inside it, and real bugs are far outside. A
// mutation tried: dropping the "- mean(g)" term of LayerNorm's backward
// (nn_ops_body.h, ln_bwd_rows) fails LayerNormGradients (both modes) and the
// kernel test NnOpsKernels.LayerNormMatchesReference: worst error/bound
// 1800-18000 here and 300-1800 there (measured).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "catch_error.h"
#include "core/error.h"
#include "nn/cross_entropy.h"
#include "nn/dropout.h"
#include "nn/gelu.h"
#include "nn/layernorm.h"
#include "nn_ops.h"
#include "test_kernels_common.h"

namespace {

using ds::Tensor;
using ds::nn::RunContext;

Tensor from_vec(const std::vector<float>& v, const ds::Shape& shape) {
    if (static_cast<int64_t>(v.size()) != ds::checked_numel(shape, "from_vec")) ADD_FAILURE() << "from_vec size";
    Tensor t = Tensor::empty(shape, ds::DType::F32, ds::Device::cpu(), ds::Allocator::process(),
                             ds::MemCategory::Buffers);
    std::copy(v.begin(), v.begin() + std::min<int64_t>(t.numel(), v.size()), t.data<float>());
    return t;
}

// What the engine does: a zeroed fp32 gradient buffer per parameter.
void bind_grads(ds::nn::Module& m) {
    for (ds::nn::Param* p : ds::nn::all_params(m))
        p->grad = Tensor::zeros(p->shape, ds::DType::F32, ds::Device::cpu(), ds::Allocator::process(),
                                ds::MemCategory::Grads);
}

std::vector<float> to_vec(const Tensor& t) {
    const float* p = t.data<float>();
    return std::vector<float>(p, p + t.numel());
}

// d/dv[i] of f(v) by central differences in double.
std::vector<double> numeric_grad(std::vector<double> v, const std::function<double(const std::vector<double>&)>& f) {
    std::vector<double> g(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
        const double h = 1e-6 * std::max(1.0, std::fabs(v[i])), x0 = v[i];
        v[i] = x0 + h;
        const double fp = f(v);
        v[i] = x0 - h;
        const double fm = f(v);
        v[i] = x0;
        g[i] = (fp - fm) / (2 * h);
    }
    return g;
}

void expect_grad_close(const std::vector<float>& analytic, const std::vector<double>& numeric, const char* what) {
    ASSERT_EQ(analytic.size(), numeric.size()) << what;
    double scale = 0.0;
    for (double v : numeric) scale = std::max(scale, std::fabs(v));
    size_t bad = 0;
    double worst = 0.0;
    for (size_t i = 0; i < numeric.size(); ++i) {
        const double err = std::fabs(analytic[i] - numeric[i]);
        const double bound = 1e-5 * scale + 2e-3 * std::fabs(numeric[i]);
        if (!(err <= bound)) ++bad;
        worst = std::max(worst, err / bound);
    }
    EXPECT_EQ(bad, 0u) << what << ": worst error/bound = " << worst << " (scale " << scale << ")";
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
    double s = 0.0;
    for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
    return s;
}

std::vector<double> to_d(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

}  // namespace

TEST(NnGradOps, LayerNormGradients) {
    const int64_t rows = 3, dim = 13;
    for (bool affine : {true, false}) {
        for (bool from_output : {false, true}) {
            SCOPED_TRACE(std::string(affine ? "affine" : "plain") + (from_output ? " from output" : " from input"));
            dskt::Rng rng(17 + affine + 2 * from_output);
            ds::nn::LayerNorm ln(dim, 1e-5f, affine);
            ln.set_backward_from_output(from_output);
            bind_grads(ln);
            auto gamma = rng.uniform_vec(dim, 0.5f, 1.5f), beta = rng.uniform_vec(dim, -0.5f, 0.5f);
            for (int j = 0; j < dim; j += 3) gamma[j] = -gamma[j];  // negative weights too
            if (affine) {
                std::copy(gamma.begin(), gamma.end(), ln.weight().value.data<float>());
                std::copy(beta.begin(), beta.end(), ln.bias().value.data<float>());
            }
            auto x = rng.uniform_vec(rows * dim, -2.0f, 3.0f), w = rng.uniform_vec(rows * dim, -1.0f, 1.0f);
            RunContext ctx;
            Tensor y = ln.forward(from_vec(x, {rows, dim}), ctx);
            Tensor dx = ln.backward(from_vec(w, {rows, dim}), ctx);

            const auto wd = to_d(w);
            auto xd = to_d(x), gd = to_d(gamma), bd = to_d(beta);
            auto loss = [&](const std::vector<double>& xv, const std::vector<double>& gv, const std::vector<double>& bv) {
                std::vector<double> yv(xv.size());
                dsk_ref_layernorm_fwd(xv.data(), affine ? gv.data() : nullptr, affine ? bv.data() : nullptr, yv.data(),
                                      nullptr, nullptr, rows, dim, 1e-5);
                return dot(yv, wd);
            };
            expect_grad_close(to_vec(dx), numeric_grad(xd, [&](const auto& v) { return loss(v, gd, bd); }), "dx");
            if (affine) {
                expect_grad_close(to_vec(ln.weight().grad),
                                  numeric_grad(gd, [&](const auto& v) { return loss(xd, v, bd); }), "dweight");
                expect_grad_close(to_vec(ln.bias().grad), numeric_grad(bd, [&](const auto& v) { return loss(xd, gd, v); }),
                                  "dbias");
            }
            EXPECT_EQ(ln.op_count().flops, rows * dim * (affine ? 5.0 : 4.0));
        }
    }
}

TEST(NnGradOps, LayerNormKeepsLessWhenInvertibleAndRefusesMisuse) {
    const int64_t rows = 8, dim = 16;
    std::vector<float> x(rows * dim, 0.0f);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7);
    int64_t kept[2];
    for (int mode = 0; mode < 2; ++mode) {
        ds::nn::LayerNorm ln(dim);
        ln.set_backward_from_output(mode == 1);
        bind_grads(ln);
        ds::nn::ActivationMeter meter;
        RunContext ctx;
        ctx.meter = &meter;
        Tensor y = ln.forward(from_vec(x, {rows, dim}), ctx);
        kept[mode] = meter.live_bytes;
        ln.backward(y, ctx);
        EXPECT_EQ(meter.live_bytes, 0);
    }
    EXPECT_EQ(kept[0], (rows * dim + 2 * rows) * 4);  // input + mean + rstd
    EXPECT_EQ(kept[1], 2 * rows * 4);                 // mean + rstd only

    ds::nn::LayerNorm ln(dim);
    ln.set_name("h.0.ln_1");
    RunContext ctx;
    auto e = catch_error([&] { ln.forward(from_vec(x, {rows * 2, dim / 2}), ctx); });
    EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("'h.0.ln_1' input: shape [16, 8], last dimension must be 16"),
              std::string::npos)
        << e.what();
    e = catch_error([&] { ln.backward(from_vec(x, {rows, dim}), ctx); });
    EXPECT_NE(std::string(e.what()).find("no training-mode forward"), std::string::npos) << e.what();
    EXPECT_EQ(catch_error([] { ds::nn::LayerNorm bad(0); }).status(), DS_ERR_INVALID_ARGUMENT);
    // No gradient buffers bound.
    ds::nn::LayerNorm unbound(dim);
    unbound.set_name("ln_f");
    unbound.forward(from_vec(x, {rows, dim}), ctx);
    e = catch_error([&] { unbound.backward(from_vec(x, {rows, dim}), ctx); });
    EXPECT_EQ(e.status(), DS_ERR_INVALID_STATE);
    EXPECT_NE(std::string(e.what()).find("'ln_f' backward: weight has no gradient buffer bound"), std::string::npos)
        << e.what();
    // normalize_invertible with a zero weight cannot recover the input.
    ds::nn::LayerNorm inv(dim);
    inv.set_backward_from_output(true);
    bind_grads(inv);
    inv.weight().value.data<float>()[5] = 0.0f;
    Tensor y = inv.forward(from_vec(x, {rows, dim}), ctx);
    e = catch_error([&] { inv.backward(y, ctx); });
    EXPECT_NE(std::string(e.what()).find("gamma[5] = 0"), std::string::npos) << e.what();
}

TEST(NnGradOps, GeluGradients) {
    const int64_t n = 61;
    dskt::Rng rng(3);
    auto x = rng.uniform_vec(n, -6.0f, 6.0f), w = rng.uniform_vec(n, -1.0f, 1.0f);
    const auto wd = to_d(w);
    auto loss = [&](const std::vector<double>& v) {
        std::vector<double> y(v.size());
        dsk_ref_gelu_fwd(v.data(), y.data(), v.size());
        return dot(y, wd);
    };
    const auto num = numeric_grad(to_d(x), loss);
    ds::nn::Gelu gelu;
    RunContext ctx;
    Tensor xt = from_vec(x, {n});
    gelu.forward(xt, ctx);
    expect_grad_close(to_vec(gelu.backward(from_vec(w, {n}), ctx)), num, "dx");
    EXPECT_EQ(gelu.op_count().flops, static_cast<double>(n));

    // gelu_checkpoint: nothing kept, the caller hands the input back.
    ds::nn::Gelu ckpt(/*keep_input=*/false);
    ds::nn::ActivationMeter meter;
    ctx.meter = &meter;
    Tensor y1 = ckpt.forward(xt, ctx);
    EXPECT_EQ(meter.live_bytes, 0);
    EXPECT_EQ(to_vec(ds::nn::Gelu::apply(xt, ctx)), to_vec(y1));  // recomputation gives the same bits
    expect_grad_close(to_vec(ds::nn::Gelu::backward_from_input(xt, from_vec(w, {n}), ctx)), num, "dx from input");
    auto e = catch_error([&] { ckpt.backward(from_vec(w, {n}), ctx); });
    EXPECT_NE(std::string(e.what()).find("backward_from_input"), std::string::npos) << e.what();
}

TEST(NnGradOps, DropoutGradientIsTheMaskScaledDy) {
    const int64_t n = 4099;  // not a multiple of the Philox block
    const float p = 0.1f;
    ds::nn::Dropout drop(p);
    drop.set_id(7);
    RunContext ctx;
    ctx.seed = 2024;
    ctx.forward_index = 5;
    dskt::Rng rng(9);
    auto x = rng.uniform_vec(n, 0.5f, 1.5f), w = rng.uniform_vec(n, -1.0f, 1.0f);
    Tensor y = drop.forward(from_vec(x, {n}), ctx);
    Tensor dx = drop.backward(from_vec(w, {n}), ctx);
    // The mask from the reference generator, with the key the layer derives.
    const dsk_dropout_key key{2024, 5, 7, 0, 0};
    std::vector<double> ones(n, 1.0), m(n);
    dsk_ref_dropout_fwd(ones.data(), m.data(), n, p, &key);
    size_t dropped = 0;
    std::vector<double> want(n);
    for (int64_t i = 0; i < n; ++i) {
        want[i] = w[i] * m[i];
        dropped += m[i] == 0.0;
    }
    EXPECT_GT(dropped, 0u);
    expect_grad_close(to_vec(dx), want, "dx");
    // The same forward again (recomputation) draws the same mask.
    EXPECT_EQ(to_vec(drop.forward(from_vec(x, {n}), ctx)), to_vec(y));
    ctx.forward_index = 6;
    EXPECT_NE(to_vec(drop.forward(from_vec(x, {n}), ctx)), to_vec(y));
    // Eval: the identity, and backward passes dy through.
    ctx.training = false;
    Tensor xe = from_vec(x, {n});
    EXPECT_EQ(to_vec(drop.forward(xe, ctx)), x);
    EXPECT_EQ(to_vec(drop.backward(from_vec(w, {n}), ctx)), w);
    // In-place apply on a buffer equals forward with the same key.
    ctx.training = true;
    ctx.forward_index = 5;
    Tensor buf = from_vec(x, {n});
    ds::nn::Dropout::apply_inplace(buf, p, ds::nn::Dropout::key(ctx, 7), ctx);
    EXPECT_EQ(to_vec(buf), to_vec(y));
    EXPECT_EQ(catch_error([] { ds::nn::Dropout bad(1.5f); }).status(), DS_ERR_INVALID_ARGUMENT);
}

TEST(NnGradOps, CrossEntropyGradientsWithIgnoreIndex) {
    const int64_t rows = 5, V = 11;
    dskt::Rng rng(21);
    auto l = rng.uniform_vec(rows * V, -3.0f, 3.0f);
    for (int tdt = 0; tdt < 2; ++tdt) {
        SCOPED_TRACE(tdt == 0 ? "int64 targets" : "int32 targets");
        std::vector<int64_t> t64 = {3, -100, 0, 10, -100};
        Tensor targets = Tensor::empty({rows}, tdt == 0 ? ds::DType::I64 : ds::DType::I32, ds::Device::cpu(),
                                       ds::Allocator::process(), ds::MemCategory::Buffers);
        for (int64_t r = 0; r < rows; ++r) {
            if (tdt == 0) targets.data<int64_t>()[r] = t64[r];
            else targets.data<int32_t>()[r] = static_cast<int32_t>(t64[r]);
        }
        ds::nn::CrossEntropyLoss ce;
        RunContext ctx;
        const float loss = ce.forward(from_vec(l, {rows, V}), targets, ctx);
        EXPECT_EQ(ce.count(), 3);
        auto mean_loss = [&](const std::vector<double>& v) {
            return dsk_ref_softmax_xent_fwd(v.data(), t64.data(), rows, V, -100, nullptr) / 3.0;
        };
        const auto ld = to_d(l);
        EXPECT_NEAR(loss, mean_loss(ld), 1e-5 * std::fabs(mean_loss(ld)));
        const float dloss = 0.7f;
        const auto num = numeric_grad(ld, [&](const auto& v) { return dloss * mean_loss(v); });
        const auto dl = to_vec(ce.backward(dloss, ctx));
        expect_grad_close(dl, num, "dlogits");
        for (int64_t j = 0; j < V; ++j) EXPECT_EQ(dl[V + j], 0.0f);  // ignored row
        EXPECT_EQ(ce.op_count().flops, static_cast<double>(rows * V));
    }
    // A target out of range names the row and the value.
    ds::nn::CrossEntropyLoss ce;
    RunContext ctx;
    Tensor bad = Tensor::empty({rows}, ds::DType::I64, ds::Device::cpu(), ds::Allocator::process(),
                               ds::MemCategory::Buffers);
    for (int64_t r = 0; r < rows; ++r) bad.data<int64_t>()[r] = r == 2 ? 11 : 0;
    auto e = catch_error([&] { ce.forward(from_vec(l, {rows, V}), bad, ctx); });
    EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("targets[2] = 11 is outside [0, 11)"), std::string::npos) << e.what();
    // Every row ignored: NaN, as torch.
    for (int64_t r = 0; r < rows; ++r) bad.data<int64_t>()[r] = -100;
    EXPECT_TRUE(std::isnan(ce.forward(from_vec(l, {rows, V}), bad, ctx)));
    e = catch_error([&] { ce.forward(from_vec(l, {rows, V}), from_vec(l, {rows, V}), ctx); });
    EXPECT_NE(std::string(e.what()).find("expected int32 or int64"), std::string::npos) << e.what();
}

TEST(NnGradOps, MseGradients) {
    const int64_t n = 37;
    dskt::Rng rng(5);
    auto p = rng.uniform_vec(n, -2, 2), t = rng.uniform_vec(n, -2, 2);
    ds::nn::MSELoss mse;
    RunContext ctx;
    const auto pd = to_d(p), td = to_d(t);
    const float loss = mse.forward(from_vec(p, {n}), from_vec(t, {n}), ctx);
    EXPECT_NEAR(loss, dsk_ref_mse_fwd(pd.data(), td.data(), n) / n, 1e-6);
    const auto num = numeric_grad(pd, [&](const auto& v) { return 1.5 * dsk_ref_mse_fwd(v.data(), td.data(), n) / n; });
    expect_grad_close(to_vec(mse.backward(1.5f, ctx)), num, "dpred");
    const std::vector<float> shorter(p.begin(), p.end() - 1);
    auto e = catch_error([&] { mse.forward(from_vec(p, {n}), from_vec(shorter, {n - 1}), ctx); });
    EXPECT_NE(std::string(e.what()).find("MSELoss target: shape [36], expected [37]"), std::string::npos) << e.what();
}
