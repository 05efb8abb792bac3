// Expert parallelism (nn/moe_ep.h) under mpirun (2, 3 and 4 ranks, all of
// them one expert group; 12 experts): every rank builds the same initialised
// MoeLayer, shards one copy over the world and runs it on ITS OWN input and
// output gradient (functions of the rank). References are unsharded copies
// of the layer on this process:
//   `own` on this rank's input: output, input gradient, l_aux, capacity and
//        counts, and the replicated (gate, residual MLP, coefficient)
//        gradients must equal the sharded layer's within 1e-5;
//   `all` on every rank's input in turn (gradients accumulate): a local
//        expert's gradient must equal the sum over ranks of the unsplit
//        expert's, within 1e-5.
// Top-1 and top-2 (noisy_gate_policy None, plus one top-1 run each with
// Jitter and RSample), capacity small enough that tokens are dropped, with and
// without use_residual, one run keeping every token (drop_tokens false), and
// ranks with different token counts (so different capacities: the exchange
// is sized by the group's largest kept count, not one shared capacity).
// Plus an eval forward, and the refusals that need a group of several ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "../unit/catch_error.h"
#include "../unit/moe_ep_test_util.h"
#include "comm/factory.h"
#include "mpi_gtest_main.h"

using namespace ds;
using namespace ds::nn;
using namespace moe_ep_test;

namespace {

std::shared_ptr<comm::Communicator> world() {
    comm::Options o;
    o.timeout_ms = 120000;
    return comm::make_mpi(MPI_Comm_c2f(MPI_COMM_WORLD), o);
}

std::map<std::string, Param*> by_name(Module& m) {
    std::map<std::string, Param*> out;
    for (Param* p : all_params(m)) out[p->name] = p;
    return out;
}

void expect_scalar_within(float got, float want, const std::string& what) {
    EXPECT_LE(std::fabs(got - want), 1e-5 * std::fabs(want) + 1e-7) << what << ": got " << got << ", want " << want;
}

struct Case {
    int k;
    bool use_residual, drop_tokens;
    bool ragged = false;  // rank r has kT - 2 (r % 3) tokens per sequence (capacities differ by rank)
    MoeConfig::Noise noise = MoeConfig::Noise::None;
};

int64_t tokens_of(const Case& k, int rank) { return k.ragged ? kT - 2 * (rank % 3) : kT; }

}  // namespace

TEST(ExpertParallelRanks, ShardedLayerEqualsUnsplitLayer) {
    auto c = world();
    const int rank = c->rank(), size = c->size();
    const int64_t local = kE / size;
    const Case cases[] = {{1, false, true}, {1, true, true}, {2, false, true}, {2, true, true}, {2, false, false},
                          {1, true, true, true},   {2, false, true, true},
                          {1, false, true, false, MoeConfig::Noise::Jitter},
                          {1, true, true, false, MoeConfig::Noise::RSample}};
    bool dropped = false;
    int experts_compared = 0;  // expert parameters with a non-zero reference gradient
    size_t cases_run = 0;
    for (const Case& k : cases) {
        ++cases_run;
        const std::string what = "top-" + std::to_string(k.k) + (k.use_residual ? ", residual" : "") +
                                 (k.drop_tokens ? "" : ", no drop") + (k.ragged ? ", ragged" : "") +
                                 (k.noise == MoeConfig::Noise::Jitter    ? ", Jitter"
                                  : k.noise == MoeConfig::Noise::RSample ? ", RSample"
                                                                         : "") + ", rank " + std::to_string(rank) + " of " +
                                 std::to_string(size);
        MoeConfig cfg = config(k.k, k.use_residual, k.drop_tokens);
        cfg.noisy_gate_policy = k.noise;  // gate-side noise: each rank draws what the unsplit layer draws
        auto ep = build(cfg), own = build(cfg), all = build(cfg);
        shard_moe_layer(*ep, c.get(), rank, size);
        for (MoeLayer* l : {ep.get(), own.get(), all.get()}) tp_test::bind_zero_grads(*l);
        ASSERT_EQ(ep->num_local_experts(), static_cast<size_t>(local)) << what;
        ASSERT_EQ(ep->first_expert(), rank * local) << what;

        const MoeRun got = run(*ep, rank, tokens_of(k, rank));
        const MoeRun want = run(*own, rank, tokens_of(k, rank));
        for (int r = 0; r < size; ++r) run(*all, r, tokens_of(k, r));
        tp_test::expect_within(got.y, want.y, 1e-5, what + ": output");
        tp_test::expect_within(got.dx, want.dx, 1e-5, what + ": input gradient");
        expect_scalar_within(got.l_aux, want.l_aux, what + ": l_aux");
        EXPECT_EQ(ep->capacity(), own->capacity()) << what;
        EXPECT_EQ(ep->exp_counts(), own->exp_counts()) << what;
        for (size_t e = 0; e < own->exp_counts().size(); ++e)
            dropped = dropped || own->exp_counts()[e] > own->capacity();

        // Local expert j's gradient: the sum over ranks of the unsplit expert's.
        const MoeParamSplit split = moe_expert_params(*ep);
        EXPECT_EQ(split.expert.size(), static_cast<size_t>(local * 4)) << what << ": c_fc, c_proj weights and biases";
        auto all_params_by_name = by_name(*all), own_params_by_name = by_name(*own);
        for (Param* p : split.expert) {
            Param* ref = all_params_by_name.count(p->name) ? all_params_by_name[p->name] : nullptr;
            ASSERT_NE(ref, nullptr) << what << ": " << p->name << " is not a parameter of the unsplit layer";
            const float* rv = ref->grad.data<float>();
            if (std::all_of(rv, rv + ref->grad.numel(), [](float v) { return v == 0.0f; })) {
                // No rank routed a token to this expert: its gradient stays exactly zero.
                const float* gv = p->grad.data<float>();
                EXPECT_TRUE(std::all_of(gv, gv + p->grad.numel(), [](float v) { return v == 0.0f; }))
                    << what << ": " << p->name << " has a gradient, but no rank sent its expert a token";
                continue;
            }
            ++experts_compared;
            tp_test::expect_within(p->grad, ref->grad, 1e-5, what + ": " + p->name + " (summed over ranks)");
        }
        const std::string first_name = "h.0.mlp.deepspeed_moe.experts.deepspeed_experts." +
                                       std::to_string(rank * local) + ".c_fc.weight";
        EXPECT_EQ(ep->expert(0).c_fc().weight().name, first_name) << what << ": global index kept in the name";
        // Replicated: this rank's own gradient, whole.
        EXPECT_EQ(split.replicated.size(), k.use_residual ? 7u : 1u) << what << ": gate (+ mlp 4, coefficient 2)";
        for (Param* p : split.replicated) {
            Param* ref = own_params_by_name.count(p->name) ? own_params_by_name[p->name] : nullptr;
            ASSERT_NE(ref, nullptr) << what << ": " << p->name << " is not a parameter of the unsplit layer";
            tp_test::expect_within(p->grad, ref->grad, 1e-5, what + ": " + p->name + " (replicated)");
        }

        // Eval forward (eval capacity, nothing saved): the same output.
        RunContext ectx = train_ctx();
        ectx.training = false;
        const Tensor ey = ep->forward(input_of(rank, tokens_of(k, rank)), ectx),
                     ew = own->forward(input_of(rank, tokens_of(k, rank)), ectx);
        tp_test::expect_within(ey, ew, 1e-5, what + ": eval output");
    }
    EXPECT_TRUE(dropped) << "no configuration dropped a token on rank " << rank;
    EXPECT_GE(experts_compared, 4 * static_cast<int>(cases_run)) << "rank " << rank
                                                                 << ": its experts saw too few tokens to prove much";
}

TEST(ExpertParallelRanks, Refusals) {
    auto c = world();
    const int rank = c->rank(), size = c->size();
    {  // num_experts not a multiple of the group size
        MoeConfig cfg = config(1, false, true);
        cfg.num_experts = 2 * size + 1;
        MoeLayer layer(cfg, kC, kInner, 0.0f, true);
        const Error e = catch_error([&] { shard_moe_layer(layer, c.get(), rank, size); });
        EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT) << e.what();
        EXPECT_NE(std::string(e.what()).find("num_experts = " + std::to_string(2 * size + 1)), std::string::npos)
            << e.what();
        EXPECT_EQ(layer.num_local_experts(), static_cast<size_t>(2 * size + 1)) << "the refused layer changed";
    }
    {  // a rank that is not the communicator's
        auto layer = build(config(1, false, true));
        const Error e = catch_error([&] { shard_moe_layer(*layer, c.get(), (rank + 1) % size, size); });
        EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT) << e.what();
        EXPECT_NE(std::string(e.what()).find("do not match the communicator"), std::string::npos) << e.what();
        EXPECT_EQ(layer->num_local_experts(), static_cast<size_t>(kE));
    }
    {  // sharded twice
        auto layer = build(config(2, true, true));
        shard_moe_layer(*layer, c.get(), rank, size);
        const Error e = catch_error([&] { shard_moe_layer(*layer, c.get(), rank, size); });
        EXPECT_EQ(e.status(), DS_ERR_INVALID_STATE) << e.what();
        EXPECT_NE(std::string(e.what()).find("already sharded"), std::string::npos) << e.what();
    }
    {  // a device exchange (moe_ep_device.cpp): for a sharded layer, over the group's ranks
        auto layer = build(config(1, false, true));
        Error e = catch_error([&] { layer->use_device_exchange(c.get()); });
        EXPECT_EQ(e.status(), DS_ERR_INVALID_STATE) << e.what();
        EXPECT_NE(std::string(e.what()).find("not split over an expert group"), std::string::npos) << e.what();
        shard_moe_layer(*layer, c.get(), rank, size);
        auto one = comm::make_local(comm::Options{});  // rank 0 of 1: not the group's ranks
        e = catch_error([&] { layer->use_device_exchange(one.get()); });
        EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT) << e.what();
        EXPECT_NE(std::string(e.what()).find("is not the expert group's ranks (rank " + std::to_string(rank) + " of " +
                                             std::to_string(size) + ")"),
                  std::string::npos)
            << e.what();
        EXPECT_EQ(layer->ep_group().device, nullptr);
        layer->use_device_exchange(c.get());
        EXPECT_EQ(layer->ep_group().device, c.get());
    }
}
