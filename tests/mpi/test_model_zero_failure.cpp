// A built-in GPT at ZeRO-2 and ZeRO-3 under mpirun whose backward (or, at
// ZeRO-3, forward) fails part-way on every rank: out of memory at the n-th
// allocation of the pass, for each n in turn (the ranks run the same code
// on the same shapes, so they fail at the same point; the test checks that
// they did). The gradients handed over before the failure sit partly in
// the reduction buckets, not yet reduced (small buckets: some were reduced
// on the way), and with overlap_comm a reduction may be in flight: all of it
// is dropped with the window. Afterwards the engine trains on exactly as one
// that never failed: the same losses and, bitwise, the same weights. The
// single-process ZeRO-3 cases, and the memory given back, are in
// tests/unit/test_model_zero3_failure.cpp.

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/error.h"
#include "engine/engine.h"
#include "gpt_batches.h"
#include "mpi_gtest_main.h"

namespace {

using ds_gpt_test::forward_tokens;

const char* kSpec =
    R"({"type": "gpt", "vocab_size": 24, "block_size": 8, "n_layer": 2, "n_head": 2, "n_embd": 16, "seed": 9})";

std::string config(int stage, bool overlap) {
    return std::string("{\"train_micro_batch_size_per_gpu\": 2, \"zero_optimization\": {\"stage\": ") +
           std::to_string(stage) + ", \"reduce_bucket_size\": 300, \"overlap_comm\": " +
           (overlap ? "true" : "false") + ", \"stage3_param_persistence_threshold\": 0}" +
           ", \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.001, \"weight_decay\": 0.01}}}";
}

// Micro-step k on this rank: its own micro-batch of the global stream.
int64_t batch(int k) { return int64_t{k} * ds_mpi_test::world_size() + ds_mpi_test::world_rank(); }

float train(ds::Engine& e, int k) {
    const float loss = forward_tokens(e, 5, batch(k) * 3);
    e.backward(nullptr);
    e.step();
    return loss;
}

std::vector<float> master(ds::Engine& e) {
    std::vector<float> all;
    for (const ds::Param& p : e.params().all()) {
        std::vector<float> v(static_cast<size_t>(p.numel));
        std::vector<int64_t> shape = p.shape;
        DLTensor t{v.data(), {kDLCPU, 0}, static_cast<int32_t>(shape.size()), {kDLFloat, 32, 1}, shape.data(),
                   nullptr, 0};
        e.get_full(ds::FullTensor::Param, p.name.c_str(), nullptr, &t);
        all.insert(all.end(), v.begin(), v.end());
    }
    return all;
}

int ranks_agreeing(int flag) {
    int sum = 0;
    MPI_Allreduce(&flag, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    return sum;
}

void fail_part_way(int stage, bool overlap, bool in_forward) {
    const int world = ds_mpi_test::world_size();
    const std::string json = config(stage, overlap);
    auto ref = ds_gpt_test::make(json, kSpec);
    std::vector<float> ref_loss;
    for (int k = 0; k < 3; ++k) ref_loss.push_back(train(*ref, k));
    const std::vector<float> ref_w = master(*ref);

    int failures = 0;
    for (int64_t n = 1; n < 400; ++n) {
        SCOPED_TRACE("allocation " + std::to_string(n));
        auto e = ds_gpt_test::make(json, kSpec);
        ASSERT_EQ(train(*e, 0), ref_loss[0]);
        if (!in_forward) forward_tokens(*e, 5, batch(1) * 3);
        ds::Allocator::set_fail_after(n);
        int threw = 0;
        try {
            if (in_forward) forward_tokens(*e, 5, batch(1) * 3);
            else e->backward(nullptr);
        } catch (const ds::Error& err) {
            threw = 1;
            EXPECT_EQ(err.status(), DS_ERR_OUT_OF_MEMORY) << err.what();
        }
        ds::Allocator::set_fail_after(-1);
        const int threw_on = ranks_agreeing(threw);
        ASSERT_TRUE(threw_on == 0 || threw_on == world) << threw_on << " of " << world << " ranks failed";
        if (threw_on == 0) break;  // the pass makes fewer than n allocations
        ++failures;
        EXPECT_EQ(train(*e, 1), ref_loss[1]);
        EXPECT_EQ(train(*e, 2), ref_loss[2]);
        const std::vector<float> w = master(*e);
        ASSERT_EQ(w.size(), ref_w.size());
        EXPECT_EQ(std::memcmp(w.data(), ref_w.data(), w.size() * 4), 0) << "the weights differ after the failure";
        if (ranks_agreeing(::testing::Test::HasFailure() ? 1 : 0) != 0) return;
    }
    if (ds_mpi_test::world_rank() == 0)
        std::printf("ZeRO-%d x%d%s %s: %d allocations failed in turn\n", stage, world,
                    overlap ? " overlap_comm" : "", in_forward ? "forward" : "backward", failures);
    EXPECT_GE(failures, 6);
}

TEST(ModelZeroFailure, Zero2BackwardFailingPartWay) { fail_part_way(2, false, false); }
TEST(ModelZeroFailure, Zero2OverlapBackwardFailingPartWay) { fail_part_way(2, true, false); }
TEST(ModelZeroFailure, Zero3BackwardFailingPartWay) { fail_part_way(3, false, false); }
TEST(ModelZeroFailure, Zero3OverlapBackwardFailingPartWay) { fail_part_way(3, true, false); }
TEST(ModelZeroFailure, Zero3ForwardFailingPartWay) { fail_part_way(3, false, true); }

}  // namespace
