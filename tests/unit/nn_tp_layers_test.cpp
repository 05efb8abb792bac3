// Tensor-parallel layers (nn/tp_linear.h, nn/tp_transformer.h) in a world of
// one, where no communicator is needed: the sharded layer equals the unsplit
// one (hidden and attention dropout on), the parallel linears equal the
// float64 product; and every refusal: the group's arguments, heads or the
// MLP's inner size not divisible by the size, an MoE layer, sharding twice,
// init_params after sharding, parallel linears or head ranges that do not fit.
// Also which parameters tp_param_split calls split and replicated. Ranks 2-4: tests/mpi/test_tp_layers.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <set>
#include <string>

#include "catch_error.h"
#include "comm/factory.h"
#include "nn/moe_layer.h"
#include "tp_test_util.h"

using namespace ds;
using namespace ds::nn;

namespace {

std::set<std::string> names(const std::vector<Param*>& ps) {
    std::set<std::string> s;
    for (const Param* p : ps) s.insert(p->name);
    return s;
}

void expect_message(const Error& e, ds_status_t status, const std::string& part) {
    EXPECT_EQ(e.status(), status) << e.what();
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
}

}  // namespace

TEST(TensorParallel, WorldOfOneWithoutCommunicatorEqualsUnsplitLayer) {
    tp_test::check_sharded_equals_unsharded(tp_test::layer_config(64, 4, 0.1f), nullptr, 0, 1, "no communicator");
}

TEST(TensorParallel, WorldOfOneOverLocalCommunicatorEqualsUnsplitLayer) {
    auto local = comm::make_local(comm::Options{});
    tp_test::check_sharded_equals_unsharded(tp_test::layer_config(64, 8, 0.0f), local.get(), 0, 1, "local");
}

TEST(TensorParallel, ParallelLinearsInWorldOfOneEqualFloat64Product) {
    tp_test::check_parallel_linears(make_tp_group(nullptr, 0, 1), "world of one");
}

TEST(TensorParallel, GroupArgumentsAreChecked) {
    expect_message(catch_error([] { make_tp_group(nullptr, 0, 0); }), DS_ERR_INVALID_ARGUMENT, "size = 0");
    expect_message(catch_error([] { make_tp_group(nullptr, -1, 1); }), DS_ERR_INVALID_ARGUMENT, "rank = -1");
    expect_message(catch_error([] { make_tp_group(nullptr, 2, 2); }), DS_ERR_INVALID_ARGUMENT, "rank = 2");
    expect_message(catch_error([] { make_tp_group(nullptr, 0, 2); }), DS_ERR_INVALID_ARGUMENT, "no communicator");
    auto local = comm::make_local(comm::Options{});
    expect_message(catch_error([&] { make_tp_group(local.get(), 1, 2); }), DS_ERR_INVALID_ARGUMENT,
                   "do not match the communicator (rank 0 of 1)");
}

TEST(TensorParallel, HeadsAndInnerSizeMustDivideBySize) {
    TransformerLayer a(tp_test::layer_config(64, 4, 0.0f));
    a.set_names("h.3.");
    expect_message(catch_error([&] { shard_transformer_layer(a, nullptr, 0, 3); }), DS_ERR_INVALID_ARGUMENT,
                   "'h.3': n_head (heads) = 4 is not a multiple of the tensor-parallel size 3");
    TransformerLayerConfig c = tp_test::layer_config(48, 6, 0.0f);
    c.intermediate_size = 100;
    TransformerLayer b(c);
    expect_message(catch_error([&] { shard_transformer_layer(b, nullptr, 0, 3); }), DS_ERR_INVALID_ARGUMENT,
                   "intermediate_size, 4 * hidden by default) = 100 is not a multiple of the tensor-parallel size 3");
    // The layer is left as it was: it still runs unsplit.
    EXPECT_FALSE(b.attn().sharded());
    EXPECT_FALSE(b.mlp().sharded());
}

// An MoE layer in place of the MLP stays whole (DeepSpeed's default: experts
// not split by tensor parallelism): only the attention is split, and every
// MoE parameter is replicated. Its inner size need not divide by the size.
TEST(TensorParallel, MoeLayerStaysWhole) {
    TransformerLayerConfig c = tp_test::layer_config(16, 2, 0.0f);
    c.intermediate_size = 60;
    TransformerLayer layer(c);
    MoeConfig mc;
    mc.num_experts = 2;
    layer.replace_mlp(std::make_unique<MoeLayer>(mc, 16, 60, 0.0f, true));
    layer.set_names("h.0.");
    layer.init_params(3);
    auto* moe = dynamic_cast<MoeLayer*>(&layer.ffn());
    ASSERT_NE(moe, nullptr);
    std::vector<Param*> before;
    for (Param* p : all_params(*moe)) before.push_back(p);
    shard_transformer_layer(layer, nullptr, 0, 1);
    EXPECT_TRUE(layer.attn().sharded());
    EXPECT_EQ(&layer.ffn(), moe);  // the same module, untouched
    const TpParamSplit split = tp_param_split(layer);
    for (Param* p : before) {
        EXPECT_NE(std::find(split.replicated.begin(), split.replicated.end(), p), split.replicated.end()) << p->name;
        EXPECT_EQ(std::find(split.split.begin(), split.split.end(), p), split.split.end()) << p->name;
    }
    EXPECT_EQ(split.split.size(), 3u);  // c_attn weight and bias, attn.c_proj weight: only the attention
    expect_message(catch_error([&] { shard_transformer_layer(layer, nullptr, 0, 1); }), DS_ERR_INVALID_STATE,
                   "already sharded");
}

TEST(TensorParallel, ShardingTwiceAndInitAfterShardingAreRefused) {
    TransformerLayer layer(tp_test::layer_config(16, 2, 0.0f));
    layer.init_params(3);
    shard_transformer_layer(layer, nullptr, 0, 1);
    expect_message(catch_error([&] { shard_transformer_layer(layer, nullptr, 0, 1); }), DS_ERR_INVALID_STATE,
                   "already sharded");
    expect_message(catch_error([&] { layer.init_params(3); }), DS_ERR_INVALID_STATE, "init_params after");
}

TEST(TensorParallel, ParamSplitListsBlocksAndReplicas) {
    TransformerLayer layer(tp_test::layer_config(16, 2, 0.0f));
    layer.set_names("h.1.");
    const TpParamSplit before = tp_param_split(layer);
    EXPECT_TRUE(before.split.empty());
    EXPECT_EQ(before.replicated.size(), all_params(layer).size());

    shard_transformer_layer(layer, nullptr, 0, 1);
    const TpParamSplit after = tp_param_split(layer);
    EXPECT_EQ(names(after.split),
              (std::set<std::string>{"h.1.attn.c_attn.weight", "h.1.attn.c_attn.bias", "h.1.attn.c_proj.weight",
                                     "h.1.mlp.c_fc.weight", "h.1.mlp.c_fc.bias", "h.1.mlp.c_proj.weight"}));
    EXPECT_EQ(names(after.replicated),
              (std::set<std::string>{"h.1.ln_1.weight", "h.1.ln_1.bias", "h.1.attn.c_proj.bias", "h.1.ln_2.weight",
                                     "h.1.ln_2.bias", "h.1.mlp.c_proj.bias"}));
    EXPECT_EQ(after.split.size() + after.replicated.size(), all_params(layer).size());
    EXPECT_STREQ(layer.attn().c_attn().type(), "ColumnParallelLinear");
    EXPECT_STREQ(layer.mlp().c_proj().type(), "RowParallelLinear");
}

TEST(TensorParallel, ShardOfMismatchedShapesIsRefused) {
    const TpGroup one = make_tp_group(nullptr, 0, 1);
    Linear odd(8, 10, true);
    odd.set_name("odd");
    expect_message(catch_error([&] { ColumnParallelLinear::shard(odd, one, 3); }), DS_ERR_INVALID_ARGUMENT,
                   "'odd': out_features = 10 does not split into 3 block(s) x 1 ranks");
    Param table;
    table.name = "wte.weight";
    table.shape = {12, 8};
    Linear tied(&table, false);
    expect_message(catch_error([&] { RowParallelLinear::shard(tied, one); }), DS_ERR_UNSUPPORTED, "shared (tied)");

    CausalSelfAttention attn(16, 4, 0.0f, 0.0f, true);
    // Two heads of four need c_attn [3 * 8, 16] and c_proj [16, 8].
    expect_message(catch_error([&] {
                       attn.shard(std::make_unique<ColumnParallelLinear>(16, 48, true, one),
                                  std::make_unique<RowParallelLinear>(8, 16, true, one), 1, 2);
                   }),
                   DS_ERR_INVALID_ARGUMENT, "do not fit 2 local heads");
    expect_message(catch_error([&] {
                       attn.shard(std::make_unique<ColumnParallelLinear>(16, 24, true, one),
                                  std::make_unique<RowParallelLinear>(8, 16, true, one), 3, 2);
                   }),
                   DS_ERR_INVALID_ARGUMENT, "heads [3, 5) are not within n_head = 4");
    EXPECT_FALSE(attn.sharded());
    Mlp mlp(16, 64, 0.0f, true);
    expect_message(catch_error([&] {
                       mlp.shard(std::make_unique<ColumnParallelLinear>(16, 32, true, one),
                                 std::make_unique<RowParallelLinear>(16, 16, true, one));
                   }),
                   DS_ERR_INVALID_ARGUMENT, "do not chain on hidden = 16");
    EXPECT_FALSE(mlp.sharded());
}
