// ZeRO-Offload at ZeRO-3: gathered weights on their way from the host to the
// GPU (issue 14, item 4; docs/DESIGN.md "Gathered weights to the device").
//
// A ZeRO-3 gather leaves a parameter's whole 16-bit weights in host memory;
// the GPU needs its own copy before the layer's kernels read it. upload()
// takes a batch (a layer's weights, as soon as they are gathered): each
// source is copied at once into a ring of host staging (page-locked with
// offload_param.pin_memory, or offload_optimizer's without offload_param
// "cpu": Engine::pins_weight_copies) and its copy to the device is queued on a
// copy stream of its own; the legacy stream is then made to wait for the
// batch on the device. The host does not wait, so it goes on launching the
// kernels, and the host source may be freed (the strategy releases it) as
// soon as upload() returns.
//
// The copies first wait for the work already queued on the legacy stream:
// their destinations are blocks of the device cache, which work queued there
// may still read (a copy released by the last layer). upload_ahead() leaves
// the legacy stream's wait to the caller: the built-in model gathers the next
// layer before the current one's kernels are queued, so that layer's copies
// run while those kernels do. The host waits only
// when the ring has no room (for the oldest copy). Without pin_memory the
// staging is pageable and a copy from it returns only when done (CUDA stages
// pageable memory itself): correct, without the overlap, as for gradients
// (grad_pipe.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "core/allocator.h"
#include "core/device.h"
#include "core/tensor.h"
#include "engine/copy_ring.h"

namespace ds {

class WeightPipe {
public:
    struct Upload {
        void* dst;        // device memory
        const void* src;  // host memory
        size_t bytes;
    };

    WeightPipe(Device device, bool pin, Allocator& alloc);
    ~WeightPipe();  // waits for the copies in flight
    WeightPipe(const WeightPipe&) = delete;
    WeightPipe& operator=(const WeightPipe&) = delete;

    // Queues the batch; work queued on the legacy stream afterwards runs after
    // every copy of it (also when this throws part-way: the copies queued so
    // far are waited for on the device before the error goes up).
    void upload(const std::vector<Upload>& batch, const char* what);
    // The same, but the legacy stream does not wait yet (a layer's weights
    // gathered ahead, copied while the current layer's kernels run): returns
    // an event recorded on the copy stream after the batch (null when there
    // was nothing to copy), which wait_batch must be given before anything
    // reads the destinations or frees them.
    void* upload_ahead(const std::vector<Upload>& batch, const char* what);
    // The legacy stream waits (on the device) for upload_ahead's batch; the
    // event goes back to the pool.
    void wait_batch(void* event, const char* what);
    // The host waits for every copy (the staging is then free).
    void wait_all() noexcept;

    size_t staging_bytes() const { return ring_.capacity(); }
    int64_t copies() const { return copies_; }  // queued so far (tests)
    // Tests: the staging's smallest size (default 4 MiB; the ring holds at
    // least twice the largest batch), so small models wrap the ring too.
    static void set_min_staging_for_testing(size_t bytes) noexcept;

private:
    struct Entry {
        size_t offset = 0;
        void* event = nullptr;  // recorded on the copy stream after the copy
    };
    // Queues the batch's copies (after the legacy stream's work so far);
    // whether any was queued.
    bool queue_batch(const std::vector<Upload>& batch, const char* what);
    void queue_one(const Upload& u, void* stream, const char* what);
    void retire_oldest();

    CopyRing ring_;
    std::deque<Entry> queue_;  // in flight (or arrived, not yet seen), oldest first
    int64_t copies_ = 0;
};

}  // namespace ds
