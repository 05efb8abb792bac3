// Host memory posing as cuda:N for the scope of a test (device_memory.h's
// set_host_backed_for_testing plus a block cache over host memory), so the
// engine's device paths run where there is no GPU. Fresh device blocks are
// filled with 0xFF bytes (NaN in every float format), so a device copy the
// engine forgot to write shows up as NaN, not as a stale right answer.
// It also sees every copy: how many went to device memory and how many
// bytes, and it can make the n-th next copy to the device fail.
#pragma once

#include <cstdlib>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

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
        active() = this;
        ds::device_memory::set_copy_hook_for_testing(on_copy);
        ds::device_memory::set_order_hook_for_testing(on_order);
    }
    ~HostBackedDevice() {
        ds::device_memory::set_order_hook_for_testing(nullptr);
        ds::device_memory::set_copy_hook_for_testing(nullptr);
        active() = nullptr;
        ds::Allocator::set_device_cache_for_testing(nullptr);
        ds::device_memory::set_host_backed_for_testing(false);
    }
    HostBackedDevice(const HostBackedDevice&) = delete;
    HostBackedDevice& operator=(const HostBackedDevice&) = delete;

    // Copies into device memory since construction (or reset_counts), and their bytes.
    long copies_to_device() const { return to_device_; }
    size_t bytes_to_device() const { return bytes_to_device_; }
    // Copies out of device memory (device to host or device to device), and their bytes.
    long copies_from_device() const { return from_device_; }
    size_t bytes_from_device() const { return bytes_from_device_; }
    void reset_counts() { to_device_ = from_device_ = 0, bytes_to_device_ = bytes_from_device_ = 0; }
    // The copy to device memory after the next `n` ones fails with
    // DS_ERR_DEVICE (and only that one); -1: none fails.
    void fail_copy_to_device_after(long n) { fail_after_ = n; }
    // Every device_memory::order_after since construction (or take_orders), as
    // (waiter, signaler) stream pairs; taken out by take_orders.
    std::vector<std::pair<void*, void*>> take_orders() { return std::exchange(orders_, {}); }

private:
    static HostBackedDevice*& active() {
        static HostBackedDevice* d = nullptr;
        return d;
    }
    bool on_device(const void* p) const {
        const auto* c = static_cast<const char*>(p);
        auto it = blocks_.upper_bound(c);
        if (it == blocks_.begin()) return false;
        --it;
        return c < it->first + it->second;
    }
    static void on_copy(void* dst, const void* src, size_t bytes) {
        HostBackedDevice* d = active();
        if (!d) return;
        if (d->on_device(src)) ++d->from_device_, d->bytes_from_device_ += bytes;
        if (!d->on_device(dst)) return;
        if (d->fail_after_ == 0) {
            d->fail_after_ = -1;
            ds::fail(DS_ERR_DEVICE, "host-backed device: an injected failure of a %zu-byte copy to the device", bytes);
        }
        if (d->fail_after_ > 0) --d->fail_after_;
        ++d->to_device_, d->bytes_to_device_ += bytes;
    }
    static void on_order(void* waiter, void* signaler) {
        if (HostBackedDevice* d = active()) d->orders_.emplace_back(waiter, signaler);
    }
    static void* alloc(void* ctx, size_t bytes, int32_t, const char* what) {
        void* p = nullptr;
        if (posix_memalign(&p, 256, bytes) != 0)
            ds::fail(DS_ERR_DEVICE_OUT_OF_MEMORY, "host-backed device: out of memory for %s", what);
        std::memset(p, 0xFF, bytes);
        static_cast<HostBackedDevice*>(ctx)->blocks_[static_cast<const char*>(p)] = bytes;
        return p;
    }
    static void release(void* ctx, void* p, int32_t) noexcept {
        static_cast<HostBackedDevice*>(ctx)->blocks_.erase(static_cast<const char*>(p));
        std::free(p);
    }

    std::map<const char*, size_t> blocks_;  // the device's memory: start -> bytes
    std::vector<std::pair<void*, void*>> orders_;
    long to_device_ = 0, from_device_ = 0, fail_after_ = -1;
    size_t bytes_to_device_ = 0, bytes_from_device_ = 0;
    ds::DeviceBlockCache cache_{ds::DeviceMemoryOps{this, alloc, release}};
};

}  // namespace test_device
