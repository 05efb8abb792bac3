// A ZeRO-Offload engine on a (host-backed) GPU whose backward fails part-way
// while gradients are queued to the host (engine/grad_pipe.h): out of
// memory at each allocation of the backward in turn, which hits the model's
// own buffers and the host accumulation that runs as queued copies arrive.
// The call reports DS_ERR_OUT_OF_MEMORY (DS_ERR_DEVICE_OUT_OF_MEMORY for
// device memory); the queued copies are dropped with
// the window's gradients; nothing is left queued on the copy stream; and the
// engine then trains on exactly as one that never failed (bitwise). The
// smallest ring, so accumulation runs in the middle of the backward.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/error.h"
#include "core/host_streams.h"
#include "engine/engine.h"
#include "engine/grad_pipe.h"
#include "gpt_engine_test_util.h"
#include "nn/model.h"
#include "host_backed_device.h"
#include "nvme_test_util.h"

namespace {

using ds::Engine;
using ds::EngineOptions;

const char* kGpt = R"({"type": "gpt", "vocab_size": 24, "block_size": 8, "n_layer": 3, "n_head": 2,
    "n_embd": 16, "dropout": 0.0, "seed": 5})";

std::string config(const char* precision, int stage) {
    return nvme_test::engine_json(nvme_test::kAdamW, precision,
                                  "\"stage\": " + std::to_string(stage) +
                                      ", \"offload_optimizer\": {\"device\": \"cpu\", \"pin_memory\": true}");
}

struct Gpt : gpt_engine_test::GptEngine {
    Gpt(const char* precision, int stage) : GptEngine(kGpt, 24, config(precision, stage), on_cuda0()) {}
    static EngineOptions on_cuda0() {
        EngineOptions o;
        o.device_type = kDLCUDA;
        o.device_index = 0;
        return o;
    }
};

void fail_part_way(const char* precision, int stage) {
    test_device::HostBackedDevice device;
    ds::GradPipe::set_min_staging_for_testing(0);
    Gpt ref(precision, stage);
    std::vector<float> ref_loss;
    for (int k = 0; k < 3; ++k) ref_loss.push_back(ref.train(k));
    const std::vector<float> ref_w = ref.master();

    int failures = 0;
    for (int64_t n = 1; n < 400; ++n) {
        SCOPED_TRACE("allocation " + std::to_string(n));
        Gpt g(precision, stage);
        ASSERT_EQ(g.train(0), ref_loss[0]);
        g.forward(1);
        ds::Allocator::set_fail_after(n);
        bool threw = false;
        try {
            g.e->backward(nullptr);
        } catch (const ds::Error& err) {
            threw = true;
            EXPECT_TRUE(err.status() == DS_ERR_OUT_OF_MEMORY || err.status() == DS_ERR_DEVICE_OUT_OF_MEMORY)
                << err.what();
        }
        ds::Allocator::set_fail_after(-1);
        if (!threw) break;
        ++failures;
        EXPECT_EQ(ds::device_memory::host_streams::queued(), 0u) << "copies left queued after the failure";
        EXPECT_EQ(g.train(1), ref_loss[1]);
        EXPECT_EQ(g.train(2), ref_loss[2]);
        const std::vector<float> w = g.master();
        ASSERT_EQ(w.size(), ref_w.size());
        EXPECT_EQ(std::memcmp(w.data(), ref_w.data(), w.size() * 4), 0) << "the weights differ after the failure";
        if (::testing::Test::HasFailure()) break;
    }
    ds::GradPipe::set_min_staging_for_testing(size_t{4} << 20);
    std::printf("%s stage %d: %d allocations of the backward failed in turn\n", precision[0] ? "bf16" : "fp32", stage,
                failures);
    EXPECT_GE(failures, 3);
}

TEST(GradPipeFailure, BackwardFailingPartWayDropsTheQueuedGradientsZero2Bf16) { fail_part_way(nvme_test::kBf16, 2); }
TEST(GradPipeFailure, BackwardFailingPartWayDropsTheQueuedGradientsZero1Fp32) { fail_part_way("", 1); }
TEST(GradPipeFailure, BackwardFailingPartWayDropsTheQueuedGradientsZero3Bf16) { fail_part_way(nvme_test::kBf16, 3); }

}  // namespace
