// Where the next copy goes in a ring of host staging (GradPipe, WeightPipe):
// the copies still in flight occupy [oldest, head), wrapping at the end;
// a copy never straddles the end. The pipes keep the queue of copies and
// free the oldest (waiting for it) until place() finds room.
#pragma once

#include <algorithm>
#include <cstddef>

namespace ds {

class StagingRing {
public:
    static constexpr size_t kAlign = 256;  // each copy starts on a 256-byte boundary
    static size_t round_up(size_t n) { return (std::max<size_t>(n, 1) + kAlign - 1) / kAlign * kAlign; }

    size_t capacity() const { return capacity_; }
    // A new, empty ring of `capacity` bytes.
    void reset(size_t capacity) {
        capacity_ = capacity;
        head_ = 0;
    }
    // Room for `bytes` (already rounded) at *offset, given whether copies are
    // in flight and the oldest one's offset; false: free the oldest first.
    bool place(size_t bytes, bool in_flight, size_t oldest, size_t* offset) const {
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
    void taken(size_t offset, size_t bytes) { head_ = offset + bytes; }
    void emptied() { head_ = 0; }  // nothing in flight any more

private:
    size_t capacity_ = 0;
    size_t head_ = 0;  // where the next copy goes
};

}  // namespace ds
