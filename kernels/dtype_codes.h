/*
 * dtype_codes.h — the element-type codes of the whole library, in C.
 * ds::DType (src/core/dtype.h) defines its enumerators from these, so a
 * DType and a kernel dtype argument are the same number. The compute kernels
 * take DSK_F32, DSK_F16 and DSK_BF16 only; the integer codes exist for the
 * tensors the library stores (DLPack's DLDataType stays the ABI's encoding).
 */
#ifndef DS_KERNELS_DTYPE_CODES_H
#define DS_KERNELS_DTYPE_CODES_H

typedef enum dsk_dtype {
    DSK_F32 = 0,
    DSK_F16 = 1,
    DSK_BF16 = 2,
    DSK_I8 = 3,
    DSK_U8 = 4,
    DSK_I32 = 5,
    DSK_I64 = 6
} dsk_dtype;

#endif /* DS_KERNELS_DTYPE_CODES_H */
