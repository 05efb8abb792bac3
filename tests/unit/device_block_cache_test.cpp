// DeviceBlockCache (core/device_block_cache.h) over a fake device: host
// malloc behind DeviceMemoryOps, with counters, a capacity per ordinal and
// injectable failures, so every policy is checked without a GPU: bins,
// reuse, the waste bound, release-then-retry on out of memory,
// release_cached, per-device separation, concurrent use (DeviceBlockCacheThreads,
// also run under ThreadSanitizer: label threads in tests/CMakeLists.txt),
// and the Allocator's per-category counters with the cache under them.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/allocator.h"
#include "core/device_block_cache.h"
#include "core/error.h"

namespace {

using ds::DeviceBlockCache;

constexpr size_t MiB = size_t{1} << 20;

// A device in host memory. Each ordinal has `capacity` bytes; beyond that
// (or when fail_next > 0) alloc throws DS_ERR_DEVICE_OUT_OF_MEMORY, or
// fail_status if set.
struct FakeDevice {
    std::mutex mu;
    std::map<void*, std::pair<size_t, int32_t>> blocks;  // live raw blocks
    std::map<int32_t, int64_t> used;
    int64_t capacity = INT64_MAX;
    int fail_next = 0;
    ds_status_t fail_status = DS_ERR_DEVICE_OUT_OF_MEMORY;
    int64_t allocs = 0;
    int64_t frees = 0;
    int64_t failures = 0;
    int64_t wrong_index_frees = 0;  // freed with another ordinal than allocated on

    static void* alloc_fn(void* ctx, size_t bytes, int32_t index, const char* what) {
        auto* d = static_cast<FakeDevice*>(ctx);
        std::lock_guard<std::mutex> lock(d->mu);
        if (d->fail_next > 0 || d->used[index] + static_cast<int64_t>(bytes) > d->capacity) {
            if (d->fail_next > 0) --d->fail_next;
            ++d->failures;
            ds::fail(d->fail_status, "fake cuda:%d cannot hold %zu more bytes for %s", index, bytes, what);
        }
        void* p = std::malloc(bytes);
        if (p == nullptr) ds::fail(DS_ERR_OUT_OF_MEMORY, "host malloc of %zu bytes", bytes);
        d->blocks[p] = {bytes, index};
        d->used[index] += static_cast<int64_t>(bytes);
        ++d->allocs;
        return p;
    }
    static void free_fn(void* ctx, void* ptr, int32_t index) noexcept {
        auto* d = static_cast<FakeDevice*>(ctx);
        std::lock_guard<std::mutex> lock(d->mu);
        auto it = d->blocks.find(ptr);
        if (it == d->blocks.end()) return;  // counted as a leak by the tests
        if (it->second.second != index) ++d->wrong_index_frees;
        d->used[it->second.second] -= static_cast<int64_t>(it->second.first);
        d->blocks.erase(it);
        ++d->frees;
        std::free(ptr);
    }
    ds::DeviceMemoryOps ops() { return ds::DeviceMemoryOps{this, &alloc_fn, &free_fn}; }

    int64_t live() {
        std::lock_guard<std::mutex> lock(mu);
        return static_cast<int64_t>(blocks.size());
    }
    int64_t used_on(int32_t index) {
        std::lock_guard<std::mutex> lock(mu);
        return used[index];
    }
};

TEST(DeviceBlockCache, SizesRoundUpTo512BytesBelow1MiBAnd2MiBAbove) {
    EXPECT_EQ(DeviceBlockCache::round_size(1), 512u);
    EXPECT_EQ(DeviceBlockCache::round_size(512), 512u);
    EXPECT_EQ(DeviceBlockCache::round_size(513), 1024u);
    EXPECT_EQ(DeviceBlockCache::round_size(MiB - 1), MiB);
    EXPECT_EQ(DeviceBlockCache::round_size(MiB), 2 * MiB);
    EXPECT_EQ(DeviceBlockCache::round_size(2 * MiB), 2 * MiB);
    EXPECT_EQ(DeviceBlockCache::round_size(2 * MiB + 1), 4 * MiB);
    EXPECT_EQ(DeviceBlockCache::round_size(static_cast<size_t>(INT64_MAX)) % (2 * MiB), 0u);
    // The waste bound: at most a quarter above the rounded request.
    EXPECT_TRUE(DeviceBlockCache::fits(8 * MiB, 8 * MiB));
    EXPECT_TRUE(DeviceBlockCache::fits(10 * MiB, 8 * MiB));
    EXPECT_FALSE(DeviceBlockCache::fits(12 * MiB, 8 * MiB));
    EXPECT_FALSE(DeviceBlockCache::fits(6 * MiB, 8 * MiB));
    EXPECT_FALSE(DeviceBlockCache::fits(1024, 512));
    EXPECT_FALSE(DeviceBlockCache::fits(256 * MiB, 1024));
}

TEST(DeviceBlockCache, FreedBlocksOfTheSameBinAreReused) {
    FakeDevice dev;
    {
        DeviceBlockCache cache(dev.ops());
        void* a = cache.allocate(1000, 0, "params");
        EXPECT_EQ(dev.allocs, 1);
        std::memset(a, 1, 1000);
        cache.deallocate(a);
        EXPECT_EQ(cache.cached_bytes(0), 1024);
        EXPECT_EQ(dev.frees, 0) << "a freed block is kept, not given to the driver";
        void* b = cache.allocate(900, 0, "params");  // same 1024-byte bin
        EXPECT_EQ(b, a);
        EXPECT_EQ(dev.allocs, 1);
        EXPECT_EQ(cache.cached_bytes(0), 0);
        void* c = cache.allocate(1500, 0, "params");  // another bin: a fresh block
        EXPECT_NE(c, a);
        EXPECT_EQ(dev.allocs, 2);
        DeviceBlockCache::Stats s = cache.stats(0);
        EXPECT_EQ(s.hits, 1);
        EXPECT_EQ(s.misses, 2);
        EXPECT_EQ(s.in_use_blocks, 2);
        EXPECT_EQ(s.in_use_bytes, 1024 + 1536);
        cache.deallocate(b);
        cache.deallocate(c);
        cache.deallocate(nullptr);
        EXPECT_THROW(cache.allocate(16, -1, "params"), ds::Error);
        EXPECT_EQ(cache.stats(0).cached_blocks, 2);
        EXPECT_EQ(cache.cached_bytes(), 1024 + 1536);
    }
    EXPECT_EQ(dev.frees, 2) << "destroying the cache frees its cached blocks";
    EXPECT_EQ(dev.live(), 0);
}

TEST(DeviceBlockCache, ARequestTakesTheSmallestFittingBlockWithinTheWasteBound) {
    FakeDevice dev;
    DeviceBlockCache cache(dev.ops());
    void* big = cache.allocate(256 * MiB, 0, "buffers");
    void* b10 = cache.allocate(10 * MiB, 0, "buffers");
    void* b8 = cache.allocate(8 * MiB, 0, "buffers");
    cache.deallocate(big);
    cache.deallocate(b10);
    cache.deallocate(b8);
    ASSERT_EQ(dev.allocs, 3);

    // 1 KiB never takes the 256 MiB block, nor 6 MiB the 8 MiB one (8 > 6 + 6/4).
    void* small = cache.allocate(1024, 0, "buffers");
    EXPECT_TRUE(small != big && small != b10 && small != b8);
    void* six = cache.allocate(6 * MiB, 0, "buffers");
    EXPECT_TRUE(six != b8 && six != b10);
    EXPECT_EQ(dev.allocs, 5);
    // 8 MiB: the exact block first, then the 10 MiB one (within a quarter).
    void* e1 = cache.allocate(8 * MiB - 100, 0, "buffers");
    EXPECT_EQ(e1, b8);
    void* e2 = cache.allocate(8 * MiB, 0, "buffers");
    EXPECT_EQ(e2, b10);
    EXPECT_EQ(dev.allocs, 5);
    EXPECT_EQ(cache.stats(0).in_use_bytes, static_cast<int64_t>(1024 + 6 * MiB + 8 * MiB + 10 * MiB));
    // The block's own size comes back to the cache, not the request's.
    const int64_t before = cache.cached_bytes(0);
    cache.deallocate(e2);
    EXPECT_EQ(cache.cached_bytes(0) - before, static_cast<int64_t>(10 * MiB));
    for (void* p : {small, six, e1}) cache.deallocate(p);
    EXPECT_EQ(cache.stats(0).in_use_bytes, 0);
    EXPECT_EQ(cache.release_all(), static_cast<int64_t>(256 * MiB + 10 * MiB + 8 * MiB + 6 * MiB + 1024));
    EXPECT_EQ(dev.live(), 0);
}

TEST(DeviceBlockCache, OutOfMemoryReleasesTheCacheAndRetriesOnce) {
    FakeDevice dev;
    dev.capacity = static_cast<int64_t>(8 * MiB);
    DeviceBlockCache cache(dev.ops());
    void* a = cache.allocate(2 * MiB, 0, "grads");
    void* b = cache.allocate(2 * MiB, 0, "grads");
    cache.deallocate(a);
    cache.deallocate(b);
    ASSERT_EQ(dev.used_on(0), static_cast<int64_t>(4 * MiB));
    // 6 MiB does not fit next to the 4 cached ones: they go, the retry succeeds.
    void* c = cache.allocate(6 * MiB, 0, "grads");
    EXPECT_NE(c, nullptr);
    EXPECT_EQ(dev.failures, 1);
    EXPECT_EQ(dev.frees, 2);
    EXPECT_EQ(cache.cached_bytes(0), 0);
    EXPECT_EQ(cache.stats(0).oom_releases, 1);

    // Still too large after the release: DS_ERR_DEVICE_OUT_OF_MEMORY naming
    // the request, the category and what was released.
    void* d = cache.allocate(2 * MiB, 0, "grads");
    cache.deallocate(d);  // 2 MiB cached, 8 MiB used
    try {
        cache.allocate(4000000, 0, "optimizer_state");
        FAIL() << "expected out of memory";
    } catch (const ds::Error& e) {
        EXPECT_EQ(e.status(), DS_ERR_DEVICE_OUT_OF_MEMORY);
        EXPECT_STREQ(e.what(),
                     "out of memory on cuda:0 allocating 4000000 bytes for optimizer_state (a block of 4194304 "
                     "bytes; 2097152 cached bytes on cuda:0 were released and the allocation retried once; "
                     "6291456 bytes in blocks in use there)");
    }
    EXPECT_EQ(dev.failures, 3);  // the first try and the one retry
    EXPECT_EQ(cache.cached_bytes(0), 0);
    EXPECT_EQ(cache.stats(0).in_use_blocks, 1);

    // Any other failure passes through as it is, and the cache is kept.
    void* e = cache.allocate(1024, 0, "buffers");
    cache.deallocate(e);
    dev.fail_next = 1;
    dev.fail_status = DS_ERR_DEVICE;
    try {
        cache.allocate(4096, 0, "buffers");
        FAIL() << "expected a device error";
    } catch (const ds::Error& err) {
        EXPECT_EQ(err.status(), DS_ERR_DEVICE);
    }
    EXPECT_EQ(cache.cached_bytes(0), 1024);
    EXPECT_EQ(cache.stats(0).oom_releases, 2);

    // One injected out-of-memory: the retry (with nothing cached to release) succeeds.
    dev.fail_status = DS_ERR_DEVICE_OUT_OF_MEMORY;
    dev.fail_next = 1;
    cache.deallocate(c);
    cache.release(0);
    void* f = cache.allocate(3 * MiB, 0, "buffers");
    EXPECT_NE(f, nullptr);
    cache.deallocate(f);
    cache.release_all();
    EXPECT_EQ(dev.live(), 0);
}

TEST(DeviceBlockCache, DevicesAreSeparate) {
    FakeDevice dev;
    dev.capacity = static_cast<int64_t>(8 * MiB);
    DeviceBlockCache cache(dev.ops());
    void* a0 = cache.allocate(4 * MiB, 0, "params");
    void* a1 = cache.allocate(4 * MiB, 1, "params");
    cache.deallocate(a0);
    EXPECT_EQ(cache.cached_bytes(0), static_cast<int64_t>(4 * MiB));
    EXPECT_EQ(cache.cached_bytes(1), 0);
    // cuda:1 never gets cuda:0's block.
    void* b1 = cache.allocate(4 * MiB, 1, "params");
    EXPECT_NE(b1, a0);
    EXPECT_EQ(cache.cached_bytes(0), static_cast<int64_t>(4 * MiB));
    cache.deallocate(a1);
    EXPECT_EQ(cache.cached_bytes(1), static_cast<int64_t>(4 * MiB));
    EXPECT_EQ(cache.cached_bytes(), static_cast<int64_t>(8 * MiB));
    // cuda:1 full (4 live + 4 cached) and the cached block too large for
    // 2 MiB (4 > 2 + 2/4): only cuda:1's cache is released.
    void* c1 = cache.allocate(2 * MiB, 1, "params");
    EXPECT_EQ(cache.stats(1).hits, 0);
    EXPECT_EQ(cache.cached_bytes(1), 0);
    EXPECT_EQ(cache.cached_bytes(0), static_cast<int64_t>(4 * MiB));
    EXPECT_EQ(cache.stats(0).oom_releases, 0);
    EXPECT_EQ(cache.stats(1).oom_releases, 1);
    // release(index) empties that ordinal only.
    cache.deallocate(b1);
    EXPECT_EQ(cache.release(0), static_cast<int64_t>(4 * MiB));
    EXPECT_EQ(cache.cached_bytes(1), static_cast<int64_t>(4 * MiB));
    EXPECT_EQ(cache.release(7), 0);
    cache.deallocate(c1);
    EXPECT_EQ(cache.release_all(), static_cast<int64_t>(6 * MiB));
    EXPECT_EQ(dev.live(), 0);
    EXPECT_EQ(dev.wrong_index_frees, 0);
}

// Several threads allocate, write, check and free blocks of a few sizes on
// two ordinals while one thread releases the cache now and then; the device
// is small enough that out-of-memory retries happen too. A block handed to
// two owners at once would show as a tag overwritten by another thread.
TEST(DeviceBlockCacheThreads, ConcurrentAllocateFreeAndRelease) {
    FakeDevice dev;
    dev.capacity = static_cast<int64_t>(48 * MiB);
    std::atomic<int64_t> overwritten{0}, ooms{0}, done{0};
    {
        DeviceBlockCache cache(dev.ops());
        constexpr int kThreads = 6;
        constexpr int kIters = 3000;
        const size_t sizes[] = {64, 1000, 4096, 100000, MiB, 3 * MiB, 5 * MiB};
        std::vector<std::thread> threads;
        for (int t = 0; t < kThreads; ++t) {
            threads.emplace_back([&, t] {
                std::mt19937 rng(static_cast<unsigned>(t) * 7919u + 1u);
                struct Held {
                    void* p;
                    uint64_t tag;
                };
                std::vector<Held> held;
                for (int i = 0; i < kIters; ++i) {
                    if (held.size() < 4 && (rng() % 3 != 0 || held.empty())) {
                        const size_t n = sizes[rng() % (sizeof(sizes) / sizeof(sizes[0]))];
                        const int32_t index = static_cast<int32_t>(rng() % 2);
                        void* p = nullptr;
                        try {
                            p = cache.allocate(n, index, "buffers");
                        } catch (const ds::Error& e) {
                            if (e.status() == DS_ERR_DEVICE_OUT_OF_MEMORY) {
                                ++ooms;
                                continue;
                            }
                            throw;
                        }
                        const uint64_t tag = (static_cast<uint64_t>(t) << 32) | static_cast<uint64_t>(i);
                        std::memcpy(p, &tag, sizeof tag);
                        held.push_back({p, tag});
                    } else {
                        const size_t k = rng() % held.size();
                        uint64_t seen = 0;
                        std::memcpy(&seen, held[k].p, sizeof seen);
                        if (seen != held[k].tag) ++overwritten;
                        cache.deallocate(held[k].p);
                        held.erase(held.begin() + static_cast<std::ptrdiff_t>(k));
                    }
                }
                for (const Held& h : held) cache.deallocate(h.p);
                ++done;
            });
        }
        std::thread releaser([&] {
            while (done.load() < kThreads) {
                cache.release(0);
                (void)cache.cached_bytes();
                (void)cache.stats(1);
                std::this_thread::yield();
                cache.release_all();
            }
        });
        for (auto& th : threads) th.join();
        releaser.join();
        EXPECT_EQ(cache.stats(0).in_use_blocks, 0);
        EXPECT_EQ(cache.stats(1).in_use_blocks, 0);
        EXPECT_EQ(cache.stats(0).in_use_bytes, 0);
        EXPECT_EQ(dev.live(), cache.stats(0).cached_blocks + cache.stats(1).cached_blocks);
    }
    EXPECT_EQ(overwritten.load(), 0) << "a block was handed to two owners at once";
    EXPECT_EQ(dev.live(), 0);
    EXPECT_EQ(dev.allocs, dev.frees);
    EXPECT_EQ(dev.wrong_index_frees, 0);
    std::printf("device block cache threads: %lld raw allocations, %lld out-of-memory failures seen by callers\n",
                static_cast<long long>(dev.allocs), static_cast<long long>(ooms.load()));
}

// The Allocator over a cache of the fake device: its counters count the
// callers' bytes exactly as without a cache (cached bytes are not live).
struct TestDeviceCache {
    FakeDevice dev;
    DeviceBlockCache cache{dev.ops()};
    TestDeviceCache() { ds::Allocator::set_device_cache_for_testing(&cache); }
    ~TestDeviceCache() {
        ds::Allocator::set_device_cache_for_testing(nullptr);
        ds::Allocator::set_fail_after(-1);
    }
};

TEST(DeviceBlockCacheAllocator, CountersCountTheCallersBytesNotTheCachedOnes) {
    TestDeviceCache t;
    using ds::Allocator;
    using ds::Device;
    using ds::MemCategory;
    Allocator a;
    const Device d0 = Device::cuda(0), d1 = Device::cuda(1);
    void* p = a.allocate(1000, d0, MemCategory::Params);
    void* g = a.allocate(3 * MiB + 5, d0, MemCategory::Grads);
    EXPECT_EQ(a.bytes(MemCategory::Params), 1000);
    EXPECT_EQ(a.bytes(MemCategory::Grads), static_cast<int64_t>(3 * MiB + 5));
    EXPECT_EQ(a.bytes(Device::Kind::CUDA), static_cast<int64_t>(1000 + 3 * MiB + 5));
    EXPECT_EQ(a.bytes(Device::Kind::CPU), 0);
    EXPECT_EQ(a.live_allocations(), 2);
    a.deallocate(g, 3 * MiB + 5, d0, MemCategory::Grads);
    EXPECT_EQ(a.bytes(MemCategory::Grads), 0);
    EXPECT_EQ(a.peak(MemCategory::Grads), static_cast<int64_t>(3 * MiB + 5));
    EXPECT_EQ(a.total(), 1000);
    EXPECT_EQ(Allocator::cached_device_bytes(), static_cast<int64_t>(4 * MiB));
    EXPECT_EQ(Allocator::cached_device_bytes(0), static_cast<int64_t>(4 * MiB));
    EXPECT_EQ(Allocator::cached_device_bytes(1), 0);

    // The same size again: the cached block, no new device memory, and the
    // counters move by the caller's bytes.
    void* g2 = a.allocate(3 * MiB + 5, d0, MemCategory::Grads);
    EXPECT_EQ(g2, g);
    EXPECT_EQ(t.dev.allocs, 2);
    EXPECT_EQ(a.bytes(MemCategory::Grads), static_cast<int64_t>(3 * MiB + 5));
    EXPECT_EQ(a.peak_total(), static_cast<int64_t>(1000 + 3 * MiB + 5));
    EXPECT_EQ(Allocator::cached_device_bytes(), 0);
    {
        std::shared_ptr<void> blk = a.allocate_block(512, d1, MemCategory::Buffers);
        EXPECT_EQ(a.bytes(MemCategory::Buffers), 512);
        EXPECT_EQ(a.bytes(Device::Kind::CUDA), static_cast<int64_t>(1000 + 3 * MiB + 5 + 512));
    }
    EXPECT_EQ(a.bytes(MemCategory::Buffers), 0);
    EXPECT_EQ(Allocator::cached_device_bytes(1), 512);

    // The fail-after hook still fails CUDA allocations, before the cache.
    Allocator::set_fail_after(1);
    try {
        a.allocate(777, d0, MemCategory::OptimizerState);
        FAIL() << "expected the injected failure";
    } catch (const ds::Error& e) {
        EXPECT_EQ(e.status(), DS_ERR_DEVICE_OUT_OF_MEMORY);
        EXPECT_STREQ(e.what(), "out of memory on cuda:0 allocating 777 bytes for optimizer_state (injected failure)");
    }
    // A real out-of-memory names the category, and nothing is counted for it.
    t.dev.capacity = static_cast<int64_t>(8 * MiB);
    try {
        a.allocate(16 * MiB, d1, MemCategory::OptimizerState);
        FAIL() << "expected out of memory";
    } catch (const ds::Error& e) {
        EXPECT_EQ(e.status(), DS_ERR_DEVICE_OUT_OF_MEMORY);
        EXPECT_NE(std::strstr(e.what(), "16777216 bytes for optimizer_state"), nullptr) << e.what();
        EXPECT_NE(std::strstr(e.what(), "512 cached bytes on cuda:1 were released"), nullptr) << e.what();
    }
    EXPECT_EQ(a.bytes(MemCategory::OptimizerState), 0);
    EXPECT_EQ(Allocator::cached_device_bytes(1), 0);

    a.deallocate(g2, 3 * MiB + 5, d0, MemCategory::Grads);
    a.deallocate(p, 1000, d0, MemCategory::Params);
    EXPECT_EQ(a.total(), 0);
    EXPECT_EQ(a.live_allocations(), 0);
    EXPECT_GT(Allocator::cached_device_bytes(), 0);
    Allocator::release_cached();
    EXPECT_EQ(Allocator::cached_device_bytes(), 0);
    EXPECT_EQ(t.dev.live(), 0);
}

TEST(DeviceBlockCacheAllocator, AnAllocatorGoneWithItsBlocksEmptiesTheCache) {
    TestDeviceCache t;
    {
        ds::Allocator a;
        a.allocate_block(4096, ds::Device::cuda(0), ds::MemCategory::Buffers);  // freed at once: cached
        EXPECT_EQ(ds::Allocator::cached_device_bytes(0), 4096);
    }
    EXPECT_EQ(ds::Allocator::cached_device_bytes(0), 0);
    EXPECT_EQ(t.dev.live(), 0);
}

}  // namespace
