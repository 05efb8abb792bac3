// device_memory.h's functions: the CUDA runtime (namespace runtime), or host
// memory posing as a device while a test asks for it.
#include "core/device_memory.h"

#include <atomic>
#include <cstring>

namespace ds::device_memory {

namespace {
std::atomic<bool> g_host_backed{false};
bool host_backed() noexcept { return g_host_backed.load(std::memory_order_acquire); }
}  // namespace

void set_host_backed_for_testing(bool on) noexcept { g_host_backed.store(on, std::memory_order_release); }
bool host_backed_for_testing() noexcept { return host_backed(); }

bool available() noexcept { return host_backed() || runtime::available(); }

void* alloc(size_t bytes, int32_t index, const char* what) { return runtime::alloc(bytes, index, what); }

void free(void* ptr) noexcept { runtime::free(ptr); }

void copy(void* dst, const void* src, size_t bytes, const char* what) {
    if (host_backed()) {
        if (bytes > 0) std::memmove(dst, src, bytes);
        return;
    }
    runtime::copy(dst, src, bytes, what);
}

void copy_on_stream(void* dst, const void* src, size_t bytes, void* stream, const char* what) {
    if (host_backed()) {
        if (bytes > 0) std::memmove(dst, src, bytes);
        return;
    }
    runtime::copy_on_stream(dst, src, bytes, stream, what);
}

void zero(void* ptr, size_t bytes, const char* what) {
    if (host_backed()) {
        if (bytes > 0) std::memset(ptr, 0, bytes);
        return;
    }
    runtime::zero(ptr, bytes, what);
}

DeviceScope::DeviceScope(int32_t index) {
    if (!host_backed()) prev_ = runtime::select(index);
}

DeviceScope::~DeviceScope() {
    if (prev_ >= 0) runtime::restore(prev_);
}

}  // namespace ds::device_memory
