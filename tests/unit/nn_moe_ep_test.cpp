// Expert parallelism (nn/moe_ep.h) in a world of one: sharding over a group
// of one (no communicator, or a one-rank communicator) changes nothing (the
// layer runs bit for bit as its unsharded twin and keeps every expert),
// moe_expert_params splits experts from the rest, and every refusal of
// shard_moe_layer / make_ep_group that needs no second rank. The sharded
// runs on 2-4 ranks are tests/mpi/test_moe_ep.cpp.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "catch_error.h"
#include "comm/factory.h"
#include "moe_ep_test_util.h"
#include "nn/ep_group.h"

using namespace ds;
using namespace ds::nn;
using namespace moe_ep_test;

namespace {

void expect_bitwise_equal(const Tensor& a, const Tensor& b, const std::string& what) {
    ASSERT_EQ(a.shape(), b.shape()) << what;
    EXPECT_EQ(std::memcmp(a.data<float>(), b.data<float>(), sizeof(float) * a.numel()), 0) << what;
}

}  // namespace

TEST(MoeExpertParallel, GroupOfOneChangesNothing) {
    auto local = comm::make_local(comm::Options{});
    for (int k : {1, 2}) {
        const MoeConfig cfg = config(k, /*use_residual=*/true, /*drop_tokens=*/true);
        auto plain = build(cfg), no_comm = build(cfg), one = build(cfg);
        shard_moe_layer(*no_comm, nullptr, 0, 1);
        shard_moe_layer(*one, local.get(), 0, 1);
        for (MoeLayer* l : {plain.get(), no_comm.get(), one.get()}) {
            tp_test::bind_zero_grads(*l);
            EXPECT_EQ(l->num_local_experts(), static_cast<size_t>(kE));
            EXPECT_EQ(l->first_expert(), 0);
            EXPECT_EQ(l->ep_group().size, 1);
        }
        const MoeRun want = run(*plain, 0);
        for (MoeLayer* l : {no_comm.get(), one.get()}) {
            const std::string what = "top-" + std::to_string(k) + (l == one.get() ? ", local comm" : ", no comm");
            const MoeRun got = run(*l, 0);
            expect_bitwise_equal(got.y, want.y, what + ": output");
            expect_bitwise_equal(got.dx, want.dx, what + ": input gradient");
            EXPECT_EQ(got.l_aux, want.l_aux) << what;
            const auto ps = all_params(*l), pw = all_params(*plain);
            ASSERT_EQ(ps.size(), pw.size()) << what;
            for (size_t i = 0; i < ps.size(); ++i) {
                EXPECT_EQ(ps[i]->name, pw[i]->name) << what;
                expect_bitwise_equal(ps[i]->grad, pw[i]->grad, what + ": " + ps[i]->name);
            }
        }
    }
}

TEST(MoeExpertParallel, ExpertParamsAreTheExpertsOnly) {
    auto layer = build(config(2, /*use_residual=*/true, true));
    const MoeParamSplit split = moe_expert_params(*layer);
    EXPECT_EQ(split.expert.size(), static_cast<size_t>(kE * 4));
    for (Param* p : split.expert)
        EXPECT_NE(p->name.find(".deepspeed_moe.experts.deepspeed_experts."), std::string::npos) << p->name;
    // gate.wg.weight, the residual mlp's 4, coefficient's weight and bias, in all_params order.
    ASSERT_EQ(split.replicated.size(), 7u);
    EXPECT_EQ(split.replicated[0]->name, "h.0.mlp.deepspeed_moe.gate.wg.weight");
    EXPECT_EQ(split.replicated[6]->name, "h.0.mlp.coefficient.bias");
    EXPECT_EQ(split.expert.size() + split.replicated.size(), all_params(*layer).size());
    // A module without an MoE layer: nothing is an expert parameter.
    Linear lin(4, 3, true);
    const MoeParamSplit none = moe_expert_params(lin);
    EXPECT_TRUE(none.expert.empty());
    EXPECT_EQ(none.replicated.size(), 2u);
}

TEST(MoeExpertParallel, Refusals) {
    auto local = comm::make_local(comm::Options{});
    struct Bad {
        comm::Communicator* c;
        int rank, size;
        const char* says;
    };
    const Bad bad[] = {
        {nullptr, 0, 0, "size = 0 must be >= 1"},
        {nullptr, 0, 5, "num_experts = 12 is not a multiple of the expert-parallel size 5"},
        {nullptr, 0, 2, "no communicator for a group of size = 2"},
        {nullptr, 2, 2, "rank = 2 is not in [0, size = 2)"},
        {nullptr, -1, 1, "rank = -1 is not in [0, size = 1)"},
        {local.get(), 0, 2, "do not match the communicator (rank 0 of 1)"},
    };
    for (const Bad& b : bad) {
        auto layer = build(config(1, false, true));
        const Error e = catch_error([&] { shard_moe_layer(*layer, b.c, b.rank, b.size); });
        EXPECT_EQ(e.status(), DS_ERR_INVALID_ARGUMENT) << e.what();
        EXPECT_NE(std::string(e.what()).find(b.says), std::string::npos) << e.what() << " (want: " << b.says << ")";
        EXPECT_NE(std::string(e.what()).find("'h.0.mlp'"), std::string::npos) << e.what();
        EXPECT_EQ(layer->num_local_experts(), static_cast<size_t>(kE)) << "a refused shard changed the layer";
    }
    // The config still refuses ep_size > 1: the engine, which owns the groups, shards.
    MoeConfig cfg = config(1, false, true);
    cfg.ep_size = 2;
    const Error e = catch_error([&] { validate(cfg); });
    EXPECT_EQ(e.status(), DS_ERR_UNSUPPORTED) << e.what();
}
