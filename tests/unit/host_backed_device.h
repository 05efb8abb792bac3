// Host memory posing as cuda:N for the scope of a test (device_memory.h's
// set_host_backed_for_testing plus a block cache over host memory), so the
// engine's device paths run where there is no GPU. Fresh device blocks are
// filled with 0xFF bytes (NaN in every float format), so a device copy the
// engine forgot to write shows up as NaN, not as a stale right answer.
#pragma once

#include <cstdlib>
#include <cstring>

#include "core/allocator.h"
#include "core/device_block_cache.h"
#include "core/device_memory.h"
#include "core/error.h"

namespace test_device {

class HostBackedDevice {
public:
    HostBackedDevice() {
        ds::device_memory::set_host_backed_for_testing(true);
        ds::Allocator::set_device_cache_for_testing(&cache_);
    }
    ~HostBackedDevice() {
        ds::Allocator::set_device_cache_for_testing(nullptr);
        ds::device_memory::set_host_backed_for_testing(false);
    }
    HostBackedDevice(const HostBackedDevice&) = delete;
    HostBackedDevice& operator=(const HostBackedDevice&) = delete;

private:
    static void* alloc(void*, size_t bytes, int32_t, const char* what) {
        void* p = nullptr;
        if (posix_memalign(&p, 256, bytes) != 0)
            ds::fail(DS_ERR_DEVICE_OUT_OF_MEMORY, "host-backed device: out of memory for %s", what);
        std::memset(p, 0xFF, bytes);
        return p;
    }
    static void release(void*, void* p, int32_t) noexcept { std::free(p); }

    ds::DeviceBlockCache cache_{ds::DeviceMemoryOps{nullptr, alloc, release}};
};

}  // namespace test_device
