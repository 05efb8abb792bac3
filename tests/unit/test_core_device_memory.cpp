// Device memory (core/device_memory.h) through the allocator and Tensor: a
// round trip host -> cuda:0 -> host, zero() on the device, the per-device
// byte accounting, the reuse of freed blocks, and the refusals (dtype conversion or strided copies
// across devices). Needs a CUDA build and a GPU: skipped, with the reason,
// where either is missing (a build without CUDA is covered by
// CoreTensor.CudaTensorsNeedACudaBuild and CoreAllocator.CudaWithoutCudaBuildIsUnsupported).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/device_memory.h"
#include "core/error.h"
#include "core/tensor.h"

namespace {

using ds::Allocator;
using ds::Device;
using ds::DType;
using ds::MemCategory;
using ds::Tensor;

// A tensor on cuda:0, or the reason there can be none here.
bool cuda_tensor(Allocator& a, int64_t n, Tensor* out, std::string* why) {
    if (!ds::device_memory::available()) {
        *why = "this build has no CUDA";
        return false;
    }
    try {
        *out = Tensor::empty({n}, DType::F32, Device::cuda(0), a, MemCategory::Params);
        return true;
    } catch (const ds::Error& e) {
        if (e.status() != DS_ERR_DEVICE) throw;  // out of memory etc. is a failure, not a skip
        *why = std::string("no usable GPU: ") + e.what();
        return false;
    }
}

TEST(CoreDeviceMemory, RoundTripZeroAndAccountingOnCuda0) {
    Allocator a;
    const int64_t n = 1 << 20;
    Tensor d;
    std::string why;
    if (!cuda_tensor(a, n, &d, &why)) GTEST_SKIP() << why;
    EXPECT_EQ(a.bytes(Device::Kind::CUDA), n * 4);

    Tensor h = Tensor::empty({n}, DType::F32, Device::cpu(), a, MemCategory::Buffers);
    float* hp = h.data<float>();
    for (int64_t i = 0; i < n; ++i) hp[i] = static_cast<float>(i) * 0.5f - 7.0f;
    d.copy_from(h);
    Tensor back = Tensor::zeros({n}, DType::F32, Device::cpu(), a, MemCategory::Buffers);
    back.copy_from(d);
    EXPECT_EQ(std::memcmp(back.data<float>(), hp, static_cast<size_t>(n) * 4), 0);

    d.zero();
    back.copy_from(d);
    const float* bp = back.data<float>();
    int64_t nonzero = 0;
    for (int64_t i = 0; i < n; ++i) nonzero += bp[i] != 0.0f;
    EXPECT_EQ(nonzero, 0);

    d = Tensor();  // frees the device block
    EXPECT_EQ(a.bytes(Device::Kind::CUDA), 0);
}

// The process's device block cache (core/device_block_cache.h) on the real
// runtime: a freed block comes back for the same size, and release_cached()
// gives it to the driver (the policy itself: device_block_cache_test.cpp).
TEST(CoreDeviceMemory, FreedBlocksAreReusedOnCuda0) {
    Allocator::release_cached();
    Allocator a;
    Tensor keep;  // one live block, so the Allocator's counters outlive the frees below
    std::string why;
    if (!cuda_tensor(a, 16, &keep, &why)) GTEST_SKIP() << why;
    const int64_t n = 3 << 20;  // 12 MiB of fp32
    void* first = nullptr;
    {
        Tensor d = Tensor::empty({n}, DType::F32, Device::cuda(0), a, MemCategory::Buffers);
        first = d.data_ptr();
        d.zero();
    }
    EXPECT_EQ(Allocator::cached_device_bytes(0), 12 << 20);
    EXPECT_EQ(a.bytes(MemCategory::Buffers), 0);
    Tensor again = Tensor::empty({n}, DType::F32, Device::cuda(0), a, MemCategory::Buffers);
    EXPECT_EQ(again.data_ptr(), first);
    EXPECT_EQ(Allocator::cached_device_bytes(0), 0);
    again = Tensor();
    Allocator::release_cached();
    EXPECT_EQ(Allocator::cached_device_bytes(), 0);
}

TEST(CoreDeviceMemory, CrossDeviceConversionAndStridedCopiesAreRefused) {
    Allocator a;
    Tensor d;
    std::string why;
    if (!cuda_tensor(a, 8, &d, &why)) GTEST_SKIP() << why;
    Tensor h16 = Tensor::zeros({8}, DType::BF16, Device::cpu(), a, MemCategory::Buffers);
    try {
        d.copy_from(h16);
        ADD_FAILURE() << "converting bf16 to fp32 across devices was accepted";
    } catch (const ds::Error& e) {
        EXPECT_EQ(e.status(), DS_ERR_UNSUPPORTED);
        EXPECT_STREQ(e.what(),
                     "copy_from: converting bf16 to fp32 between cpu and cuda:0 is not supported (convert on the host)");
    }
    std::vector<float> host(16, 1.0f);
    Tensor strided = Tensor::borrow(host.data(), {8}, {2}, DType::F32, Device::cpu());
    try {
        d.copy_from(strided);
        ADD_FAILURE() << "a strided host -> device copy was accepted";
    } catch (const ds::Error& e) {
        EXPECT_EQ(e.status(), DS_ERR_UNSUPPORTED);
        EXPECT_STREQ(e.what(), "copy_from: strided copies involving cuda:0 are not supported");
    }
}

}  // namespace
