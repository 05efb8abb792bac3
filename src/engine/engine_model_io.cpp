// ModelBinding's side of the caller's tensors (engine_model.h): ds_forward's
// inputs and `out`, ds_backward's out_grad. On the host (any strides) or, for
// an engine on a GPU, in that GPU's memory (contiguous); checked on a host
// copy, computed on the engine's device, written back where `out` is.
#include "core/dlpack_interop.h"
#include "core/error.h"
#include "core/tensor_transfer.h"
#include "engine/engine.h"
#include "engine/engine_model.h"

namespace ds {

void ModelBinding::expect_host_or_engine(const DLTensor* t, const char* what) const {
    validate_dltensor(t, what);
    const bool host = t->device.device_type == kDLCPU;
    if (host || dev_.is_cpu()) {
        expect_device(t, Device::cpu(), what);
        return;
    }
    expect_device(t, dev_, what);  // names both devices when it is another GPU
    DS_CHECK(dltensor_is_contiguous(t), DS_ERR_INVALID_ARGUMENT,
             "%s: a tensor in %s memory must be contiguous (row-major); host tensors may be strided", what,
             dev_.str().c_str());
}

Tensor ModelBinding::caller_on_host(const DLTensor* t, const char* what) const {
    expect_host_or_engine(t, what);
    Tensor src = from_dltensor(t, what, false);
    // ds_forward's inputs are borrowed for the call only (include/deepspeed_c.h,
    // "Memory"), but the layers and the loss keep their input and the targets
    // for ds_backward: an engine-owned contiguous copy (a micro-batch: small).
    if (src.device().is_cpu()) return src.to(src.dtype(), e_.allocator(), MemCategory::Buffers);
    Tensor h = Tensor::empty(src.shape(), src.dtype(), Device::cpu(), e_.allocator(), MemCategory::Buffers);
    h.copy_from(src);
    return h;
}

Tensor ModelBinding::on_engine_device(const Tensor& host) const {
    return copy_to_device(host, dev_, e_.allocator());
}

void ModelBinding::write_out(DLTensor* out, const Tensor& src) const {
    Tensor o = from_dltensor(out, "out", false);
    copy_converting(o, src, e_.allocator());  // a strided host `out` from the device: through a host copy
}

}  // namespace ds
