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
// Copies are synchronous and ordered after the work already queued on the
// engine's stream; they do not overlap compute yet.
#pragma once

#include <cstddef>
#include <unordered_map>
#include <vector>

#include "core/allocator.h"
#include "core/device.h"
#include "core/tensor.h"
#include "zero/param_store.h"

namespace ds {

class DeviceFront {
public:
    DeviceFront(Device device, void* stream, Allocator& alloc);
    DeviceFront(const DeviceFront&) = delete;
    DeviceFront& operator=(const DeviceFront&) = delete;

    Device device() const { return device_; }
    void* stream() const { return stream_; }
    void set_stream(void* s) { stream_ = s; }

    // A device buffer for each parameter's working weights (after the
    // strategy laid out the host buffers), filled from the host.
    void materialize(ParamStore& params);
    // The host working weights of every parameter to the device.
    void refresh(ParamStore& params);
    // The device copy of `p`'s working weights.
    const Tensor& weights(const Param& p) const;
    // `bytes` at device address `src`, copied after the stream's queued work
    // into host memory that stays valid until the next call.
    const void* to_host(const void* src, size_t bytes, const char* what);

private:
    Device device_;
    void* stream_;
    Allocator& alloc_;
    std::unordered_map<const Param*, Tensor> weights_;
    std::vector<unsigned char> staging_;  // grows to the largest gradient, then reused
};

}  // namespace ds
