// Memory on an accelerator (cuda:N), behind plain functions so that the
// allocator and Tensor never branch on the build: the CUDA runtime calls are
// in core/cuda/device_memory_cuda.cpp (built only with CUDA, target
// ds_core_cuda), and device_memory_nocuda.cpp is the same interface in a
// build without CUDA (available() false; the others are never reached, as
// their callers check available() first, and fail with DS_ERR_UNSUPPORTED).
// The allocator calls alloc/free through its block cache
// (core/device_block_cache.h), which reuses freed blocks.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ds::device_memory {

// Whether this build can hold memory on a CUDA device.
bool available() noexcept;
// cudaMalloc on device `index`, restoring the caller's current device.
// Failures: DS_ERR_DEVICE_OUT_OF_MEMORY naming `bytes` and `what`, or
// DS_ERR_DEVICE with the runtime's message.
void* alloc(size_t bytes, int32_t index, const char* what);
void free(void* ptr) noexcept;  // a failure here has no caller to report to
// Any direction (host <-> device, device <-> device), synchronous.
void copy(void* dst, const void* src, size_t bytes, const char* what);
void zero(void* ptr, size_t bytes, const char* what);
// A copy ordered after the work already queued on `stream` (a cudaStream_t;
// null: the legacy default stream), finished when this returns. The caller
// has made the device current (DeviceScope).
void copy_on_stream(void* dst, const void* src, size_t bytes, void* stream, const char* what);
// Work queued on `waiter` from now on runs after the work already queued on
// `signaler` (cudaStream_t as void*; null: the legacy default stream). Host
// code does not wait (an event recorded on one, waited for by the other).
// The caller has made the streams' device current (DeviceScope).
void order_after(void* waiter, void* signaler, const char* what);
// Streams and events, for copies that overlap compute (engine/grad_pipe.h).
// A stream from stream_create does not synchronize with the legacy default
// stream (cudaStreamNonBlocking): order them with events or order_after. The
// caller has made the device current (DeviceScope) for the create and queue
// calls; null as a stream means the legacy default stream.
void* stream_create(const char* what);
void stream_destroy(void* stream) noexcept;  // its queued work finishes first
void* event_create(const char* what);        // no timing
void event_destroy(void* event) noexcept;
// The event completes when the work queued on `stream` so far has finished.
void event_record(void* event, void* stream, const char* what);
// The host waits for the last event_record of `event` to complete.
void event_synchronize(void* event, const char* what);
// Work queued on `stream` from now on runs after the last recording of `event`.
void stream_wait_event(void* stream, void* event, const char* what);
// A copy queued on `stream`; returns at once. Both sides must stay untouched
// (the source unwritten, the destination unread) until an event recorded
// after it completes.
void copy_async(void* dst, const void* src, size_t bytes, void* stream, const char* what);

// Page-locks the host pages [ptr, ptr + bytes) (cudaHostRegister), so copies
// between them and a GPU run at full bandwidth and need no staging; `ptr`
// must start a range of whole pages no other pin overlaps (the allocator's
// pinned blocks: Allocator::allocate_pinned_block). unpin undoes it.
// Failures: DS_ERR_DEVICE with the runtime's message.
void pin(void* ptr, size_t bytes, const char* what);
void unpin(void* ptr, size_t bytes) noexcept;  // `bytes` as given to pin()
// Host bytes pinned now by this process through pin(), all callers.
int64_t pinned_bytes() noexcept;

// Tests only: host memory poses as cuda:N. While on, available() is true,
// the copies and zero() are memcpy/memset, pin() only counts, DeviceScope selects nothing, and
// kernels_for(cuda:N) is the CPU table (its kernels run at once, as if the
// legacy stream were always idle). Work queued on a created stream is
// deferred to the latest moment a real GPU could run it: until an event
// after it is synchronized, a stream waits for it, or the stream is used
// synchronously or destroyed (device_memory_host_streams.cpp). A copy thus
// reads its source and writes its destination late, so a missing wait shows
// up as wrong values in a test instead of passing by luck; the test gives the Allocator a
// host-backed block cache (Allocator::set_device_cache_for_testing). It lets
// the engine's device paths run in CI, where no GPU exists.
void set_host_backed_for_testing(bool on) noexcept;
bool host_backed_for_testing() noexcept;
// Tests only: called before every host-backed copy (copy, copy_on_stream)
// with its arguments; it may count the copy or throw ds::Error to make it
// fail. nullptr (the default): none.
using CopyHook = void (*)(void* dst, const void* src, size_t bytes);
void set_copy_hook_for_testing(CopyHook hook) noexcept;
// Tests only: called for every host-backed order_after (which does nothing
// else there). nullptr (the default): none.
using OrderHook = void (*)(void* waiter, void* signaler);
void set_order_hook_for_testing(OrderHook hook) noexcept;

// The CUDA runtime behind the functions above (core/cuda/device_memory_cuda.cpp,
// or device_memory_nocuda.cpp in a build without CUDA); device_memory.cpp
// dispatches to it unless host_backed_for_testing().
namespace runtime {
bool available() noexcept;
void* alloc(size_t bytes, int32_t index, const char* what);
void free(void* ptr) noexcept;
// The CUDA kernels' scratch pool's free memory back to the driver, on every
// device (dsk_cuda_release_scratch); nothing without CUDA.
void release_kernel_scratch() noexcept;
void copy(void* dst, const void* src, size_t bytes, const char* what);
void copy_on_stream(void* dst, const void* src, size_t bytes, void* stream, const char* what);
void order_after(void* waiter, void* signaler, const char* what);
void* stream_create(const char* what);
void stream_destroy(void* stream) noexcept;
void* event_create(const char* what);
void event_destroy(void* event) noexcept;
void event_record(void* event, void* stream, const char* what);
void event_synchronize(void* event, const char* what);
void stream_wait_event(void* stream, void* event, const char* what);
void copy_async(void* dst, const void* src, size_t bytes, void* stream, const char* what);
void zero(void* ptr, size_t bytes, const char* what);
void pin(void* ptr, size_t bytes, const char* what);
void unpin(void* ptr) noexcept;
// Makes `index` current; returns the caller's device to restore, -1 when it already was `index`.
int select(int32_t index);
void restore(int prev) noexcept;
}  // namespace runtime

// Makes cuda:`index` the calling thread's current device while it lives and
// then restores the caller's: a library call that works on a device leaves
// the caller's current device as it found it. Construction fails with
// DS_ERR_DEVICE naming the ordinal (and the runtime's message).
class DeviceScope {
public:
    explicit DeviceScope(int32_t index);
    ~DeviceScope();
    DeviceScope(const DeviceScope&) = delete;
    DeviceScope& operator=(const DeviceScope&) = delete;

private:
    int prev_ = -1;  // the caller's device; -1: nothing to restore
};

}  // namespace ds::device_memory
