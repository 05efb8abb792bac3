// DType: the element types the library stores, with their DLPack encoding.
// Its values are the kernel dtype codes (kernels/dtype_codes.h): a DType and
// a kernel's dtype argument are the same number. The compute kernels take
// F32/F16/BF16 only.
#pragma once

#include <cstddef>
#include <cstdint>

#include <dlpack/dlpack.h>

#include "dtype_codes.h"

namespace ds {

enum class DType : int32_t {
    F32 = DSK_F32,
    F16 = DSK_F16,
    BF16 = DSK_BF16,
    I8 = DSK_I8,
    U8 = DSK_U8,
    I32 = DSK_I32,
    I64 = DSK_I64,
};

// Bytes per element.
size_t dtype_size(DType d);
// "fp32", "fp16", "bf16", "int8", "uint8", "int32", "int64".
const char* dtype_name(DType d);
// Inverse of dtype_name; DS_ERR_INVALID_ARGUMENT naming `name` otherwise.
DType dtype_from_name(const char* name);
// True for F32, F16, BF16.
bool dtype_is_float(DType d);

// DLPack encoding (lanes = 1).
DLDataType dtype_to_dl(DType d);
// Decodes a DLDataType; false when it is none of the seven (or lanes != 1).
bool dtype_from_dl(DLDataType t, DType* out) noexcept;
// As above, but throws DS_ERR_INVALID_ARGUMENT naming `what` (e.g. "grad"):
// "grad.dtype {code=2, bits=32, lanes=2}: lanes must be 1".
DType dtype_from_dl(DLDataType t, const char* what);

// The kernel code of d (the same number); other than F32/F16/BF16 throws
// DS_ERR_UNSUPPORTED (the kernels compute in floating point only).
int dtype_to_kernel(DType d);
// Inverse of dtype_to_kernel; a code other than DSK_F32/F16/BF16 throws
// DS_ERR_INVALID_ARGUMENT.
DType dtype_from_kernel(int code);

}  // namespace ds
