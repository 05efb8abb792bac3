#include "engine/grad_pipe.h"

#include <atomic>

#include "core/device_memory.h"
#include "core/error.h"

namespace ds {

namespace {
std::atomic<size_t> g_min_staging{size_t{4} << 20};  // bytes
}  // namespace

void GradPipe::set_min_staging_for_testing(size_t bytes) noexcept {
    g_min_staging.store(bytes, std::memory_order_relaxed);
}

GradPipe::GradPipe(Device device, bool pin, Allocator& alloc)
    : ring_(device, pin, alloc, "gradient copies to the host") {}

GradPipe::~GradPipe() { discard(); }

uint64_t GradPipe::submit(const void* src, size_t bytes, Sink sink, const char* what) {
    const device_memory::DeviceScope scope(ring_.device().index);
    void* stream = ring_.stream();
    const size_t need = CopyRing::round_up(bytes);
    if (need > ring_.capacity()) {
        drain();
        ring_.grow(need, g_min_staging.load(std::memory_order_relaxed));
    }
    size_t offset = 0;
    while (!ring_.place(need, !queue_.empty(), queue_.empty() ? 0 : queue_.front().offset, &offset)) retire_oldest();
    void* ev = ring_.take_event();
    try {
        // The copy waits for the kernels that wrote `src` (the legacy stream's so far).
        device_memory::event_record(ev, nullptr, what);
        device_memory::stream_wait_event(stream, ev, what);
        device_memory::copy_async(ring_.at(offset), src, bytes, stream, what);
        device_memory::event_record(ev, stream, what);
    } catch (...) {
        ring_.give_event(ev);
        throw;
    }
    Entry e;
    e.ticket = next_ticket_++;
    e.offset = offset;
    e.event = ev;
    e.sink = std::move(sink);
    queue_.push_back(std::move(e));
    ring_.taken(offset, need);
    ++copies_;
    return queue_.back().ticket;
}

void GradPipe::fence(uint64_t ticket) {
    if (ticket <= retired_ || queue_.empty()) return;  // arrived: the host saw it done
    const uint64_t first = queue_.front().ticket;
    DS_CHECK(ticket >= first && ticket - first < queue_.size(), DS_ERR_INTERNAL,
             "fence on gradient copy %llu, which was never queued", static_cast<unsigned long long>(ticket));
    const device_memory::DeviceScope scope(ring_.device().index);
    device_memory::stream_wait_event(nullptr, queue_[static_cast<size_t>(ticket - first)].event,
                                     "ordering the backward after a gradient's copy to the host");
}

void GradPipe::retire_oldest() {
    {
        const device_memory::DeviceScope scope(ring_.device().index);
        device_memory::event_synchronize(queue_.front().event, "waiting for a gradient's copy to the host");
    }
    Entry e = std::move(queue_.front());
    queue_.pop_front();
    ring_.give_event(e.event);
    retired_ = e.ticket;
    if (queue_.empty()) ring_.emptied();
    // Its staging is free from here on; nothing is queued into it before the sink returns.
    e.sink(ring_.at(e.offset));
}

void GradPipe::drain() {
    while (!queue_.empty()) retire_oldest();
}

void GradPipe::discard() noexcept {
    if (queue_.empty()) return;
    try {
        const device_memory::DeviceScope scope(ring_.device().index);
        // The copies write the staging: wait for them even though nobody reads it.
        device_memory::event_synchronize(queue_.back().event, "waiting for dropped gradient copies");
    } catch (...) {  // the device failed: the copies will not write anything either
    }
    for (Entry& e : queue_) ring_.give_event(e.event);
    retired_ = queue_.back().ticket;
    queue_.clear();
    ring_.emptied();
}

}  // namespace ds
