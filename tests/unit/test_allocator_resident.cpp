// Host blocks of 1 MiB or more are mapped from the OS (core/allocator.cpp):
// freed ones are kept for reuse by the next allocation of the same size (no
// fresh zeroed pages each training step), but live plus cached bytes never
// exceed the host high-water mark, so the process's resident memory follows
// the allocator's accounting even when a live block sits after the freed
// ones — where malloc's heap keeps freed chunks resident below its top (the
// GPT benchmark's peak RSS was ~78 MiB above the engine's high-water mark:
// docs/PERFORMANCE.md).
#include <gtest/gtest.h>

#include <algorithm>
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

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define DS_HEAP_ONLY 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define DS_HEAP_ONLY 1
#endif
#endif

constexpr size_t kBlock = size_t{2} << 20;
constexpr size_t kCount = 32;  // 64 MiB
const ds::Device kCpu = ds::Device::cpu();
constexpr ds::MemCategory kCat = ds::MemCategory::Buffers;

// The same sizes again (a training step's activations) get the cached
// mappings back: the same addresses, no new resident memory.
TEST(CoreAllocatorResident, FreedBlocksOfTheSameSizeAreReused) {
#ifdef DS_HEAP_ONLY
    GTEST_SKIP() << "under sanitizers every block comes from the heap (for the redzones)";
#endif
    if (resident_bytes() < 0) GTEST_SKIP() << "/proc/self/statm is not readable here";
    ds::Allocator::release_cached();
    ds::Allocator a;
    // A block that stays live throughout (a model's parameters): with no
    // mapped block live the cache empties itself.
    void* params = a.allocate(kBlock, kCpu, kCat);
    std::vector<void*> first;
    for (size_t i = 0; i < kCount; ++i) {
        first.push_back(a.allocate(kBlock, kCpu, kCat));
        std::memset(first.back(), 2, kBlock);
    }
    for (void* p : first) a.deallocate(p, kBlock, kCpu, kCat);
    EXPECT_EQ(a.cached_host_bytes(), static_cast<int64_t>(kCount * kBlock));
    const long long before = resident_bytes();
    std::vector<void*> second;
    for (size_t i = 0; i < kCount; ++i) {
        second.push_back(a.allocate(kBlock, kCpu, kCat));
        std::memset(second.back(), 3, kBlock);
    }
    const long long after = resident_bytes();
    std::sort(first.begin(), first.end());
    std::vector<void*> sorted = second;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(first, sorted) << "the second round should reuse the first round's mappings";
    EXPECT_EQ(a.cached_host_bytes(), 0);
    EXPECT_LE(after - before, static_cast<long long>(2 * kBlock)) << "resident " << before << " -> " << after;
    for (void* p : second) a.deallocate(p, kBlock, kCpu, kCat);
    EXPECT_EQ(a.cached_host_bytes(), static_cast<int64_t>(kCount * kBlock));
    a.deallocate(params, kBlock, kCpu, kCat);
    EXPECT_EQ(a.cached_host_bytes(), 0) << "the last live mapping gone: the cache is given back";
    EXPECT_EQ(a.live_allocations(), 0);
}

// Freed blocks of a size nobody asks for again do not hold memory beyond
// the high-water mark: a new size unmaps them first.
TEST(CoreAllocatorResident, CacheNeverHoldsMoreThanTheHighWaterMark) {
#ifdef DS_HEAP_ONLY
    GTEST_SKIP() << "under sanitizers every block comes from the heap (for the redzones)";
#endif
    if (resident_bytes() < 0) GTEST_SKIP() << "/proc/self/statm is not readable here";
    ds::Allocator::release_cached();
    ds::Allocator a;
    // One block allocated and freed first: malloc would then serve blocks of
    // this size from its heap (its mmap threshold rises to the freed size).
    void* warm = a.allocate(kBlock, kCpu, kCat);
    std::memset(warm, 1, kBlock);
    a.deallocate(warm, kBlock, kCpu, kCat);
    std::vector<void*> blocks;
    for (size_t i = 0; i < kCount; ++i) {
        blocks.push_back(a.allocate(kBlock, kCpu, kCat));
        std::memset(blocks.back(), 2, kBlock);  // resident
    }
    const long long touched = resident_bytes();
    // Free all but the last: it stays live after them.
    for (size_t i = 0; i + 1 < kCount; ++i) a.deallocate(blocks[i], kBlock, kCpu, kCat);
    EXPECT_LE(ds::Allocator::cached_host_bytes() + a.bytes(ds::Device::Kind::CPU), a.peak(ds::Device::Kind::CPU));
    // A block of another size, as large as the freed ones together.
    const size_t big = (kCount - 1) * kBlock + 4096;
    void* other = a.allocate(big, kCpu, kCat);
    std::memset(other, 4, big);
    const long long after = resident_bytes();
    EXPECT_LE(ds::Allocator::cached_host_bytes() + a.bytes(ds::Device::Kind::CPU), a.peak(ds::Device::Kind::CPU));
    EXPECT_LE(after - touched, static_cast<long long>(4 * kBlock))
        << "resident " << touched << " bytes with the blocks, " << after
        << " after freeing 31 of them and touching a new 62 MiB block";
    a.deallocate(other, big, kCpu, kCat);
    const long long cached = resident_bytes();
    ASSERT_GT(a.cached_host_bytes(), 0);
    ds::Allocator::release_cached();
    EXPECT_EQ(a.cached_host_bytes(), 0);
    EXPECT_GE(cached - resident_bytes(), static_cast<long long>(big * 3 / 4))
        << "release_cached should give the mappings back to the OS";
    a.deallocate(blocks.back(), kBlock, kCpu, kCat);
    EXPECT_EQ(a.live_allocations(), 0);
}

}  // namespace
