// Host blocks of 1 MiB or more go back to the OS when freed (core/allocator.cpp),
// so the process's resident memory follows the allocator's accounting even
// when a live block sits after the freed ones — where malloc's heap keeps
// freed chunks resident below its top (the GPT benchmark's peak RSS was
// ~78 MiB above the engine's high-water mark: docs/PERFORMANCE.md).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include <unistd.h>

#include "core/allocator.h"

namespace {

// Resident bytes of this process now (/proc/self/statm, second field, pages).
long long resident_bytes() {
    std::FILE* f = std::fopen("/proc/self/statm", "r");
    if (f == nullptr) return -1;
    long long size = 0, resident = 0;
    const int n = std::fscanf(f, "%lld %lld", &size, &resident);
    std::fclose(f);
    return n == 2 ? resident * sysconf(_SC_PAGESIZE) : -1;
}

TEST(CoreAllocatorResident, FreedLargeBlocksLeaveResidentMemory) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    GTEST_SKIP() << "under sanitizers every block comes from the heap (for the redzones)";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
    GTEST_SKIP() << "under sanitizers every block comes from the heap (for the redzones)";
#endif
#endif
    if (resident_bytes() < 0) GTEST_SKIP() << "/proc/self/statm is not readable here";
    ds::Allocator a;
    constexpr size_t kBlock = size_t{2} << 20, kCount = 32;  // 64 MiB
    // One block allocated and freed first: malloc then serves blocks of this
    // size from its heap (its mmap threshold rises to the freed size).
    void* warm = a.allocate(kBlock, ds::Device::cpu(), ds::MemCategory::Buffers);
    std::memset(warm, 1, kBlock);
    a.deallocate(warm, kBlock, ds::Device::cpu(), ds::MemCategory::Buffers);
    std::vector<void*> blocks;
    for (size_t i = 0; i < kCount; ++i) {
        blocks.push_back(a.allocate(kBlock, ds::Device::cpu(), ds::MemCategory::Buffers));
        std::memset(blocks.back(), 2, kBlock);  // resident
    }
    const long long touched = resident_bytes();
    // Free all but the last: it stays live after them.
    for (size_t i = 0; i + 1 < kCount; ++i) a.deallocate(blocks[i], kBlock, ds::Device::cpu(), ds::MemCategory::Buffers);
    const long long after = resident_bytes();
    EXPECT_GE(touched - after, static_cast<long long>((kCount - 1) * kBlock * 3 / 4))
        << "resident " << touched << " bytes with the blocks, " << after << " after freeing 31 of them";
    a.deallocate(blocks.back(), kBlock, ds::Device::cpu(), ds::MemCategory::Buffers);
    EXPECT_EQ(a.live_allocations(), 0);
}

}  // namespace
