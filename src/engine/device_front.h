// An engine on cuda:N (ZeRO-Offload, docs/DESIGN.md "The engine on a GPU"):
// the fp32 master weights, the accumulated gradients and the optimizer state
// stay where the CPU engine keeps them (host memory, or NVMe with
// offload_optimizer "nvme"), stepped by the CPU optimizer; the GPU holds the
// working weights (fp32, fp16 or bf16) the host's model computes with. Each
// micro-batch gradient comes from the device and is copied to the host to be
// accumulated there (DeepSpeed's ZeRO-Offload accumulates on the CPU too);
// after a step, a checkpoint load or a set_full the updated working weights
// go back to the device.
//
// The trainable parameters' device weights are views of one device buffer,
// the twin of the strategy's flat host working buffer (Strategy::
// flat_working), so the refresh after a step is one copy; a frozen
// parameter has its own device buffer, copied only when its value changes
// (a load, a set_full). ZeRO-3 has no flat working buffer: its parameters
// are whole on the host only while gathered (persistent ones always), and
// the device holds a copy of a gathered one from its gather (stage_gathered;
// or its first use) until it is released (drop_released) — DeepSpeed's gathered weights on the GPU; the
// partitions stay in host memory, as with offload_param "cpu".
//
// Copies that overlap compute: a built-in model's gradients go through
// grads() (engine/grad_pipe.h), copied on a stream of their own while the
// backward goes on and accumulated on the host as they arrive; ZeRO-3's
// gathered weights go through the weight pipe (engine/weight_pipe.h) as soon
// as they are gathered, so the host does not wait for them (the built-in
// model's next layer ahead of its kernels: stage_gathered's `ahead`); and an
// elementwise optimizer's step (or an NVMe optimizer state's, per
// sub-group) hands each piece of the flat buffer over as soon as the CPU
// stepped it (upload_range), copied on an upload stream while the next
// piece steps. The other copies are synchronous, on the legacy default
// stream: the other steps' weights, a load's, and gradients the caller hands over itself
// (to_host). The engine orders that stream after the caller's
// (Engine::call_begins) and the caller's after it (call_ends). The host side
// of the copies can be page-locked memory, so they need no driver staging:
// the gradients' (the staging here) with `pin_grads` (the config's
// offload_optimizer.pin_memory); the working weights' (the strategy's flat
// working buffer, StrategyContext::pin_working, and the weight pipe's
// staging) with `pin_weights` (Engine::pins_weight_copies: the same, or
// offload_param.pin_memory at ZeRO-3 with offload_param "cpu").
#pragma once

#include <cstddef>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/allocator.h"
#include "core/device.h"
#include "core/tensor.h"
#include "engine/grad_pipe.h"
#include "engine/weight_pipe.h"
#include "zero/param_store.h"

namespace ds {

class DeviceFront {
public:
    DeviceFront(Device device, bool pin_grads, bool pin_weights, Allocator& alloc);
    ~DeviceFront();
    DeviceFront(const DeviceFront&) = delete;
    DeviceFront& operator=(const DeviceFront&) = delete;

    Device device() const { return device_; }

    // The device weights of every parameter (after the strategy laid out the
    // host buffers; `host_flat`: Strategy::flat_working), filled from the host.
    void materialize(ParamStore& params, const Tensor& host_flat);
    // After an applied step: the trainable parameters' host working weights
    // to the device (`host_flat` must be the buffer materialize was given):
    // what upload_range did not queue, then the host waits for all of it.
    void refresh_trained(const Tensor& host_flat);
    // During a step (Strategy::set_step_sink): elements [begin, begin +
    // count) of the flat working buffer are final on the host, so their copy
    // to the device is queued on the upload stream while the step goes on.
    // Never throws: a failure is remembered and refresh_trained copies the
    // whole buffer instead.
    void upload_range(int64_t begin, int64_t count) noexcept;
    // Whether the trainable weights have a device twin of the flat buffer
    // (ZeRO 1/2), which upload_range fills.
    bool mirrors_flat() const { return device_flat_.defined() && device_flat_.nbytes() > 0; }
    // The queued uploads finished (a step that failed part-way left some):
    // before anything else writes the host buffer or its device twin.
    void wait_uploads() noexcept;
    // After a step that failed having handed ranges over (an NVMe optimizer
    // state's I/O error after some sub-groups): the strategy restored the
    // host buffer, so the queued copies finish and the ranges they wrote are
    // copied again from it (all of it if one failed to queue); the host
    // waits. Throws ds::Error if the device fails.
    void retract_uploads();
    // After a checkpoint load: every parameter's, frozen ones included.
    void refresh_all(const Tensor& host_flat);
    // After a set_full: `p`'s only.
    void refresh(const Param& p);
    // The device copy of `p`'s working weights (ZeRO-3: queued by
    // stage_gathered, or made on first use after a gather).
    const Tensor& weights(const Param& p) const;
    // ZeRO-3: device copies of `ps`, whole on the host now (just gathered),
    // queued through the weight pipe (weight_pipe.h): the host does not wait,
    // and kernels queued on the legacy stream afterwards see them. Those with
    // a device copy already are left as they are. `ahead` (the next layer,
    // gathered before the current one's kernels are queued): the legacy
    // stream waits for the copies only when one of them is first read
    // (weights()) or anything gathered is freed or rewritten (drop_released,
    // refresh), so they run while the kernels queued in between do.
    void stage_gathered(const std::vector<const Param*>& ps, bool ahead = false);
    // ZeRO-3: frees the device copies of the parameters released since.
    void drop_released();
    // `bytes` at device address `src`, copied (after the work queued on the
    // legacy stream) into host memory that stays valid until the next call.
    const void* to_host(const void* src, size_t bytes, const char* what);
    // A built-in model's gradients on their way to the host.
    GradPipe& grads() { return grads_; }
    const WeightPipe& gathered_uploads() const { return gathered_up_; }

private:
    void copy_flat(const Tensor& host_flat);
    void copy_one(const Param& p);
    // The legacy stream waits for stage_gathered(.., ahead)'s batches: the
    // one holding `p` (settle), or all of them.
    void settle(const Param* p) const;
    void settle_all() const;
    void refresh_gathered();
    void reserve_staging(size_t bytes);

    Device device_;
    Allocator& alloc_;
    bool pin_;  // pin_grads
    std::unordered_map<const Param*, Tensor> weights_;
    Tensor host_flat_, device_flat_;  // the strategy's flat working buffer and its device twin
    std::vector<const Param*> own_;   // parameters with a device buffer of their own (frozen, empty)
    // ZeRO-3's gathered parameters with a device copy (weights() fills it on
    // first use: the engine's const accessors hand it out).
    mutable std::unordered_map<const Param*, Tensor> gathered_;
    Tensor staging_;                  // host bytes; sized for the largest gradient, reused
    GradPipe grads_;
    // ZeRO-3's gathered weights to the device, and the batches queued ahead
    // that the legacy stream has not waited for yet (weight_pipe.h's events).
    mutable WeightPipe gathered_up_;
    struct AheadBatch {
        void* event;
        std::vector<const Param*> params;
    };
    mutable std::vector<AheadBatch> ahead_;
    // upload_range's copies: their stream and the event the host waits on,
    // made on first use; this step's queued ranges (begin, count) of the
    // flat buffer, and whether one failed to queue.
    void* upload_stream_ = nullptr;
    void* upload_event_ = nullptr;
    std::vector<std::pair<int64_t, int64_t>> uploaded_;
    bool upload_failed_ = false;
    void finish_uploads();
    void queue_upload(int64_t begin, int64_t end, const char* what);
};

}  // namespace ds
