#include "engine/device_front.h"

#include "core/device_memory.h"
#include "core/error.h"

namespace ds {

DeviceFront::DeviceFront(Device device, void* stream, Allocator& alloc)
    : device_(device), stream_(stream), alloc_(alloc) {}

void DeviceFront::materialize(ParamStore& params) {
    for (Param& p : params.all()) {
        if (!p.working.defined()) continue;
        weights_.emplace(&p, Tensor::empty(p.shape, p.working.dtype(), device_, alloc_, MemCategory::Params));
    }
    refresh(params);
}

void DeviceFront::refresh(ParamStore& params) {
    const device_memory::DeviceScope scope(device_.index);
    for (Param& p : params.all()) {
        if (!p.working.defined() || p.numel == 0) continue;
        Tensor& d = weights_.at(&p);
        DS_CHECK(p.working.is_contiguous(), DS_ERR_INTERNAL, "parameter '%s': host working weights not contiguous",
                 p.name.c_str());
        device_memory::copy_on_stream(d.data_ptr(), p.working.data_ptr(), p.working.nbytes(), stream_,
                                      "copying the updated weights to the device");
    }
}

const Tensor& DeviceFront::weights(const Param& p) const {
    auto it = weights_.find(&p);
    DS_CHECK(it != weights_.end(), DS_ERR_INTERNAL, "parameter '%s' has no device weights", p.name.c_str());
    return it->second;
}

const void* DeviceFront::to_host(const void* src, size_t bytes, const char* what) {
    if (staging_.size() < bytes) staging_.resize(bytes);
    if (bytes == 0) return staging_.data();
    const device_memory::DeviceScope scope(device_.index);
    device_memory::copy_on_stream(staging_.data(), src, bytes, stream_, what);
    return staging_.data();
}

}  // namespace ds
