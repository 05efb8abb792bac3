#include "engine/weight_pipe.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "core/device_memory.h"
#include "core/error.h"

namespace ds {

namespace {
std::atomic<size_t> g_min_staging{size_t{4} << 20};  // bytes
}  // namespace

void WeightPipe::set_min_staging_for_testing(size_t bytes) noexcept {
    g_min_staging.store(bytes, std::memory_order_relaxed);
}

WeightPipe::WeightPipe(Device device, bool pin, Allocator& alloc) : device_(device), pin_(pin), alloc_(alloc) {}

WeightPipe::~WeightPipe() {
    wait_all();
    if (stream_ == nullptr && events_.empty()) return;
    try {
        const device_memory::DeviceScope scope(device_.index);  // the stream's and events' device
        for (void* e : events_) device_memory::event_destroy(e);
        device_memory::stream_destroy(stream_);
    } catch (...) {  // the device cannot be selected any more: nothing left to free on it
    }
}

// Only with nothing in flight: the old staging goes first, so the peak is one ring.
void WeightPipe::grow(size_t bytes) {
    const size_t cap = std::max(2 * bytes, g_min_staging.load(std::memory_order_relaxed));
    staging_ = Tensor();
    ring_.reset(0);
    const Shape shape{static_cast<int64_t>(cap)};
    staging_ = pin_ ? Tensor::empty_pinned(shape, DType::U8, alloc_, MemCategory::Buffers)
                    : Tensor::empty(shape, DType::U8, Device::cpu(), alloc_, MemCategory::Buffers);
    ring_.reset(cap);
}

void* WeightPipe::take_event() {
    if (!events_.empty()) {
        void* e = events_.back();
        events_.pop_back();
        return e;
    }
    return device_memory::event_create("an event for a weight copy to the device");
}

void WeightPipe::upload(const std::vector<Upload>& batch, const char* what) {
    size_t total = 0;
    for (const Upload& u : batch) total += StagingRing::round_up(u.bytes);
    if (total == 0) return;
    const device_memory::DeviceScope scope(device_.index);
    if (stream_ == nullptr) stream_ = device_memory::stream_create("creating the stream for weight copies");
    if (2 * total > ring_.capacity()) {  // two batches fit: the next layer's while this one's copies run
        wait_all();
        grow(total);
    }
    // The destinations may be blocks the legacy stream's queued work still reads.
    device_memory::order_after(stream_, nullptr, what);
    const int64_t before = copies_;
    try {
        for (const Upload& u : batch)
            if (u.bytes > 0) queue_one(u, what);
    } catch (...) {
        if (copies_ > before)  // what was queued lands before anything reads it
            device_memory::stream_wait_event(nullptr, queue_.back().event, what);
        throw;
    }
    if (copies_ > before) device_memory::stream_wait_event(nullptr, queue_.back().event, what);
}

void WeightPipe::queue_one(const Upload& u, const char* what) {
    const size_t need = StagingRing::round_up(u.bytes);
    size_t offset = 0;
    while (!ring_.place(need, !queue_.empty(), queue_.empty() ? 0 : queue_.front().offset, &offset)) retire_oldest();
    char* slot = static_cast<char*>(staging_.data_ptr()) + offset;
    std::memcpy(slot, u.src, u.bytes);  // the source is free from here on
    void* ev = take_event();
    try {
        device_memory::copy_async(u.dst, slot, u.bytes, stream_, what);
        device_memory::event_record(ev, stream_, what);
    } catch (...) {
        events_.push_back(ev);
        throw;
    }
    queue_.push_back({offset, ev});
    ring_.taken(offset, need);
    ++copies_;
}

void WeightPipe::retire_oldest() {
    device_memory::event_synchronize(queue_.front().event, "waiting for a weight copy to the device");
    events_.push_back(queue_.front().event);
    queue_.pop_front();
    if (queue_.empty()) ring_.emptied();
}

void WeightPipe::wait_all() noexcept {
    if (queue_.empty()) return;
    try {
        const device_memory::DeviceScope scope(device_.index);
        device_memory::event_synchronize(queue_.back().event, "waiting for the weight copies to the device");
    } catch (...) {  // the device failed: the copies will not read the staging any more either
    }
    for (Entry& e : queue_) events_.push_back(e.event);
    queue_.clear();
    ring_.emptied();
}

}  // namespace ds
