// Copies between host and device memory that also change the dtype.
// Tensor::copy_from converts only on the host; here a device side crosses in
// its own dtype and the conversion runs on the host, so the values round as
// a CPU engine's do.
#pragma once

#include "core/allocator.h"
#include "core/tensor.h"

namespace ds {

// dst = src in dst's dtype (same shape; fp32/fp16/bf16). Either side may be
// in device memory; the host side may be strided, a device side must be
// contiguous. The staging buffer, when one is needed, comes from `alloc`
// (counted as buffers) and is freed before returning.
void copy_converting(Tensor& dst, const Tensor& src, Allocator& alloc);

}  // namespace ds
