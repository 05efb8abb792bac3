// device_memory.h's functions: the CUDA runtime (namespace runtime), or host
// memory posing as a device while a test asks for it.
#include "core/device_memory.h"

#include <atomic>
#include <cstring>

#include "core/host_streams.h"

namespace ds::device_memory {

namespace {
std::atomic<bool> g_host_backed{false};
std::atomic<CopyHook> g_copy_hook{nullptr};
std::atomic<OrderHook> g_order_hook{nullptr};
std::atomic<int64_t> g_pinned{0};
bool host_backed() noexcept { return g_host_backed.load(std::memory_order_acquire); }
}  // namespace

void host_backed_copy(void* dst, const void* src, size_t bytes) {
    if (CopyHook hook = g_copy_hook.load(std::memory_order_acquire)) hook(dst, src, bytes);
    if (bytes > 0) std::memmove(dst, src, bytes);
}

void set_host_backed_for_testing(bool on) noexcept { g_host_backed.store(on, std::memory_order_release); }
bool host_backed_for_testing() noexcept { return host_backed(); }
void set_copy_hook_for_testing(CopyHook hook) noexcept { g_copy_hook.store(hook, std::memory_order_release); }
void set_order_hook_for_testing(OrderHook hook) noexcept { g_order_hook.store(hook, std::memory_order_release); }

bool available() noexcept { return host_backed() || runtime::available(); }

void* alloc(size_t bytes, int32_t index, const char* what) { return runtime::alloc(bytes, index, what); }

void free(void* ptr) noexcept { runtime::free(ptr); }

void copy(void* dst, const void* src, size_t bytes, const char* what) {
    if (host_backed()) {
        host_backed_copy(dst, src, bytes);
        return;
    }
    runtime::copy(dst, src, bytes, what);
}

void copy_on_stream(void* dst, const void* src, size_t bytes, void* stream, const char* what) {
    if (host_backed()) {
        host_streams::finish(stream);
        host_backed_copy(dst, src, bytes);
        return;
    }
    runtime::copy_on_stream(dst, src, bytes, stream, what);
}

void order_after(void* waiter, void* signaler, const char* what) {
    if (host_backed()) {
        if (OrderHook hook = g_order_hook.load(std::memory_order_acquire)) hook(waiter, signaler);
        host_streams::order_after(waiter, signaler);
        return;
    }
    runtime::order_after(waiter, signaler, what);
}

void* stream_create(const char* what) {
    return host_backed() ? host_streams::stream_create() : runtime::stream_create(what);
}

void stream_destroy(void* stream) noexcept {
    if (host_backed()) host_streams::stream_destroy(stream);
    else runtime::stream_destroy(stream);
}

void* event_create(const char* what) { return host_backed() ? host_streams::event_create() : runtime::event_create(what); }

void event_destroy(void* event) noexcept {
    if (host_backed()) host_streams::event_destroy(event);
    else runtime::event_destroy(event);
}

void event_record(void* event, void* stream, const char* what) {
    if (host_backed()) host_streams::event_record(event, stream);
    else runtime::event_record(event, stream, what);
}

void event_synchronize(void* event, const char* what) {
    if (host_backed()) host_streams::event_synchronize(event);
    else runtime::event_synchronize(event, what);
}

void stream_wait_event(void* stream, void* event, const char* what) {
    if (host_backed()) host_streams::stream_wait_event(stream, event);
    else runtime::stream_wait_event(stream, event, what);
}

void copy_async(void* dst, const void* src, size_t bytes, void* stream, const char* what) {
    if (host_backed()) host_streams::copy_async(dst, src, bytes, stream);
    else runtime::copy_async(dst, src, bytes, stream, what);
}

void zero(void* ptr, size_t bytes, const char* what) {
    if (host_backed()) {
        if (bytes > 0) std::memset(ptr, 0, bytes);
        return;
    }
    runtime::zero(ptr, bytes, what);
}

void pin(void* ptr, size_t bytes, const char* what) {
    if (bytes == 0) return;
    if (!host_backed()) runtime::pin(ptr, bytes, what);
    g_pinned.fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed);
}

void unpin(void* ptr, size_t bytes) noexcept {
    if (bytes == 0) return;
    if (!host_backed()) runtime::unpin(ptr);
    g_pinned.fetch_sub(static_cast<int64_t>(bytes), std::memory_order_relaxed);
}

int64_t pinned_bytes() noexcept { return g_pinned.load(std::memory_order_relaxed); }

DeviceScope::DeviceScope(int32_t index) {
    if (!host_backed()) prev_ = runtime::select(index);
}

DeviceScope::~DeviceScope() {
    if (prev_ >= 0) runtime::restore(prev_);
}

}  // namespace ds::device_memory
