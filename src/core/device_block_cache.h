// DeviceBlockCache: freed device (cuda:N) blocks kept for reuse, because
// cudaMalloc is slow and cudaFree synchronizes the whole device, while a
// training step asks for the same activation sizes every step. The
// Allocator (core/allocator.cpp) keeps one for the process in front of
// core/device_memory.h; the raw memory is reached through DeviceMemoryOps,
// so that tests drive the cache with a fake device on the host.
//
// Policy (docs/DESIGN.md, "Each engine owns an `Allocator`"):
// - Sizes are rounded up into bins: to 512 bytes below 1 MiB, to 2 MiB from
//   1 MiB on (round_size). 2 MiB is the page size in which the driver maps
//   large allocations, so the round-up mostly costs memory it reserves
//   anyway, and nearby large sizes share a bin; 512-byte bins keep the
//   waste of small blocks (biases, norms, scalars) small.
// - A request takes the smallest cached block of its device that is at
//   least its rounded size and at most a quarter larger (fits): a 1 KiB
//   request never holds a 1 GiB block. Blocks are never split or merged.
// - When the device is out of memory, that device's cached blocks are freed
//   and the allocation is tried once more before DS_ERR_DEVICE_OUT_OF_MEMORY.
// - Cached blocks are held until release()/release_all() (the Allocator's
//   release_cached(), also run when an Allocator and its blocks are gone) or
//   an out-of-memory retry; they are not live bytes of any Allocator.
//
// Stream safety: a block freed here may still be read or written by kernels
// queued on the stream that used it; the next owner's work is ordered after
// them only if it runs on the same stream. The cache assumes that every
// kernel touching a device's blocks runs on one stream, the engine's (the
// table of dsk_backend_cuda(stream); device_memory.h's copies are
// synchronous), so reuse is safe without events. Code that uses a block on a second stream must make that stream's
// work finish, or make the engine's stream wait for it (an event), before it
// drops the last reference to the block. Releasing to the driver is always
// safe: cudaFree waits for the device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ds {

// The raw memory under the cache. alloc throws ds::Error, with
// DS_ERR_DEVICE_OUT_OF_MEMORY when the device is full (the only status the
// cache retries on); free never fails. ctx is passed back unchanged.
struct DeviceMemoryOps {
    void* ctx = nullptr;
    void* (*alloc)(void* ctx, size_t bytes, int32_t index, const char* what) = nullptr;
    void (*free)(void* ctx, void* ptr, int32_t index) noexcept = nullptr;
};

class DeviceBlockCache {
public:
    static constexpr size_t kSmallLimit = size_t{1} << 20;    // below: 512-byte bins
    static constexpr size_t kSmallGranule = 512;
    static constexpr size_t kLargeGranule = size_t{2} << 20;  // from kSmallLimit on
    static constexpr size_t kWasteDivisor = 4;                // block <= rounded + rounded / 4

    // The bin of a request of `bytes` (1 <= bytes <= INT64_MAX).
    static size_t round_size(size_t bytes);
    // Whether a cached block of `block` bytes may serve a request whose
    // rounded size is `rounded`.
    static bool fits(size_t block, size_t rounded);

    struct Stats {
        int64_t cached_bytes = 0;   // freed blocks held for reuse
        int64_t cached_blocks = 0;
        int64_t in_use_bytes = 0;   // whole blocks handed out (rounded, so >= the callers' bytes)
        int64_t in_use_blocks = 0;
        int64_t hits = 0;           // requests served from the cache
        int64_t misses = 0;         // requests that went to ops.alloc
        int64_t oom_releases = 0;   // out-of-memory retries (each released the device's cache)
    };

    explicit DeviceBlockCache(DeviceMemoryOps ops);
    // Frees the cached blocks; blocks still handed out are not freed.
    ~DeviceBlockCache();
    DeviceBlockCache(const DeviceBlockCache&) = delete;
    DeviceBlockCache& operator=(const DeviceBlockCache&) = delete;

    // A block of at least `bytes` (>= 1) on device `index`; `what` names the
    // use in errors (the Allocator passes the category). Out of memory even
    // after releasing the device's cached blocks: DS_ERR_DEVICE_OUT_OF_MEMORY
    // naming bytes, `what`, the device and the bytes released; other errors
    // of ops.alloc pass through.
    void* allocate(size_t bytes, int32_t index, const char* what);
    // Takes back a block from allocate() (its size and device are
    // remembered); nullptr is ignored.
    void deallocate(void* ptr) noexcept;

    // Frees device `index`'s cached blocks (all devices') to the raw memory;
    // returns the bytes freed.
    int64_t release(int32_t index) noexcept;
    int64_t release_all() noexcept;

    int64_t cached_bytes(int32_t index) const;
    int64_t cached_bytes() const;  // all devices
    Stats stats(int32_t index) const;

private:
    struct Bins {
        std::multimap<size_t, void*> free;  // block size -> block
        Stats stats;
    };
    struct Live {
        size_t size;
        int32_t index;
    };

    void* raw_alloc_retrying(size_t bytes, size_t rounded, int32_t index, const char* what);
    std::vector<std::pair<void*, int32_t>> take_cached(int32_t index);  // caller holds mu_; index < 0: all
    void free_raw(const std::vector<std::pair<void*, int32_t>>& blocks) noexcept;

    DeviceMemoryOps ops_;
    mutable std::mutex mu_;
    std::map<int32_t, Bins> devices_;
    std::unordered_map<void*, Live> live_;
};

}  // namespace ds
