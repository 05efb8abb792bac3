// ZeRO-Offload's gradients on their way from the GPU to the host, while the
// backward goes on (issue 14, item 4; docs/DESIGN.md "Gradients to the host
// while the backward runs").
//
// A built-in model's backward hands each gradient over as soon as its layer
// returns. submit() queues the gradient's device-to-host copy on a copy
// stream of its own, after the kernels already queued on the legacy stream
// (the ones that computed it), into a ring of host staging. The host goes on
// launching the next layer's kernels. The host's part — accumulating into
// the fp32 gradient buffers, and at ZeRO-2/3 the reductions — runs later, as
// a `sink` per gradient in submission order: when the ring needs room for a
// new copy (the host then waits for the oldest copy only), and in drain() at
// the end of the backward. So the GPU computes layer k while its link copies
// layer k+1's gradients and the CPU adds layer k+2's.
//
// The source must not be written again until its copy has read it: fence()
// makes the legacy stream wait for a copy (on the device; the host does not
// wait) before the caller reuses the memory. With `pin` (offload_optimizer.
// pin_memory) the staging is page-locked, so the copies are asynchronous.
// Without it a copy into pageable memory returns only when done, after the
// kernels before it: the host waits for the GPU once per gradient, as
// DeepSpeed's non_blocking copies to pageable memory do (correct, no overlap).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

#include "core/allocator.h"
#include "core/device.h"
#include "core/tensor.h"
#include "engine/copy_ring.h"

namespace ds {

class GradPipe {
public:
    using Sink = std::function<void(const void* host_bytes)>;

    GradPipe(Device device, bool pin, Allocator& alloc);
    ~GradPipe();  // waits for the copies in flight, running no sink
    GradPipe(const GradPipe&) = delete;
    GradPipe& operator=(const GradPipe&) = delete;

    // Queues the copy of `bytes` at device address `src`; `sink` gets the
    // host bytes later (valid during the call only). Returns the copy's
    // ticket, for fence(). A sink that throws (from here or from drain())
    // leaves the later entries queued: the caller's failure path discards
    // them.
    uint64_t submit(const void* src, size_t bytes, Sink sink, const char* what);
    // Work queued on the legacy stream from now on runs after copy `ticket`
    // (and every earlier one) has read its source. Device-side: the host
    // does not wait.
    void fence(uint64_t ticket);
    // Every queued copy arrived and its sink ran, in submission order.
    void drain();
    // Waits for the queued copies and drops them; no sink runs.
    void discard() noexcept;

    size_t pending() const { return queue_.size(); }
    size_t staging_bytes() const { return ring_.capacity(); }
    int64_t copies() const { return copies_; }  // queued so far (tests)
    // Tests: the staging's smallest size (default 4 MiB; the ring holds at
    // least twice the largest gradient), so small models wrap the ring too.
    static void set_min_staging_for_testing(size_t bytes) noexcept;

private:
    struct Entry {
        uint64_t ticket = 0;
        size_t offset = 0;
        void* event = nullptr;  // recorded on the copy stream after the copy
        Sink sink;
    };
    void retire_oldest();  // waits for it, runs its sink

    CopyRing ring_;
    std::deque<Entry> queue_;  // in flight or arrived, sink not run yet; oldest first
    uint64_t next_ticket_ = 1;
    uint64_t retired_ = 0;    // every ticket up to this one has arrived
    int64_t copies_ = 0;
};

}  // namespace ds
