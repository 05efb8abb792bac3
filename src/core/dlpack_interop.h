// DLPack interop: validation of caller DLTensors (borrowed, const), borrowed
// Tensor views of them, expected-shape/dtype/device checks, and export of
// library tensors (owning DLManagedTensor, or a view valid while the Tensor
// lives). Every error is DS_ERR_INVALID_ARGUMENT naming `what` and the field
// ("grad.shape[1] = -3 is negative").
#pragma once

#include <vector>

#include <dlpack/dlpack.h>

#include "core/device.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace ds {

constexpr int kMaxTensorDims = 32;

// Checks a caller's DLTensor: t non-NULL; 0 <= ndim <= 32; shape non-NULL
// when ndim > 0 and every dim >= 0; element count and byte size fit int64;
// dtype one of the seven with lanes 1; device kDLCPU or kDLCUDA; strides
// (NULL = contiguous) non-negative; data non-NULL when there are elements;
// data + byte_offset + the strided extent does not overflow the address
// space. Any byte_offset and any data alignment are accepted.
void validate_dltensor(const DLTensor* t, const char* what);

// Element count of a validated DLTensor.
int64_t dltensor_numel(const DLTensor* t);
// The first element's address (data + byte_offset) of a validated tensor; an
// empty tensor's byte_offset is never checked nor applied (data as given).
void* dltensor_data(const DLTensor* t);
// True when a validated DLTensor is row-major contiguous (NULL strides, or
// strides that match them except on size-1 dims, or no elements).
bool dltensor_is_contiguous(const DLTensor* t);

// validate_dltensor, then a borrowed Tensor over the same memory (byte_offset
// folded into the data pointer), valid while the caller's memory is. With
// require_contiguous, non-contiguous strides are an error:
// "grad.strides = [1, 4]: expected contiguous (row-major) strides [4, 1]".
Tensor from_dltensor(const DLTensor* t, const char* what, bool require_contiguous);

// Checks against what the engine expects; messages name the given and the
// expected value. The tensor must already be validated.
void expect_shape(const DLTensor* t, const std::vector<int64_t>& shape, const char* what);
void expect_dtype(const DLTensor* t, DType dtype, const char* what);
void expect_device(const DLTensor* t, Device device, const char* what);

// Exports an owning tensor: the DLManagedTensor holds a reference to the
// storage (and its own shape/strides arrays) until its deleter is called.
// A borrowed or undefined tensor is DS_ERR_INVALID_ARGUMENT.
DLManagedTensor* to_dlpack(const Tensor& t);

// Fills `out` as a view of `t`: data, shape and strides point into `t` and
// stay valid while `t` (and its shape) lives. byte_offset is 0.
void fill_view(const Tensor& t, DLTensor* out);

}  // namespace ds
