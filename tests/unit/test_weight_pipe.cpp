// engine/weight_pipe.h on the host-backed device, whose copy stream runs its
// copies only when something waits for them (core/host_streams.h): after
// upload() the device copies hold the sources' bytes of that moment (the
// sources may be written or freed at once), every batch first waits for the
// legacy stream, the ring wraps and grows, and a batch whose staging cannot
// grow fails with nothing queued.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/allocator.h"
#include "core/error.h"
#include "core/host_streams.h"
#include "core/tensor.h"
#include "engine/weight_pipe.h"
#include "host_backed_device.h"

namespace {

using ds::Device;
using ds::DType;
using ds::MemCategory;
using ds::Tensor;
using ds::WeightPipe;

struct WeightPipeTest : ::testing::Test {
    test_device::HostBackedDevice device;
    ds::Allocator alloc;
    void TearDown() override {
        WeightPipe::set_min_staging_for_testing(size_t{4} << 20);
        EXPECT_EQ(ds::device_memory::host_streams::queued(), 0u);
    }
    // A host buffer of n floats, value base + i.
    Tensor host(int64_t n, float base) {
        Tensor h = Tensor::empty({n}, DType::F32, Device::cpu(), alloc, MemCategory::Buffers);
        for (int64_t i = 0; i < n; ++i) h.data<float>()[i] = base + static_cast<float>(i);
        return h;
    }
    Tensor on_device(int64_t n) { return Tensor::empty({n}, DType::F32, Device::cuda(0), alloc, MemCategory::Params); }
    static void expect_values(const Tensor& d, float base, const char* what) {
        const auto* f = static_cast<const float*>(d.data_ptr());  // host-backed: readable here
        for (int64_t i = 0; i < d.numel(); ++i)
            ASSERT_EQ(f[i], base + static_cast<float>(i)) << what << " element " << i;
    }
};

// The legacy stream waits for the batch, so what runs there afterwards (here:
// the host, as the host-backed kernels do) reads the copies; the sources were
// staged by upload() and are written again right after it.
TEST_F(WeightPipeTest, CopiesLandBeforeLaterWorkAndSourcesAreFreeAtOnce) {
    WeightPipe pipe(Device::cuda(0), /*pin=*/true, alloc);
    Tensor a = host(1000, 1.0f), b = host(3, 500.0f), c = host(0, 0.0f);
    Tensor da = on_device(1000), db = on_device(3), dc = on_device(0);
    (void)device.take_orders();
    pipe.upload({{da.data_ptr(), a.data_ptr(), a.nbytes()},
                 {db.data_ptr(), b.data_ptr(), b.nbytes()},
                 {dc.data_ptr(), c.data_ptr(), c.nbytes()}},
                "test");
    std::memset(a.data_ptr(), 0, a.nbytes());  // the layer's host gathers are freed
    std::memset(b.data_ptr(), 0, b.nbytes());
    expect_values(da, 1.0f, "a");
    expect_values(db, 500.0f, "b");
    EXPECT_EQ(pipe.copies(), 2);  // nothing to copy for an empty parameter
    // One wait for the legacy stream per batch, by the copy stream.
    const auto orders = device.take_orders();
    ASSERT_EQ(orders.size(), 1u);
    EXPECT_NE(orders[0].first, nullptr);
    EXPECT_EQ(orders[0].second, nullptr);
}

// A batch uploaded ahead (the next layer's weights): its copies stay queued
// on the copy stream, the legacy stream not waiting, until wait_batch; then
// they land with the sources' bytes of upload time. Its copies still wait
// for the legacy stream's earlier work, as every batch does.
TEST_F(WeightPipeTest, ABatchUploadedAheadLandsWhenTheLegacyStreamWaitsForIt) {
    WeightPipe pipe(Device::cuda(0), /*pin=*/true, alloc);
    Tensor a = host(300, 7.0f), b = host(20, -40.0f);
    Tensor da = on_device(300), db = on_device(20);
    std::memset(da.data_ptr(), 0, da.nbytes());
    (void)device.take_orders();
    void* ev = pipe.upload_ahead({{da.data_ptr(), a.data_ptr(), a.nbytes()}, {db.data_ptr(), b.data_ptr(), b.nbytes()}},
                                 "test");
    ASSERT_NE(ev, nullptr);
    std::memset(a.data_ptr(), 0, a.nbytes());  // the host gathers are freed
    std::memset(b.data_ptr(), 0, b.nbytes());
    EXPECT_GT(ds::device_memory::host_streams::queued(), 0u) << "nothing made the legacy stream wait yet";
    EXPECT_EQ(static_cast<const float*>(da.data_ptr())[0], 0.0f) << "the copy ran before anything waited for it";
    const auto orders = device.take_orders();
    ASSERT_EQ(orders.size(), 1u);  // after the legacy stream's work so far
    EXPECT_NE(orders[0].first, nullptr);
    EXPECT_EQ(orders[0].second, nullptr);
    pipe.wait_batch(ev, "test");
    expect_values(da, 7.0f, "a");
    expect_values(db, -40.0f, "b");
    EXPECT_EQ(pipe.upload_ahead({}, "test"), nullptr);  // nothing to copy: no event to wait for
    pipe.wait_batch(nullptr, "test");                   // and waiting for none does nothing
}

TEST_F(WeightPipeTest, TheRingWrapsAndALargerBatchGrowsIt) {
    WeightPipe::set_min_staging_for_testing(0);  // the ring: twice the largest batch
    WeightPipe pipe(Device::cuda(0), true, alloc);
    const int64_t n = 1000;  // 4000 bytes -> 4096 staged; a batch of two is 8192
    std::vector<Tensor> dev;
    for (int k = 0; k < 7; ++k) {
        Tensor x = host(n, 100.0f * static_cast<float>(k)), y = host(n, 100.0f * static_cast<float>(k) + 50.0f);
        dev.push_back(on_device(n));
        dev.push_back(on_device(n));
        pipe.upload({{dev[dev.size() - 2].data_ptr(), x.data_ptr(), x.nbytes()},
                     {dev.back().data_ptr(), y.data_ptr(), y.nbytes()}},
                    "test");
    }
    EXPECT_EQ(pipe.staging_bytes(), 2u * 8192u);
    for (int k = 0; k < 7; ++k) {
        expect_values(dev[2 * static_cast<size_t>(k)], 100.0f * static_cast<float>(k), "first of the batch");
        expect_values(dev[2 * static_cast<size_t>(k) + 1], 100.0f * static_cast<float>(k) + 50.0f, "second");
    }
    Tensor big = host(3000, 7.0f), dbig = on_device(3000);
    pipe.upload({{dbig.data_ptr(), big.data_ptr(), big.nbytes()}}, "test");
    EXPECT_EQ(pipe.staging_bytes(), 2u * 12032u);  // 12000 bytes, rounded up to 256
    expect_values(dbig, 7.0f, "big");
    EXPECT_EQ(pipe.copies(), 15);
    pipe.wait_all();
}

// A batch larger than the ring whose larger staging cannot be allocated
// fails with out of memory before queuing anything; the earlier copies have
// landed and the pipe goes on.
TEST_F(WeightPipeTest, ABatchWhoseStagingCannotGrowFailsAndThePipeGoesOn) {
    WeightPipe::set_min_staging_for_testing(0);
    WeightPipe pipe(Device::cuda(0), true, alloc);
    Tensor a = host(64, 1.0f), big = host(5000, 2.0f);
    Tensor da = on_device(64), dbig = on_device(5000);
    pipe.upload({{da.data_ptr(), a.data_ptr(), a.nbytes()}}, "small");
    ds::Allocator::set_fail_after(1);
    try {
        pipe.upload({{dbig.data_ptr(), big.data_ptr(), big.nbytes()}}, "big");
        ADD_FAILURE() << "the staging grew under an allocation failure";
    } catch (const ds::Error& err) {
        EXPECT_EQ(err.status(), DS_ERR_OUT_OF_MEMORY) << err.what();
    }
    ds::Allocator::set_fail_after(-1);
    expect_values(da, 1.0f, "the copy before the failure");
    pipe.upload({{dbig.data_ptr(), big.data_ptr(), big.nbytes()}}, "big again");
    expect_values(dbig, 2.0f, "big");
}

}  // namespace
