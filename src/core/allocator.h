// Allocator: host (64-byte aligned) and CUDA memory with per-category byte
// accounting. Each engine owns one; code without an engine uses
// Allocator::process(). Blocks from allocate_block() keep the accounting
// alive on their own, so they may outlive the Allocator object (a tensor
// exported through DLPack can be freed after its engine is destroyed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/device.h"

namespace ds {

enum class MemCategory : int32_t { Params, Grads, OptimizerState, Buffers, Count };

// "params", "grads", "optimizer_state", "buffers".
const char* mem_category_name(MemCategory c);

constexpr size_t kHostAlignment = 64;

namespace detail {
struct AllocatorCounters;
}
class DeviceBlockCache;

class Allocator {
public:
    Allocator();
    ~Allocator();
    Allocator(const Allocator&) = delete;
    Allocator& operator=(const Allocator&) = delete;

    // Allocates `bytes` (> 0) on `device`: host memory is 64-byte aligned;
    // CUDA memory is a block of that ordinal from the process's device block
    // cache (core/device_block_cache.h), which reuses freed blocks and calls
    // cudaMalloc on a miss. Failure throws DS_ERR_OUT_OF_MEMORY (host) or
    // DS_ERR_DEVICE_OUT_OF_MEMORY (CUDA, after the device's cached blocks
    // were released and the allocation retried once), naming the byte count
    // and category; a CUDA device in a build without CUDA throws
    // DS_ERR_UNSUPPORTED. bytes == 0 returns nullptr and counts nothing.
    void* allocate(size_t bytes, Device device, MemCategory category);
    // Returns memory from allocate() with the same bytes/device/category.
    void deallocate(void* ptr, size_t bytes, Device device, MemCategory category) noexcept;

    // allocate() whose result frees itself (with accounting) when the last
    // reference goes. bytes == 0 gives an empty pointer.
    std::shared_ptr<void> allocate_block(size_t bytes, Device device, MemCategory category);
    // Host memory page-locked for the GPU's copies (device_memory::pin): a
    // mapping of its own (whole pages, never shared with another block nor
    // cached for reuse, so no two pins overlap), counted as host bytes of
    // `category`; unpinned and unmapped when the last reference goes. For the
    // buffers a ZeRO-Offload engine copies to and from its GPU (pin_memory).
    // bytes == 0 gives an empty pointer.
    std::shared_ptr<void> allocate_pinned_block(size_t bytes, MemCategory category);

    // Live bytes and high-water marks, all devices together: the callers'
    // bytes (not rounded up, cached blocks not counted).
    int64_t bytes(MemCategory category) const;
    int64_t peak(MemCategory category) const;
    int64_t total() const;
    int64_t peak_total() const;
    // Live bytes and high-water mark per device kind, all categories together.
    int64_t bytes(Device::Kind kind) const;
    int64_t peak(Device::Kind kind) const;
    // Freed host mappings (blocks of 1 MiB or more), kept process-wide for
    // reuse by a later allocation of the same page-rounded size. Live plus
    // cached mapped bytes never exceed their high-water mark (all allocators
    // together); the cache empties when no mapped block is live, when an
    // Allocator and its blocks are gone, and on release_cached().
    static int64_t cached_host_bytes();
    // Freed CUDA blocks kept process-wide for reuse (core/device_block_cache.h),
    // all devices or one ordinal. They stay cached until release_cached(),
    // until an Allocator and its blocks are gone, or until that device runs
    // out of memory (released, then the allocation is retried).
    static int64_t cached_device_bytes();
    static int64_t cached_device_bytes(int32_t index);
    // Gives every cached host mapping and cached device block back.
    static void release_cached() noexcept;
    // Number of blocks allocated and not yet freed.
    int64_t live_allocations() const;
    // Sets every high-water mark to the current value.
    void reset_peaks();

    // Allocator for code that has no engine.
    static Allocator& process();

    // Test hook, process-wide (all allocators): with n >= 1 the n-th
    // following allocation (1 = the next) throws an out-of-memory error as if
    // the memory were exhausted; then the hook disarms. n <= 0 (e.g. -1)
    // disarms it.
    static void set_fail_after(int64_t n);
    // Test hook, process-wide: CUDA allocations use `cache` (e.g. one over a
    // fake device; then cuda:N works in a build without CUDA too) instead
    // of the process's cache over the CUDA runtime; nullptr restores it.
    // Switch only while no CUDA block is live.
    static void set_device_cache_for_testing(DeviceBlockCache* cache);

private:
    std::shared_ptr<detail::AllocatorCounters> counters_;
};

}  // namespace ds
