#include "core/tensor_transfer.h"

namespace ds {

void copy_converting(Tensor& dst, const Tensor& src, Allocator& alloc) {
    const bool host = dst.device().is_cpu() && src.device().is_cpu();
    if (host || (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous())) {
        dst.copy_from(src);
        return;
    }
    // The device side's dtype on the host: one plain copy across, one conversion here.
    const Tensor& on_device = dst.device().is_cpu() ? src : dst;
    Tensor staged = Tensor::empty(on_device.shape(), on_device.dtype(), Device::cpu(), alloc, MemCategory::Buffers);
    staged.copy_from(src);
    dst.copy_from(staged);
}

Tensor copy_to_device(const Tensor& t, Device device, Allocator& alloc) {
    if (t.device() == device) return t;
    Tensor copy = Tensor::empty(t.shape(), t.dtype(), device, alloc, MemCategory::Buffers);
    copy.copy_from(t);
    return copy;
}

}  // namespace ds
