#include "engine/weight_pipe.h"

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

WeightPipe::WeightPipe(Device device, bool pin, Allocator& alloc)
    : ring_(device, pin, alloc, "weight copies to the device") {}

WeightPipe::~WeightPipe() { wait_all(); }

void WeightPipe::upload(const std::vector<Upload>& batch, const char* what) {
    if (queue_batch(batch, what)) {
        const device_memory::DeviceScope scope(ring_.device().index);
        device_memory::stream_wait_event(nullptr, queue_.back().event, what);
    }
}

void* WeightPipe::upload_ahead(const std::vector<Upload>& batch, const char* what) {
    if (!queue_batch(batch, what)) return nullptr;
    const device_memory::DeviceScope scope(ring_.device().index);
    void* ev = ring_.take_event();
    try {
        device_memory::event_record(ev, ring_.stream(), what);
    } catch (...) {
        ring_.give_event(ev);
        device_memory::stream_wait_event(nullptr, queue_.back().event, what);  // as upload() leaves it
        throw;
    }
    return ev;
}

void WeightPipe::wait_batch(void* event, const char* what) {
    if (event == nullptr) return;
    const device_memory::DeviceScope scope(ring_.device().index);
    try {
        device_memory::stream_wait_event(nullptr, event, what);
    } catch (...) {
        ring_.give_event(event);
        throw;
    }
    ring_.give_event(event);
}

bool WeightPipe::queue_batch(const std::vector<Upload>& batch, const char* what) {
    size_t total = 0;
    for (const Upload& u : batch) total += CopyRing::round_up(u.bytes);
    if (total == 0) return false;
    const device_memory::DeviceScope scope(ring_.device().index);
    void* stream = ring_.stream();
    if (2 * total > ring_.capacity()) {  // two batches fit: the next layer's while this one's copies run
        wait_all();
        ring_.grow(total, g_min_staging.load(std::memory_order_relaxed));
    }
    // The destinations may be blocks the legacy stream's queued work still reads.
    device_memory::order_after(stream, nullptr, what);
    const int64_t before = copies_;
    try {
        for (const Upload& u : batch)
            if (u.bytes > 0) queue_one(u, stream, what);
    } catch (...) {
        if (copies_ > before)  // what was queued lands before anything reads it
            device_memory::stream_wait_event(nullptr, queue_.back().event, what);
        throw;
    }
    return copies_ > before;
}

void WeightPipe::queue_one(const Upload& u, void* stream, const char* what) {
    const size_t need = CopyRing::round_up(u.bytes);
    size_t offset = 0;
    while (!ring_.place(need, !queue_.empty(), queue_.empty() ? 0 : queue_.front().offset, &offset)) retire_oldest();
    char* slot = ring_.at(offset);
    std::memcpy(slot, u.src, u.bytes);  // the source is free from here on
    void* ev = ring_.take_event();
    try {
        device_memory::copy_async(u.dst, slot, u.bytes, stream, what);
        device_memory::event_record(ev, stream, what);
    } catch (...) {
        ring_.give_event(ev);
        throw;
    }
    queue_.push_back({offset, ev});
    ring_.taken(offset, need);
    ++copies_;
}

void WeightPipe::retire_oldest() {
    device_memory::event_synchronize(queue_.front().event, "waiting for a weight copy to the device");
    ring_.give_event(queue_.front().event);
    queue_.pop_front();
    if (queue_.empty()) ring_.emptied();
}

void WeightPipe::wait_all() noexcept {
    if (queue_.empty()) return;
    try {
        const device_memory::DeviceScope scope(ring_.device().index);
        device_memory::event_synchronize(queue_.back().event, "waiting for the weight copies to the device");
    } catch (...) {  // the device failed: the copies will not read the staging any more either
    }
    for (Entry& e : queue_) ring_.give_event(e.event);
    queue_.clear();
    ring_.emptied();
}

}  // namespace ds
