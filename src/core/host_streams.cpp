#include "core/host_streams.h"

#include <cstdint>
#include <deque>
#include <mutex>
#include <unordered_set>

namespace ds::device_memory::host_streams {

namespace {

// A position in a stream: done once `executed` reaches `seq`.
struct Mark {
    void* stream = nullptr;  // null: the legacy stream (always done)
    uint64_t seq = 0;
};

struct Op {
    enum Kind { Copy, Wait } kind = Copy;
    void* dst = nullptr;
    const void* src = nullptr;
    size_t bytes = 0;
    Mark wait;  // Wait: run the other stream up to here first
};

struct Stream {
    std::deque<Op> ops;
    uint64_t enqueued = 0, executed = 0;
};

struct Event {
    Mark mark;
};

// One lock for all streams: a Wait runs another stream's queue. Recursive,
// because running a Wait re-enters run_to; the test engines are
// single-threaded, so this never contends.
std::recursive_mutex g_mutex;
std::unordered_set<Stream*> g_streams;  // live ones; a Mark on a destroyed stream is done
bool g_eager = false;

// A stream this file created, or null: the legacy stream, and the streams
// a caller hands the engine (ds_engine_set_stream; in tests any non-null
// pointer), which are always idle here as the host-backed kernels run at once.
Stream* known(void* stream) {
    auto* s = static_cast<Stream*>(stream);
    return s != nullptr && g_streams.count(s) != 0 ? s : nullptr;
}

void run_to(const Mark& m) {
    Stream* s = known(m.stream);
    if (s == nullptr) return;
    while (s->executed < m.seq && !s->ops.empty()) {
        Op op = s->ops.front();
        s->ops.pop_front();
        ++s->executed;
        if (op.kind == Op::Copy) host_backed_copy(op.dst, op.src, op.bytes);
        else run_to(op.wait);
    }
}

Mark end_of(void* stream) {
    Stream* s = known(stream);
    return s ? Mark{s, s->enqueued} : Mark{};
}

void push(void* stream, Op op) {
    auto* s = static_cast<Stream*>(stream);
    s->ops.push_back(op);
    ++s->enqueued;
    if (g_eager) run_to(Mark{s, s->enqueued});
}

}  // namespace

void* stream_create() {
    std::lock_guard<std::recursive_mutex> lock(g_mutex);
    auto* s = new Stream();
    g_streams.insert(s);
    return s;
}

void stream_destroy(void* stream) noexcept {
    std::lock_guard<std::recursive_mutex> lock(g_mutex);
    if (known(stream) == nullptr) return;
    try {
        run_to(end_of(stream));
    } catch (...) {  // a test's copy hook threw: nobody to report to
    }
    g_streams.erase(static_cast<Stream*>(stream));
    delete static_cast<Stream*>(stream);
}

void* event_create() { return new Event(); }

void event_destroy(void* event) noexcept { delete static_cast<Event*>(event); }

void event_record(void* event, void* stream) {
    std::lock_guard<std::recursive_mutex> lock(g_mutex);
    static_cast<Event*>(event)->mark = end_of(stream);
}

void event_synchronize(void* event) {
    std::lock_guard<std::recursive_mutex> lock(g_mutex);
    run_to(static_cast<Event*>(event)->mark);
}

void stream_wait_event(void* stream, void* event) {
    std::lock_guard<std::recursive_mutex> lock(g_mutex);
    const Mark m = static_cast<Event*>(event)->mark;
    if (known(stream) == nullptr) {  // the legacy stream's next kernel runs now, on the host
        run_to(m);
        return;
    }
    if (m.stream == nullptr || m.stream == stream) return;
    Op op;
    op.kind = Op::Wait;
    op.wait = m;
    push(stream, op);
}

void copy_async(void* dst, const void* src, size_t bytes, void* stream) {
    std::lock_guard<std::recursive_mutex> lock(g_mutex);
    if (known(stream) == nullptr) {
        host_backed_copy(dst, src, bytes);
        return;
    }
    Op op;
    op.dst = dst;
    op.src = src;
    op.bytes = bytes;
    push(stream, op);
}

void order_after(void* waiter, void* signaler) {
    std::lock_guard<std::recursive_mutex> lock(g_mutex);
    if (known(signaler) == nullptr || signaler == waiter) return;
    if (known(waiter) == nullptr) {
        run_to(end_of(signaler));
        return;
    }
    Op op;
    op.kind = Op::Wait;
    op.wait = end_of(signaler);
    push(waiter, op);
}

void finish(void* stream) {
    std::lock_guard<std::recursive_mutex> lock(g_mutex);
    run_to(end_of(stream));
}

void set_eager_for_testing(bool on) noexcept {
    std::lock_guard<std::recursive_mutex> lock(g_mutex);
    g_eager = on;
}

size_t queued() noexcept {
    std::lock_guard<std::recursive_mutex> lock(g_mutex);
    size_t n = 0;
    for (const Stream* s : g_streams) n += s->ops.size();
    return n;
}

}  // namespace ds::device_memory::host_streams
