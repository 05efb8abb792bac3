#include "engine/copy_ring.h"

#include <utility>

#include "core/device_memory.h"

namespace ds {

CopyRing::CopyRing(Device device, bool pin, Allocator& alloc, std::string purpose)
    : device_(device), pin_(pin), alloc_(alloc), purpose_(std::move(purpose)) {}

CopyRing::~CopyRing() {
    if (stream_ == nullptr && events_.empty()) return;
    try {
        const device_memory::DeviceScope scope(device_.index);  // the stream's and events' device
        for (void* e : events_) device_memory::event_destroy(e);
        device_memory::stream_destroy(stream_);
    } catch (...) {  // the device cannot be selected any more: nothing left to free on it
    }
}

void* CopyRing::stream() {
    if (stream_ == nullptr) stream_ = device_memory::stream_create(("creating the stream for " + purpose_).c_str());
    return stream_;
}

void* CopyRing::take_event() {
    if (!events_.empty()) {
        void* e = events_.back();
        events_.pop_back();
        return e;
    }
    return device_memory::event_create(("an event for " + purpose_).c_str());
}

void CopyRing::grow(size_t bytes, size_t min_bytes) {
    const size_t cap = std::max(2 * bytes, min_bytes);
    staging_ = Tensor();
    capacity_ = head_ = 0;
    const Shape shape{static_cast<int64_t>(cap)};
    staging_ = pin_ ? Tensor::empty_pinned(shape, DType::U8, alloc_, MemCategory::Buffers)
                    : Tensor::empty(shape, DType::U8, Device::cpu(), alloc_, MemCategory::Buffers);
    capacity_ = cap;
}

bool CopyRing::place(size_t bytes, bool in_flight, size_t oldest, size_t* offset) const {
    if (!in_flight) {
        *offset = 0;
        return bytes <= capacity_;
    }
    if (head_ > oldest) {
        if (head_ + bytes <= capacity_) {
            *offset = head_;
            return true;
        }
        *offset = 0;  // wrap
        return bytes <= oldest;
    }
    *offset = head_;
    return head_ < oldest && head_ + bytes <= oldest;
}

}  // namespace ds
