// DType: the element types the library stores, with their DLPack and kernel
// encodings. Only F32/F16/BF16 have kernel codes (kernels/kernels.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include <dlpack/dlpack.h>

namespace ds {

enum class DType : int32_t { F32, F16, BF16, I8, U8, I32, I64 };

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

// DSK_F32 / DSK_F16 / DSK_BF16; other dtypes throw DS_ERR_UNSUPPORTED.
int dtype_to_kernel(DType d);
// Inverse of dtype_to_kernel; an unknown code throws DS_ERR_INVALID_ARGUMENT.
DType dtype_from_kernel(int code);

}  // namespace ds
