// Allocator: per-category accounting, peaks, alignment, the fail-after hook.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/allocator.h"
#include "core/error.h"

namespace {

using ds::Allocator;
using ds::Device;
using ds::MemCategory;

// Disarms the process-wide hook even when a test fails half-way.
struct FailAfterGuard {
    ~FailAfterGuard() { Allocator::set_fail_after(-1); }
};

TEST(CoreAllocator, CategoryNames) {
    EXPECT_STREQ(ds::mem_category_name(MemCategory::Params), "params");
    EXPECT_STREQ(ds::mem_category_name(MemCategory::Grads), "grads");
    EXPECT_STREQ(ds::mem_category_name(MemCategory::OptimizerState), "optimizer_state");
    EXPECT_STREQ(ds::mem_category_name(MemCategory::Buffers), "buffers");
}

TEST(CoreAllocator, AccountingPerCategoryAndPeak) {
    Allocator a;
    const Device cpu = Device::cpu();
    void* p1 = a.allocate(1000, cpu, MemCategory::Params);
    void* p2 = a.allocate(300, cpu, MemCategory::Params);
    void* g = a.allocate(500, cpu, MemCategory::Grads);
    void* o = a.allocate(4096, cpu, MemCategory::OptimizerState);
    EXPECT_EQ(a.bytes(MemCategory::Params), 1300);
    EXPECT_EQ(a.bytes(MemCategory::Grads), 500);
    EXPECT_EQ(a.bytes(MemCategory::OptimizerState), 4096);
    EXPECT_EQ(a.bytes(MemCategory::Buffers), 0);
    EXPECT_EQ(a.total(), 1300 + 500 + 4096);
    EXPECT_EQ(a.bytes(Device::Kind::CPU), 1300 + 500 + 4096);
    EXPECT_EQ(a.bytes(Device::Kind::CUDA), 0);
    EXPECT_EQ(a.live_allocations(), 4);

    a.deallocate(p1, 1000, cpu, MemCategory::Params);
    EXPECT_EQ(a.bytes(MemCategory::Params), 300);
    EXPECT_EQ(a.peak(MemCategory::Params), 1300);
    void* b = a.allocate(200, cpu, MemCategory::Buffers);
    EXPECT_EQ(a.peak_total(), 1300 + 500 + 4096);  // 300+500+4096+200 is lower

    a.deallocate(p2, 300, cpu, MemCategory::Params);
    a.deallocate(g, 500, cpu, MemCategory::Grads);
    a.deallocate(o, 4096, cpu, MemCategory::OptimizerState);
    a.deallocate(b, 200, cpu, MemCategory::Buffers);
    for (int c = 0; c < static_cast<int>(MemCategory::Count); ++c)
        EXPECT_EQ(a.bytes(static_cast<MemCategory>(c)), 0);
    EXPECT_EQ(a.total(), 0);
    EXPECT_EQ(a.live_allocations(), 0);
    EXPECT_EQ(a.peak(MemCategory::Params), 1300);
    EXPECT_EQ(a.peak(MemCategory::Buffers), 200);
    EXPECT_EQ(a.peak(Device::Kind::CPU), 1300 + 500 + 4096);
    a.reset_peaks();
    EXPECT_EQ(a.peak(MemCategory::Params), 0);
    EXPECT_EQ(a.peak_total(), 0);
}

TEST(CoreAllocator, HostMemoryIs64ByteAlignedAndWritable) {
    Allocator a;
    std::vector<void*> ps;
    for (size_t n : {1, 3, 63, 64, 65, 1000, 1 << 20}) {
        void* p = a.allocate(n, Device::cpu(), MemCategory::Buffers);
        ASSERT_NE(p, nullptr);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << n;
        std::memset(p, 0xAB, n);
        a.deallocate(p, n, Device::cpu(), MemCategory::Buffers);
    }
    EXPECT_EQ(a.allocate(0, Device::cpu(), MemCategory::Buffers), nullptr);
    EXPECT_EQ(a.live_allocations(), 0);
}

TEST(CoreAllocator, BlocksFreeThemselvesAndMayOutliveTheAllocator) {
    std::shared_ptr<void> block;
    {
        Allocator a;
        block = a.allocate_block(128, Device::cpu(), MemCategory::Grads);
        EXPECT_EQ(a.bytes(MemCategory::Grads), 128);
        {
            std::shared_ptr<void> b2 = a.allocate_block(64, Device::cpu(), MemCategory::Grads);
            EXPECT_EQ(a.bytes(MemCategory::Grads), 192);
        }
        EXPECT_EQ(a.bytes(MemCategory::Grads), 128);
        EXPECT_FALSE(a.allocate_block(0, Device::cpu(), MemCategory::Grads));
    }
    std::memset(block.get(), 1, 128);
    block.reset();  // frees after the Allocator is gone (ASan checks this)
}

TEST(CoreAllocator, FailAfterHookFailsExactlyTheNthAllocation) {
    FailAfterGuard guard;
    Allocator a;
    Allocator::set_fail_after(3);
    void* p1 = a.allocate(16, Device::cpu(), MemCategory::Params);
    void* p2 = a.allocate(16, Device::cpu(), MemCategory::Params);
    try {
        a.allocate(777, Device::cpu(), MemCategory::OptimizerState);
        FAIL() << "third allocation should fail";
    } catch (const ds::Error& e) {
        EXPECT_EQ(e.status(), DS_ERR_OUT_OF_MEMORY);
        EXPECT_NE(std::strstr(e.what(), "777"), nullptr) << e.what();
        EXPECT_NE(std::strstr(e.what(), "optimizer_state"), nullptr) << e.what();
    }
    EXPECT_EQ(a.bytes(MemCategory::OptimizerState), 0);  // nothing counted for the failure
    // One-shot: the next allocation succeeds again.
    void* p3 = a.allocate(16, Device::cpu(), MemCategory::Params);
    EXPECT_NE(p3, nullptr);
    for (void* p : {p1, p2, p3}) a.deallocate(p, 16, Device::cpu(), MemCategory::Params);

    // Process-wide: it also applies to the process allocator and to blocks.
    Allocator::set_fail_after(1);
    EXPECT_THROW(Allocator::process().allocate_block(8, Device::cpu(), MemCategory::Buffers),
                 ds::Error);
    // -1 disarms.
    Allocator::set_fail_after(2);
    Allocator::set_fail_after(-1);
    for (int i = 0; i < 4; ++i) a.allocate_block(8, Device::cpu(), MemCategory::Buffers);
    EXPECT_EQ(a.total(), 0);
    EXPECT_EQ(a.live_allocations(), 0);
}

TEST(CoreAllocator, HugeHostAllocationIsOutOfMemory) {
    Allocator a;
    try {  // beyond int64: refused before reaching the system allocator
        a.allocate(SIZE_MAX, Device::cpu(), MemCategory::Grads);
        FAIL() << "expected out of memory";
    } catch (const ds::Error& e) {
        EXPECT_EQ(e.status(), DS_ERR_OUT_OF_MEMORY);
        EXPECT_NE(std::strstr(e.what(), "grads"), nullptr) << e.what();
    }
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    GTEST_SKIP() << "sanitizer allocators abort on huge requests instead of returning ENOMEM";
#endif
    try {
        a.allocate(SIZE_MAX / 2, Device::cpu(), MemCategory::Params);
        FAIL() << "expected out of memory";
    } catch (const ds::Error& e) {
        EXPECT_EQ(e.status(), DS_ERR_OUT_OF_MEMORY);
        EXPECT_NE(std::strstr(e.what(), "params"), nullptr) << e.what();
    }
    EXPECT_EQ(a.total(), 0);
}

#ifndef DS_WITH_CUDA
TEST(CoreAllocator, CudaWithoutCudaBuildIsUnsupported) {
    Allocator a;
    try {
        a.allocate(64, Device::cuda(0), MemCategory::Params);
        FAIL() << "expected unsupported";
    } catch (const ds::Error& e) {
        EXPECT_EQ(e.status(), DS_ERR_UNSUPPORTED);
        EXPECT_NE(std::strstr(e.what(), "this build has no CUDA"), nullptr) << e.what();
    }
    EXPECT_EQ(a.total(), 0);
}
#endif

}  // namespace
