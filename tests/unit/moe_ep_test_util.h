// Shared by the expert-parallel tests (tests/unit/nn_moe_ep_test.cpp in a
// world of one, tests/mpi/test_moe_ep.cpp on 2-4 ranks): the same initialised
// MoeLayer (12 experts, so 2, 3 and 4 ranks all divide them) built as often
// as a test needs, each rank's input and output gradient a function of its
// rank, and one training forward + backward. Tensor helpers (randn,
// assign_ids, bind_zero_grads, expect_within) are tp_test_util.h's.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>

#include "nn/moe_ep.h"
#include "nn/moe_layer.h"
#include "tp_test_util.h"

namespace moe_ep_test {

using namespace ds;
using namespace ds::nn;

constexpr int64_t kB = 2, kT = 8, kC = 8, kInner = 16, kE = 12;
constexpr float kAuxGrad = 0.3f;  // d loss / d l_aux, so the aux loss reaches the gate's gradient

// Top-k gating with capacity_factor 1.5 and min_capacity 1: 16 tokens over
// 12 experts give capacities 2 (k = 1) and 4 (k = 2), so tokens are dropped.
inline MoeConfig config(int k, bool use_residual, bool drop_tokens) {
    MoeConfig c;
    c.num_experts = kE;
    c.k = k;
    c.capacity_factor = 1.5;
    c.eval_capacity_factor = 1.5;
    c.min_capacity = 1;
    c.drop_tokens = drop_tokens;
    c.use_residual = use_residual;
    c.noisy_gate_policy = MoeConfig::Noise::None;
    return c;
}

// init_params, then normal(0, 0.1) noise on every parameter so the experts
// differ (init makes them copies of expert 0: a token sent to the wrong
// expert would go unnoticed). Names under "h.0.mlp.", ids depth first.
// Gradients are not bound (shard first).
inline std::unique_ptr<MoeLayer> build(const MoeConfig& cfg) {
    auto layer = std::make_unique<MoeLayer>(cfg, kC, kInner, /*pdrop=*/0.0f, /*bias=*/true);
    layer->set_names("h.0.mlp.");
    layer->init_params(31, 0.5, 0.3);
    std::mt19937 rng(32);
    std::normal_distribution<float> nd(0.0f, 0.1f);
    for (Param* p : all_params(*layer))
        for (int64_t i = 0; i < p->value.numel(); ++i) p->value.data<float>()[i] += nd(rng);
    tp_test::assign_ids(*layer);
    return layer;
}

// Rank `rank`'s [kB, t, kC] input and output gradient (t = kT unless a test
// gives ranks different token counts).
inline Tensor input_of(int rank, int64_t t = kT) {
    return tp_test::randn({kB, t, kC}, 100 + static_cast<unsigned>(rank));
}
inline Tensor dy_of(int rank, int64_t t = kT) { return tp_test::randn({kB, t, kC}, 200 + static_cast<unsigned>(rank)); }

inline RunContext train_ctx() {
    RunContext ctx;
    ctx.training = true;
    ctx.seed = 1234;
    ctx.forward_index = 3;
    return ctx;
}

struct MoeRun {
    Tensor y, dx;
    float l_aux = 0.0f;
};

// One training forward on rank `rank`'s input ([kB, t, kC]), backward with its output
// gradient and kAuxGrad; parameter gradients accumulate.
inline MoeRun run(MoeLayer& layer, int rank, int64_t t = kT) {
    RunContext ctx = train_ctx();
    MoeRun r;
    r.y = layer.forward(input_of(rank, t), ctx);
    r.l_aux = layer.l_aux();
    layer.set_aux_grad(kAuxGrad);
    r.dx = layer.backward(dy_of(rank, t), ctx);
    return r;
}

}  // namespace moe_ep_test
