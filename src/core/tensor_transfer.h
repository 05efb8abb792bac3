// Copies between host and device memory: one that also changes the dtype,
// and one that puts a host tensor where the computation runs.
// Tensor::copy_from converts only on the host; in copy_converting a device
// side crosses in its own dtype and the conversion runs on the host, so the
// values round as a CPU engine's do.
#pragma once

#include "core/allocator.h"
#include "core/tensor.h"

namespace ds {

// dst = src in dst's dtype (same shape; fp32/fp16/bf16). Either side may be
// in device memory; the host side may be strided, a device side must be
// contiguous. The staging buffer, when one is needed, comes from `alloc`
// (counted as buffers) and is freed before returning.
void copy_converting(Tensor& dst, const Tensor& src, Allocator& alloc);

// `t` itself when it is already on `device`, else a copy there in t's dtype
// and shape from `alloc`, counted as buffers (a micro-batch, positions: small
// tensors that the layers read on their device). The engine's model binding
// and the built-in layers both copy through here.
Tensor copy_to_device(const Tensor& t, Device device, Allocator& alloc);

}  // namespace ds
