#include "engine/grad_pipe.h"

#include <algorithm>
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

GradPipe::GradPipe(Device device, bool pin, Allocator& alloc) : device_(device), pin_(pin), alloc_(alloc) {}

GradPipe::~GradPipe() {
    discard();
    if (stream_ == nullptr && events_.empty()) return;
    try {
        const device_memory::DeviceScope scope(device_.index);  // the stream's and events' device
        for (void* e : events_) device_memory::event_destroy(e);
        device_memory::stream_destroy(stream_);
    } catch (...) {  // the device cannot be selected any more: nothing left to free on it
    }
}

// Only with nothing queued: the old staging goes first, so the peak is one ring.
void GradPipe::grow(size_t bytes) {
    const size_t cap = std::max(2 * bytes, g_min_staging.load(std::memory_order_relaxed));
    staging_ = Tensor();
    ring_.reset(0);
    const Shape shape{static_cast<int64_t>(cap)};
    staging_ = pin_ ? Tensor::empty_pinned(shape, DType::U8, alloc_, MemCategory::Buffers)
                    : Tensor::empty(shape, DType::U8, Device::cpu(), alloc_, MemCategory::Buffers);
    ring_.reset(cap);
}

void* GradPipe::take_event() {
    if (!events_.empty()) {
        void* e = events_.back();
        events_.pop_back();
        return e;
    }
    return device_memory::event_create("an event for a gradient's copy to the host");
}

uint64_t GradPipe::submit(const void* src, size_t bytes, Sink sink, const char* what) {
    const device_memory::DeviceScope scope(device_.index);
    if (stream_ == nullptr) stream_ = device_memory::stream_create("creating the stream for gradient copies");
    const size_t need = StagingRing::round_up(bytes);
    if (need > ring_.capacity()) {
        drain();
        grow(need);
    }
    size_t offset = 0;
    while (!ring_.place(need, !queue_.empty(), queue_.empty() ? 0 : queue_.front().offset, &offset)) retire_oldest();
    void* ev = take_event();
    try {
        // The copy waits for the kernels that wrote `src` (the legacy stream's so far).
        device_memory::event_record(ev, nullptr, what);
        device_memory::stream_wait_event(stream_, ev, what);
        device_memory::copy_async(static_cast<char*>(staging_.data_ptr()) + offset, src, bytes, stream_, what);
        device_memory::event_record(ev, stream_, what);
    } catch (...) {
        events_.push_back(ev);
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
    const device_memory::DeviceScope scope(device_.index);
    device_memory::stream_wait_event(nullptr, queue_[static_cast<size_t>(ticket - first)].event,
                                     "ordering the backward after a gradient's copy to the host");
}

void GradPipe::retire_oldest() {
    {
        const device_memory::DeviceScope scope(device_.index);
        device_memory::event_synchronize(queue_.front().event, "waiting for a gradient's copy to the host");
    }
    Entry e = std::move(queue_.front());
    queue_.pop_front();
    events_.push_back(e.event);
    retired_ = e.ticket;
    if (queue_.empty()) ring_.emptied();
    // Its staging is free from here on; nothing is queued into it before the sink returns.
    e.sink(static_cast<const char*>(staging_.data_ptr()) + e.offset);
}

void GradPipe::drain() {
    while (!queue_.empty()) retire_oldest();
}

void GradPipe::discard() noexcept {
    if (queue_.empty()) return;
    try {
        const device_memory::DeviceScope scope(device_.index);
        // The copies write the staging: wait for them even though nobody reads it.
        device_memory::event_synchronize(queue_.back().event, "waiting for dropped gradient copies");
    } catch (...) {  // the device failed: the copies will not write anything either
    }
    for (Entry& e : queue_) events_.push_back(e.event);
    retired_ = queue_.back().ticket;
    queue_.clear();
    ring_.emptied();
}

}  // namespace ds
