// MoeLayer (src/nn/moe_layer.h): output and every gradient (input, gate,
// experts, residual MLP and coefficient) against a float64 reference of the
// layer written here from its definition (float64 GEMM/GELU references and
// the float64 gating reference), gradients by central finite differences of
// L = sum(dy * y) + coef * l_aux. Plus the refusals (ep_size, bad k) and the
// aux loss wiring (MoeAuxLoss sets d l_aux).
//
// Tolerances: outputs 2e-5 abs (fp32 layer vs float64), gradients
// 1e-4 abs + 1e-3 rel (fp32 sums of <= 8 products of O(1) values).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "catch_error.h"
#include "core/tensor.h"
#include "nn/dropout.h"
#include "nn/moe_layer.h"
#include "nn_gemm.h"
#include "nn_moe.h"
#include "nn_ops.h"

namespace {

using ds::DType;
using ds::Tensor;
using ds::nn::MoeConfig;
using ds::nn::MoeLayer;
using ds::nn::Param;

using Vec = std::vector<double>;

Vec values(const Param& p) {
    Vec v(static_cast<size_t>(p.value.numel()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = p.value.data<float>()[i];
    return v;
}

Vec linear64(const Vec& x, const Vec& w, const Vec* b, int64_t rows, int64_t in, int64_t out) {
    Vec y(static_cast<size_t>(rows * out), 0.0);
    dsk_ref_gemm_f64(0, 1, rows, out, in, 1.0, x.data(), in, w.data(), in, 0.0, y.data(), out);
    if (b)
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t j = 0; j < out; ++j) y[static_cast<size_t>(r * out + j)] += (*b)[static_cast<size_t>(j)];
    return y;
}

struct MlpW {
    Vec fc_w, fc_b, pr_w, pr_b;
};

// Every parameter of the layer in float64, by role.
struct Weights {
    Vec wg;
    std::vector<MlpW> experts;
    MlpW mlp;
    Vec coef_w, coef_b;
    std::vector<Vec*> all() {
        std::vector<Vec*> out = {&wg};
        for (auto& e : experts) out.insert(out.end(), {&e.fc_w, &e.fc_b, &e.pr_w, &e.pr_b});
        if (!coef_w.empty()) out.insert(out.end(), {&mlp.fc_w, &mlp.fc_b, &mlp.pr_w, &mlp.pr_b, &coef_w, &coef_b});
        return out;
    }
};

MlpW mlp_values(ds::nn::Mlp& m) {
    return {values(m.c_fc().weight()), values(m.c_fc().bias()), values(m.c_proj().weight()),
            values(m.c_proj().bias())};
}

Vec mlp64(const MlpW& w, const Vec& x, int64_t rows, int64_t C, int64_t I) {
    Vec h = linear64(x, w.fc_w, &w.fc_b, rows, C, I), g(h.size());
    dsk_ref_gelu_fwd(h.data(), g.data(), h.size());
    return linear64(g, w.pr_w, &w.pr_b, rows, I, C);
}

// The layer's forward in float64; returns sum(dy * y) + coef * l_aux.
double loss64(const MoeConfig& cfg, const Weights& w, const Vec& x, const Vec& dy, int64_t S, int64_t C, int64_t I,
              const dsk_moe_gate_args& args, double coef, Vec* y_out = nullptr) {
    const int64_t E = cfg.num_experts;
    Vec gin = x;
    if (cfg.noisy_gate_policy == MoeConfig::Noise::Jitter)
        for (size_t i = 0; i < gin.size(); ++i)
            gin[i] *= 0.99f + 0.02f * dsk_moe_uniform(&args.key, 2 * static_cast<uint64_t>(S * E) + i);
    Vec logits = linear64(gin, w.wg, nullptr, S, C, E);
    const size_t routes = static_cast<size_t>(S * cfg.k);
    Vec probs(static_cast<size_t>(S * E)), weight(routes);
    std::vector<int32_t> ex(routes), sl(routes);
    std::vector<int64_t> counts(static_cast<size_t>(E));
    int64_t cap;
    double aux;
    dsk_ref_moe_gate_fwd(logits.data(), static_cast<size_t>(S), static_cast<size_t>(E), &args, probs.data(), ex.data(),
                         sl.data(), weight.data(), counts.data(), &cap, &aux);
    Vec y(static_cast<size_t>(S * C), 0.0);
    for (size_t r = 0; r < routes; ++r) {
        if (sl[r] < 0) continue;
        const size_t s = r / static_cast<size_t>(cfg.k);
        Vec xs(x.begin() + static_cast<long>(s * C), x.begin() + static_cast<long>((s + 1) * C));
        Vec o = mlp64(w.experts[static_cast<size_t>(ex[r])], xs, 1, C, I);
        for (int64_t c = 0; c < C; ++c) y[s * C + c] += weight[r] * o[static_cast<size_t>(c)];
    }
    if (cfg.use_residual) {
        Vec m = mlp64(w.mlp, x, S, C, I), cl = linear64(x, w.coef_w, &w.coef_b, S, C, 2);
        for (int64_t s = 0; s < S; ++s) {
            const double mx = std::max(cl[2 * s], cl[2 * s + 1]);
            const double e0 = std::exp(cl[2 * s] - mx), e1 = std::exp(cl[2 * s + 1] - mx);
            for (int64_t c = 0; c < C; ++c)
                y[s * C + c] = y[s * C + c] * e0 / (e0 + e1) + m[s * C + c] * e1 / (e0 + e1);
        }
    }
    if (y_out) *y_out = y;
    double L = coef * aux;
    for (size_t i = 0; i < y.size(); ++i) L += dy[i] * y[i];
    return L;
}

void bind_zero_grads(MoeLayer& layer) {
    for (Param* p : ds::nn::all_params(layer))
        p->grad = Tensor::zeros(p->shape, DType::F32, ds::Device::cpu(), ds::Allocator::process(),
                                ds::MemCategory::Grads);
}

void randomize(MoeLayer& layer, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-0.8f, 0.8f);
    for (Param* p : ds::nn::all_params(layer)) {
        ds::nn::init_constant(*p, 0.0f);
        for (int64_t i = 0; i < p->value.numel(); ++i) p->value.data<float>()[i] = u(rng);
    }
}

void check_layer(const MoeConfig& cfg, uint32_t seed, bool expect_drops) {
    const int64_t B = 2, T = 4, C = 4, I = 8, S = B * T;
    MoeLayer layer(cfg, C, I, 0.0f, true);
    layer.set_names("h.0.mlp.");
    layer.set_id(7);
    randomize(layer, seed);
    bind_zero_grads(layer);
    std::mt19937 rng(seed + 1);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    Vec x(static_cast<size_t>(S * C)), dy(x.size());
    for (auto& v : x) v = static_cast<float>(u(rng));
    for (auto& v : dy) v = static_cast<float>(u(rng));
    const double coef = 0.37;

    Tensor xt = Tensor::empty({B, T, C}, DType::F32, ds::Device::cpu(), ds::Allocator::process(),
                              ds::MemCategory::Buffers);
    Tensor dyt = Tensor::empty({B, T, C}, DType::F32, ds::Device::cpu(), ds::Allocator::process(),
                               ds::MemCategory::Buffers);
    for (size_t i = 0; i < x.size(); ++i) {
        xt.data<float>()[i] = static_cast<float>(x[i]);
        dyt.data<float>()[i] = static_cast<float>(dy[i]);
    }
    ds::nn::RunContext ctx;
    ctx.seed = 99;
    ctx.forward_index = 3;
    Tensor y = layer.forward(xt, ctx);
    layer.set_aux_grad(static_cast<float>(coef));
    Tensor dx = layer.backward(dyt, ctx);

    Weights w;
    w.wg = values(layer.gate().weight());
    for (int64_t j = 0; j < cfg.num_experts; ++j) w.experts.push_back(mlp_values(layer.expert(static_cast<size_t>(j))));
    std::vector<Param*> params = ds::nn::all_params(layer);
    if (cfg.use_residual) {
        // all_params order: gate, experts..., mlp (c_fc w, b, c_proj w, b), coefficient (w, b)
        const size_t m0 = 1 + 4 * static_cast<size_t>(cfg.num_experts);
        w.mlp = {values(*params[m0]), values(*params[m0 + 1]), values(*params[m0 + 2]), values(*params[m0 + 3])};
        w.coef_w = values(*params[m0 + 4]);
        w.coef_b = values(*params[m0 + 5]);
    }
    dsk_moe_gate_args a{};
    a.k = cfg.k;
    a.drop_tokens = cfg.drop_tokens;
    a.use_rts = cfg.k == 1 && cfg.use_rts;
    a.rsample = cfg.k == 1 && cfg.noisy_gate_policy == MoeConfig::Noise::RSample;
    a.second_sampling = cfg.k == 2 && cfg.top2_2nd_expert_sampling;
    a.capacity_factor = cfg.capacity_factor;
    a.min_capacity = cfg.min_capacity;
    a.key = ds::nn::Dropout::key(ctx, 7);

    Vec y64;
    loss64(cfg, w, x, dy, S, C, I, a, coef, &y64);
    for (size_t i = 0; i < y64.size(); ++i) ASSERT_NEAR(y.data<float>()[i], y64[i], 2e-5) << "y[" << i << "]";
    const auto& counts = layer.exp_counts();
    const bool dropped = *std::max_element(counts.begin(), counts.end()) > layer.capacity();
    EXPECT_EQ(dropped, expect_drops) << "capacity " << layer.capacity();

    auto fd_check = [&](const char* what, Vec& theta, const float* got) {
        const double h = 1e-6;
        int bad = 0;
        for (size_t i = 0; i < theta.size(); ++i) {
            const double keep = theta[i];
            theta[i] = keep + h;
            const double lp = loss64(cfg, w, x, dy, S, C, I, a, coef);
            theta[i] = keep - h;
            const double lm = loss64(cfg, w, x, dy, S, C, I, a, coef);
            theta[i] = keep;
            const double want = (lp - lm) / (2 * h);
            if (!(std::fabs(got[i] - want) <= 1e-4 + 1e-3 * std::fabs(want)) && bad++ < 5)
                ADD_FAILURE() << what << "[" << i << "] = " << got[i] << ", finite differences " << want;
        }
    };
    fd_check("dx", x, dx.data<float>());
    std::vector<Vec*> theta = w.all();
    ASSERT_EQ(theta.size(), params.size());
    for (size_t j = 0; j < params.size(); ++j) fd_check(params[j]->name.c_str(), *theta[j], params[j]->grad.data<float>());
}

MoeConfig cfg_of(int k, double cf, bool drop, bool rts, bool residual, MoeConfig::Noise noise) {
    MoeConfig c;
    c.num_experts = 3;
    c.k = k;
    c.capacity_factor = cf;
    c.min_capacity = 0;
    c.drop_tokens = drop;
    c.use_rts = rts;
    c.use_residual = residual;
    c.noisy_gate_policy = noise;
    c.top2_2nd_expert_sampling = false;
    return c;
}

TEST(NnMoeLayer, TopOneWithDropsMatchesFiniteDifferences) {
    check_layer(cfg_of(1, 0.7, true, true, false, MoeConfig::Noise::None), 11, true);
}

TEST(NnMoeLayer, TopOneResidualJitterRSampleMatchesFiniteDifferences) {
    check_layer(cfg_of(1, 1.0, false, false, true, MoeConfig::Noise::Jitter), 12, false);
    check_layer(cfg_of(1, 1.0, true, true, false, MoeConfig::Noise::RSample), 15, true);
}

TEST(NnMoeLayer, TopTwoWithDropsMatchesFiniteDifferences) {
    MoeConfig c = cfg_of(2, 0.5, true, false, false, MoeConfig::Noise::None);
    check_layer(c, 13, true);
    c.top2_2nd_expert_sampling = true;
    c.use_residual = true;
    check_layer(c, 14, true);
}

TEST(NnMoeLayer, RefusesBadOptionsByName) {
    MoeConfig c;
    c.num_experts = 4;
    c.ep_size = 2;
    ds::Error e = catch_error([&] { MoeLayer l(c, 4, 8, 0.0f, true); });
    EXPECT_EQ(e.status(), DS_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(e.what()).find("ep_size = 2"), std::string::npos) << e.what();
    c.ep_size = 3;
    e = catch_error([&] { MoeLayer l(c, 4, 8, 0.0f, true); });
    EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("divisible"), std::string::npos) << e.what();
    c.ep_size = 1;
    c.k = 3;
    e = catch_error([&] { MoeLayer l(c, 4, 8, 0.0f, true); });
    EXPECT_NE(std::string(e.what()).find("k = 3"), std::string::npos) << e.what();
    c.k = 1;
    c.min_capacity = 100;  // more than the tokens of a forward: top-1 refuses (DeepSpeed asserts)
    MoeLayer l(c, 4, 8, 0.0f, true);
    Tensor x = Tensor::zeros({2, 4}, DType::F32, ds::Device::cpu(), ds::Allocator::process(), ds::MemCategory::Buffers);
    ds::nn::RunContext ctx;
    e = catch_error([&] { l.forward(x, ctx); });
    EXPECT_NE(std::string(e.what()).find("min_capacity"), std::string::npos) << e.what();
    e = catch_error([&] { l.backward(x, ctx); });
    EXPECT_EQ(e.status(), DS_ERR_INVALID_STATE);
}

}  // namespace

namespace {

// Training uses capacity_factor, eval eval_capacity_factor (DeepSpeed's TopKGate).
TEST(NnMoeLayer, EvalUsesEvalCapacityFactor) {
    MoeConfig c;
    c.num_experts = 3;
    c.capacity_factor = 0.5;
    c.eval_capacity_factor = 2.0;
    c.min_capacity = 0;
    MoeLayer layer(c, 4, 8, 0.0f, true);
    randomize(layer, 21);
    Tensor x = Tensor::zeros({8, 4}, DType::F32, ds::Device::cpu(), ds::Allocator::process(), ds::MemCategory::Buffers);
    ds::nn::RunContext ctx;
    layer.forward(x, ctx);
    EXPECT_EQ(layer.capacity(), 2);  // ceil(8/3 * 0.5)
    ctx.training = false;
    layer.forward(x, ctx);
    EXPECT_EQ(layer.capacity(), 6);  // ceil(8/3 * 2)
    ds::Error e = catch_error([&] { layer.backward(x, ctx); });
    EXPECT_EQ(e.status(), DS_ERR_INVALID_STATE);  // an eval forward keeps nothing to differentiate
}

}  // namespace
