// The host-backed test device's streams and events (device_memory.h,
// set_host_backed_for_testing). Its kernels run at once on the host, so the
// legacy stream is always idle; work queued on a created stream waits in a
// queue until the latest moment a GPU could have run it: an event after it
// is synchronized, another stream or the legacy stream is made to wait for
// it, the stream is used synchronously, or it is destroyed. A copy queued
// there therefore reads its source when that moment comes, and code that
// reuses a source or reads a destination before waiting sees wrong values
// in a test, as it could on a GPU. The eager mode (set_eager_for_testing)
// runs each operation at once instead: a copy queued before its source was
// final then copies the old bytes.
#pragma once

#include <cstddef>

namespace ds::device_memory::host_streams {

void* stream_create();
void stream_destroy(void* stream) noexcept;
void* event_create();
void event_destroy(void* event) noexcept;
void event_record(void* event, void* stream);
void event_synchronize(void* event);
void stream_wait_event(void* stream, void* event);
void copy_async(void* dst, const void* src, size_t bytes, void* stream);
// order_after(waiter, signaler) and copy_on_stream(.., stream): the
// signaler's (the stream's) queue so far runs first or is waited for.
void order_after(void* waiter, void* signaler);
void finish(void* stream);  // runs everything queued on `stream`
// Tests: operations still queued on all streams.
size_t queued() noexcept;
// Tests: every operation runs when queued instead (as if each stream were
// idle and infinitely fast), which shows up a copy queued before its source
// was final; the default, deferred, shows up a source written too early.
void set_eager_for_testing(bool on) noexcept;

}  // namespace ds::device_memory::host_streams

namespace ds::device_memory {
// device_memory.cpp: a host-backed copy (the test's copy hook, then memmove).
void host_backed_copy(void* dst, const void* src, size_t bytes);
}  // namespace ds::device_memory
