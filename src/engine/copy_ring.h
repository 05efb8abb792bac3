// What GradPipe and WeightPipe share: a ring of host staging (page-locked
// with `pin`), a copy stream of their own (made on first use) and a pool of
// events. The copies in flight occupy [oldest, head) of the ring, wrapping
// at the end, a copy never straddling it; each pipe keeps its own queue of
// copies and frees the oldest (waiting for it) until place() finds room.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/device.h"
#include "core/tensor.h"

namespace ds {

class CopyRing {
public:
    static constexpr size_t kAlign = 256;  // each copy starts on a 256-byte boundary
    static size_t round_up(size_t n) { return (std::max<size_t>(n, 1) + kAlign - 1) / kAlign * kAlign; }

    // `purpose` names the copies in error messages ("gradient copies to the host").
    CopyRing(Device device, bool pin, Allocator& alloc, std::string purpose);
    ~CopyRing();  // the stream and the events; the owner has waited for its copies
    CopyRing(const CopyRing&) = delete;
    CopyRing& operator=(const CopyRing&) = delete;

    Device device() const { return device_; }
    // The copy stream, made on first use; the caller holds a DeviceScope.
    void* stream();
    void* take_event();  // from the pool, or a new one
    void give_event(void* event) { events_.push_back(event); }

    size_t capacity() const { return capacity_; }
    // A new, empty ring of max(2 * bytes, min_bytes); only with nothing in
    // flight (the old staging goes first, so the peak is one ring).
    void grow(size_t bytes, size_t min_bytes);
    char* at(size_t offset) { return static_cast<char*>(staging_.data_ptr()) + offset; }
    // Room for `bytes` (already rounded) at *offset, given whether copies are
    // in flight and the oldest one's offset; false: free the oldest first.
    bool place(size_t bytes, bool in_flight, size_t oldest, size_t* offset) const;
    void taken(size_t offset, size_t bytes) { head_ = offset + bytes; }
    void emptied() { head_ = 0; }  // nothing in flight any more

private:
    Device device_;
    bool pin_;
    Allocator& alloc_;
    std::string purpose_;
    void* stream_ = nullptr;
    std::vector<void*> events_;  // free
    Tensor staging_;             // host bytes: the ring
    size_t capacity_ = 0;
    size_t head_ = 0;            // where the next copy goes
};

}  // namespace ds
