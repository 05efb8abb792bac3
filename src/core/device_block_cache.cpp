#include "core/device_block_cache.h"

#include "core/error.h"

namespace ds {

size_t DeviceBlockCache::round_size(size_t bytes) {
    const size_t g = bytes < kSmallLimit ? kSmallGranule : kLargeGranule;
    return (bytes + g - 1) / g * g;  // bytes <= INT64_MAX: no overflow
}

bool DeviceBlockCache::fits(size_t block, size_t rounded) {
    return block >= rounded && block - rounded <= rounded / kWasteDivisor;
}

DeviceBlockCache::DeviceBlockCache(DeviceMemoryOps ops) : ops_(ops) {}

DeviceBlockCache::~DeviceBlockCache() { release_all(); }

void* DeviceBlockCache::allocate(size_t bytes, int32_t index, const char* what) {
    DS_CHECK(index >= 0, DS_ERR_INVALID_ARGUMENT, "allocating %zu bytes for %s on cuda:%d: negative device ordinal",
             bytes, what, index);
    const size_t rounded = round_size(bytes);
    {
        std::lock_guard<std::mutex> lock(mu_);
        Bins& dev = devices_[index];
        auto it = dev.free.lower_bound(rounded);  // the smallest block that is large enough
        if (it != dev.free.end() && fits(it->first, rounded)) {
            const size_t size = it->first;
            void* p = it->second;
            live_.emplace(p, Live{size, index});  // may throw: the block is still cached
            dev.free.erase(it);
            const int64_t n = static_cast<int64_t>(size);
            dev.stats.cached_bytes -= n;
            dev.stats.cached_blocks -= 1;
            dev.stats.in_use_bytes += n;
            dev.stats.in_use_blocks += 1;
            dev.stats.hits += 1;
            return p;
        }
        dev.stats.misses += 1;
    }
    // Not under the lock: cudaMalloc is slow and may wait for the device.
    void* p = raw_alloc_retrying(bytes, rounded, index, what);
    try {
        std::lock_guard<std::mutex> lock(mu_);
        live_.emplace(p, Live{rounded, index});
        Bins& dev = devices_[index];
        dev.stats.in_use_bytes += static_cast<int64_t>(rounded);
        dev.stats.in_use_blocks += 1;
    } catch (...) {  // no host memory for the bookkeeping
        ops_.free(ops_.ctx, p, index);
        throw;
    }
    return p;
}

void* DeviceBlockCache::raw_alloc_retrying(size_t bytes, size_t rounded, int32_t index, const char* what) {
    try {
        return ops_.alloc(ops_.ctx, rounded, index, what);
    } catch (const Error& e) {
        if (e.status() != DS_ERR_DEVICE_OUT_OF_MEMORY) throw;
    }
    // The device is full: the blocks cached for other sizes go back to the
    // driver and the request is tried once more. Always retried, even when
    // this thread released nothing: another thread may have just done so.
    std::vector<std::pair<void*, int32_t>> blocks;
    int64_t released = 0;
    int64_t in_use = 0;
    {
        std::lock_guard<std::mutex> lock(mu_);
        Bins& dev = devices_[index];
        released = dev.stats.cached_bytes;
        blocks = take_cached(index);
        dev.stats.oom_releases += 1;
        in_use = dev.stats.in_use_bytes;
    }
    free_raw(blocks);
    try {
        return ops_.alloc(ops_.ctx, rounded, index, what);
    } catch (const Error& e) {
        if (e.status() != DS_ERR_DEVICE_OUT_OF_MEMORY) throw;
    }
    fail(DS_ERR_DEVICE_OUT_OF_MEMORY,
         "out of memory on cuda:%d allocating %zu bytes for %s (a block of %zu bytes; %lld cached bytes on cuda:%d "
         "were released and the allocation retried once; %lld bytes in blocks in use there)",
         index, bytes, what, rounded, static_cast<long long>(released), index, static_cast<long long>(in_use));
}

void DeviceBlockCache::deallocate(void* ptr) noexcept {
    if (ptr == nullptr) return;
    int32_t index = 0;
    {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = live_.find(ptr);
        if (it == live_.end()) return;  // not ours (a caller's bug): nothing safe to do with it
        const size_t size = it->second.size;
        index = it->second.index;
        live_.erase(it);
        Bins& dev = devices_.find(index)->second;  // exists: allocate() made it
        const int64_t n = static_cast<int64_t>(size);
        dev.stats.in_use_bytes -= n;
        dev.stats.in_use_blocks -= 1;
        try {
            dev.free.emplace(size, ptr);
            dev.stats.cached_bytes += n;
            dev.stats.cached_blocks += 1;
            return;
        } catch (...) {
            // No host memory for the map node: the block goes back to the driver.
        }
    }
    ops_.free(ops_.ctx, ptr, index);
}

std::vector<std::pair<void*, int32_t>> DeviceBlockCache::take_cached(int32_t index) {
    std::vector<std::pair<void*, int32_t>> out;
    for (auto& [dev_index, dev] : devices_) {
        if (index >= 0 && dev_index != index) continue;
        try {
            out.reserve(out.size() + dev.free.size());
        } catch (...) {
            continue;  // no host memory for the list: these stay cached
        }
        for (auto& b : dev.free) out.emplace_back(b.second, dev_index);
        dev.free.clear();
        dev.stats.cached_bytes = 0;
        dev.stats.cached_blocks = 0;
    }
    return out;
}

void DeviceBlockCache::free_raw(const std::vector<std::pair<void*, int32_t>>& blocks) noexcept {
    for (const auto& b : blocks) ops_.free(ops_.ctx, b.first, b.second);
}

int64_t DeviceBlockCache::release(int32_t index) noexcept {
    std::vector<std::pair<void*, int32_t>> blocks;
    int64_t bytes = 0;
    {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = devices_.find(index);
        if (it == devices_.end()) return 0;
        const int64_t before = it->second.stats.cached_bytes;
        blocks = take_cached(index);
        bytes = before - it->second.stats.cached_bytes;
    }
    free_raw(blocks);
    return bytes;
}

int64_t DeviceBlockCache::release_all() noexcept {
    std::vector<std::pair<void*, int32_t>> blocks;
    int64_t bytes = 0;
    {
        std::lock_guard<std::mutex> lock(mu_);
        for (const auto& d : devices_) bytes += d.second.stats.cached_bytes;
        blocks = take_cached(-1);
        for (const auto& d : devices_) bytes -= d.second.stats.cached_bytes;
    }
    free_raw(blocks);
    return bytes;
}

int64_t DeviceBlockCache::cached_bytes(int32_t index) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = devices_.find(index);
    return it == devices_.end() ? 0 : it->second.stats.cached_bytes;
}

int64_t DeviceBlockCache::cached_bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    int64_t n = 0;
    for (const auto& d : devices_) n += d.second.stats.cached_bytes;
    return n;
}

DeviceBlockCache::Stats DeviceBlockCache::stats(int32_t index) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = devices_.find(index);
    return it == devices_.end() ? Stats{} : it->second.stats;
}

}  // namespace ds
