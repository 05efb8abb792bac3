// A built-in GPT at ZeRO-3 whose forward or backward fails part-way, inside
// a transformer layer or outside them (out of memory at each allocation of
// the pass in turn): the call reports DS_ERR_OUT_OF_MEMORY, the weights it
// gathered and the activations it kept are given back at once (the
// parameters' and buffers' bytes are those before the call), and the engine
// then trains on exactly as an engine that never failed (bitwise: the same
// code on the same numbers). ZeRO-3 runs in one process here through
// offload_param "nvme" (Strategy::create), every weight partitioned
// (persistence threshold 0), so each layer gathers its own weights on entry
// and releases them when it leaves; fp32 and bf16 (whose Linear weights are
// bound to the gathered bf16 copies in place).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/error.h"
#include "engine/engine.h"
#include "engine/engine_model.h"
#include "gpt_engine_test_util.h"
#include "nn/model.h"
#include "nvme_test_util.h"

namespace {

using ds::Engine;
using ds::EngineOptions;
using ds::MemCategory;

const char* kGpt = R"({"type": "gpt", "vocab_size": 24, "block_size": 8, "n_layer": 2, "n_head": 2,
    "n_embd": 16, "dropout": 0.0, "seed": 5})";

std::string config(const char* precision, const std::string& dir) {
    return nvme_test::engine_json(
        nvme_test::kAdamW, precision,
        "\"stage\": 3, \"stage3_param_persistence_threshold\": 0, \"offload_param\": " +
            nvme_test::nvme_section(dir, ", \"max_in_cpu\": 100000000"));
}

struct SwapDir {
    nvme_test::TempDir dir{"ds_z3_fail_"};
};

// The swap directory first (a base made before the engine that uses it).
struct Gpt : SwapDir, gpt_engine_test::GptEngine {
    explicit Gpt(const char* precision) : GptEngine(kGpt, 24, config(precision, dir.path), EngineOptions{}) {}
};

enum class Pass { Forward, Backward };

void fail_part_way(const char* precision, Pass pass) {
    // The reference: micro-steps 0, 1, 2 with no failure.
    Gpt ref(precision);
    std::vector<float> ref_loss;
    for (int k = 0; k < 3; ++k) ref_loss.push_back(ref.train(k));
    const std::vector<float> ref_w = ref.master();

    int failures = 0;
    for (int64_t n = 1; n < 400; ++n) {
        SCOPED_TRACE("allocation " + std::to_string(n));
        Gpt g(precision);
        ASSERT_EQ(g.train(0), ref_loss[0]);  // every lazily made buffer exists
        const int64_t params = g.bytes(MemCategory::Params), buffers = g.bytes(MemCategory::Buffers);
        if (pass == Pass::Backward) g.forward(1);
        ds::Allocator::set_fail_after(n);
        bool threw = false;
        try {
            if (pass == Pass::Forward) g.forward(1);
            else g.e->backward(nullptr);
        } catch (const ds::Error& err) {
            threw = true;
            EXPECT_EQ(err.status(), DS_ERR_OUT_OF_MEMORY) << err.what();
        }
        ds::Allocator::set_fail_after(-1);
        if (!threw) break;  // the pass makes fewer than n allocations
        ++failures;
        // Nothing stays gathered and no activation is kept.
        EXPECT_EQ(g.bytes(MemCategory::Params), params);
        EXPECT_EQ(g.bytes(MemCategory::Buffers), buffers);
        // The failed micro-batch is taken again, then the next: as if it never failed.
        EXPECT_EQ(g.train(1), ref_loss[1]);
        EXPECT_EQ(g.train(2), ref_loss[2]);
        const std::vector<float> w = g.master();
        ASSERT_EQ(w.size(), ref_w.size());
        EXPECT_EQ(std::memcmp(w.data(), ref_w.data(), w.size() * 4), 0) << "the weights differ after the failure";
        if (::testing::Test::HasFailure()) return;
    }
    std::printf("%s %s: %d allocations failed in turn\n", precision[0] ? "bf16" : "fp32",
                pass == Pass::Forward ? "forward" : "backward", failures);
    // The embedding, both layers' gathers and their activations at least.
    EXPECT_GE(failures, 6);
}

TEST(ModelZero3Failure, ForwardFailingPartWayGivesEverythingBackFp32) { fail_part_way("", Pass::Forward); }
TEST(ModelZero3Failure, ForwardFailingPartWayGivesEverythingBackBf16) {
    fail_part_way(nvme_test::kBf16, Pass::Forward);
}
TEST(ModelZero3Failure, BackwardFailingPartWayGivesEverythingBackFp32) { fail_part_way("", Pass::Backward); }
TEST(ModelZero3Failure, BackwardFailingPartWayGivesEverythingBackBf16) {
    fail_part_way(nvme_test::kBf16, Pass::Backward);
}

}  // namespace
