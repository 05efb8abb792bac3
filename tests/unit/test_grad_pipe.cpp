// engine/grad_pipe.h on the host-backed device, whose copy stream runs its
// copies only when something waits for them (core/host_streams.h): the
// sinks get every gradient's bytes in submission order, the ring wraps and
// grows, fence() protects a source written again, discard() runs nothing,
// and a sink's failure leaves the rest for the caller to discard.
#include <gtest/gtest.h>

#include <cstring>
#include <stdexcept>
#include <vector>

#include "core/allocator.h"
#include "core/host_streams.h"
#include "core/tensor.h"
#include "engine/grad_pipe.h"
#include "host_backed_device.h"

namespace {

using ds::Device;
using ds::DType;
using ds::GradPipe;
using ds::MemCategory;
using ds::Tensor;

struct GradPipeTest : ::testing::Test {
    test_device::HostBackedDevice device;
    ds::Allocator alloc;
    void TearDown() override {
        GradPipe::set_min_staging_for_testing(size_t{4} << 20);
        EXPECT_EQ(ds::device_memory::host_streams::queued(), 0u);
    }
    // A "device" buffer of n floats, value base + i.
    Tensor grad(int64_t n, float base) {
        Tensor h = Tensor::empty({n}, DType::F32, Device::cpu(), alloc, MemCategory::Buffers);
        for (int64_t i = 0; i < n; ++i) h.data<float>()[i] = base + static_cast<float>(i);
        Tensor d = Tensor::empty({n}, DType::F32, Device::cuda(0), alloc, MemCategory::Grads);
        d.copy_from(h);
        return d;
    }
};

// What a sink saw: the gradient's first and last values, in call order.
struct Seen {
    std::vector<std::pair<float, float>> ends;
    GradPipe::Sink sink(int64_t n) {
        return [this, n](const void* host) {
            const auto* f = static_cast<const float*>(host);
            ends.emplace_back(f[0], f[n - 1]);
        };
    }
};

TEST_F(GradPipeTest, SinksGetEveryGradientInOrderAsTheRingWraps) {
    GradPipe::set_min_staging_for_testing(0);  // the ring: twice the largest gradient
    GradPipe pipe(Device::cuda(0), /*pin=*/true, alloc);
    Seen seen;
    const int64_t n = 1000;  // 4000 bytes -> 4096 staged; the ring holds 2
    std::vector<Tensor> grads;
    for (int k = 0; k < 7; ++k) grads.push_back(grad(n, 100.0f * static_cast<float>(k)));
    for (int k = 0; k < 7; ++k) {
        pipe.submit(grads[static_cast<size_t>(k)].data_ptr(), n * 4, seen.sink(n), "test");
        EXPECT_LE(pipe.pending(), 2u);
        // The copy of the oldest waits until the ring needs its room.
        EXPECT_EQ(seen.ends.size(), static_cast<size_t>(k + 1) - pipe.pending());
    }
    EXPECT_EQ(pipe.staging_bytes(), 2u * 4096u);
    pipe.drain();
    ASSERT_EQ(seen.ends.size(), 7u);
    for (int k = 0; k < 7; ++k) {
        EXPECT_EQ(seen.ends[static_cast<size_t>(k)].first, 100.0f * static_cast<float>(k));
        EXPECT_EQ(seen.ends[static_cast<size_t>(k)].second, 100.0f * static_cast<float>(k) + 999.0f);
    }
    EXPECT_EQ(pipe.copies(), 7);
}

TEST_F(GradPipeTest, MixedSizesWrapAndALargerGradientGrowsTheRing) {
    GradPipe::set_min_staging_for_testing(0);
    GradPipe pipe(Device::cuda(0), true, alloc);
    Seen seen;
    const std::vector<int64_t> sizes = {300, 700, 64, 1000, 5, 900, 4000, 10, 2500, 1};
    std::vector<Tensor> grads;
    for (size_t k = 0; k < sizes.size(); ++k) grads.push_back(grad(sizes[k], 10000.0f * static_cast<float>(k)));
    for (size_t k = 0; k < sizes.size(); ++k)
        pipe.submit(grads[k].data_ptr(), static_cast<size_t>(sizes[k]) * 4, seen.sink(sizes[k]), "test");
    pipe.drain();
    ASSERT_EQ(seen.ends.size(), sizes.size());
    for (size_t k = 0; k < sizes.size(); ++k) {
        EXPECT_EQ(seen.ends[k].first, 10000.0f * static_cast<float>(k)) << k;
        EXPECT_EQ(seen.ends[k].second, 10000.0f * static_cast<float>(k) + static_cast<float>(sizes[k] - 1)) << k;
    }
    EXPECT_EQ(pipe.staging_bytes(), 2u * 16128u);  // 4000 floats, rounded up to 256 bytes
}

// The emulated copy stream reads a source when the copy is waited for: a
// source written again without a fence gives the sink the new bytes (what
// a GPU might do), with a fence the bytes of the submit.
TEST_F(GradPipeTest, FenceProtectsASourceWrittenAgain) {
    GradPipe pipe(Device::cuda(0), true, alloc);
    Seen seen;
    Tensor g = grad(16, 1.0f);
    Tensor again = grad(16, 50.0f);
    const uint64_t t = pipe.submit(g.data_ptr(), 64, seen.sink(16), "test");
    pipe.fence(t);
    g.copy_from(again);  // the next layer's backward reuses the buffer
    pipe.submit(g.data_ptr(), 64, seen.sink(16), "test");
    g.copy_from(grad(16, 90.0f));  // no fence this time
    pipe.drain();
    ASSERT_EQ(seen.ends.size(), 2u);
    EXPECT_EQ(seen.ends[0].first, 1.0f);
    EXPECT_EQ(seen.ends[1].first, 90.0f) << "the host-backed copy stream no longer defers its copies";
}

TEST_F(GradPipeTest, DiscardRunsNoSinkAndThePipeGoesOn) {
    GradPipe pipe(Device::cuda(0), false, alloc);
    Seen seen;
    Tensor g = grad(8, 3.0f);
    const uint64_t t1 = pipe.submit(g.data_ptr(), 32, seen.sink(8), "test");
    pipe.submit(g.data_ptr(), 32, seen.sink(8), "test");
    pipe.discard();
    EXPECT_EQ(pipe.pending(), 0u);
    EXPECT_TRUE(seen.ends.empty());
    pipe.fence(t1);  // dropped: nothing to wait for
    pipe.submit(g.data_ptr(), 32, seen.sink(8), "test");
    pipe.drain();
    ASSERT_EQ(seen.ends.size(), 1u);
    EXPECT_EQ(seen.ends[0].first, 3.0f);
}

TEST_F(GradPipeTest, ASinkThatThrowsLeavesTheRestQueued) {
    GradPipe pipe(Device::cuda(0), true, alloc);
    Seen seen;
    Tensor g = grad(8, 0.0f);
    pipe.submit(g.data_ptr(), 32, seen.sink(8), "test");
    pipe.submit(g.data_ptr(), 32, [](const void*) { throw std::runtime_error("accumulate failed"); }, "test");
    pipe.submit(g.data_ptr(), 32, seen.sink(8), "test");
    EXPECT_THROW(pipe.drain(), std::runtime_error);
    EXPECT_EQ(seen.ends.size(), 1u);
    EXPECT_EQ(pipe.pending(), 1u);
    pipe.discard();
    EXPECT_EQ(seen.ends.size(), 1u);
}

TEST_F(GradPipeTest, PinnedStagingIsCountedAndGivenBack) {
    const int64_t before = ds::device_memory::pinned_bytes();
    {
        GradPipe pipe(Device::cuda(0), true, alloc);
        Seen seen;
        Tensor g = grad(8, 0.0f);
        pipe.submit(g.data_ptr(), 32, seen.sink(8), "test");
        pipe.drain();
        EXPECT_EQ(ds::device_memory::pinned_bytes() - before, static_cast<int64_t>(pipe.staging_bytes()));
    }
    EXPECT_EQ(ds::device_memory::pinned_bytes(), before);
}

}  // namespace
