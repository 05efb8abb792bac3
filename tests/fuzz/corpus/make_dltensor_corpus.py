#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_dltensor (tests/fuzz/corpus/dltensor/).
Layout: see tests/fuzz/fuzz_dltensor.cpp. One file per case, named for it."""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dltensor")
FLOAT, INT, UINT, BFLOAT = 2, 0, 1, 4
CPU, CUDA = 1, 2


def seed(ndim, code, bits, lanes=1, dev=CPU, dev_id=0, off=0, null=False, strides=None, mis=0, shape=()):
    flags = (1 if null else 0) | (2 if strides is not None else 0) | ((mis & 15) << 4)
    b = struct.pack("<bBBHiiQB", ndim, code, bits, lanes, dev, dev_id, off, flags)
    b += b"".join(struct.pack("<q", s) for s in shape)
    if strides is not None:
        b += b"".join(struct.pack("<q", s) for s in strides)
    return b


CASES = {
    "f32_vec": seed(1, FLOAT, 32, shape=(16,)),
    "f16_matrix": seed(2, FLOAT, 16, shape=(4, 8)),
    "bf16_matrix_misaligned": seed(2, BFLOAT, 16, shape=(3, 5), mis=1),
    "f32_scalar": seed(0, FLOAT, 32),
    "f32_colmajor": seed(2, FLOAT, 32, shape=(4, 6), strides=(1, 4)),
    "f32_broadcast_stride0": seed(2, FLOAT, 32, shape=(8, 8), strides=(0, 1)),
    "int64_offset": seed(1, INT, 64, shape=(10,), off=24),
    "uint8_odd": seed(3, UINT, 8, shape=(2, 3, 5), mis=7),
    "zero_dim_huge_dim": seed(3, FLOAT, 32, shape=(0, 1 << 62, 4)),
    "zero_dim_huge_strides": seed(2, FLOAT, 32, shape=(0, 1 << 62), strides=(1 << 62, 1 << 62)),
    "numel_overflow": seed(2, FLOAT, 32, shape=(1 << 32, 1 << 32)),
    "bytes_overflow": seed(1, FLOAT, 32, shape=(1 << 62,)),
    "negative_dim": seed(2, FLOAT, 32, shape=(4, -3)),
    "negative_stride": seed(1, FLOAT, 32, shape=(4,), strides=(-1,)),
    "stride_overflow": seed(2, FLOAT, 32, shape=(3, 3), strides=(1 << 62, 1 << 62)),
    "ndim_negative": seed(-1, FLOAT, 32),
    "ndim_33": seed(33, FLOAT, 32, shape=(1,) * 33),
    "device_out_of_range": seed(1, FLOAT, 32, dev=0x7FFFFFFF, shape=(4,)),
    "device_negative": seed(1, FLOAT, 32, dev=-5, shape=(4,)),
    "device_cuda_negative_id": seed(1, FLOAT, 32, dev=CUDA, dev_id=-1, shape=(4,)),
    "device_cuda": seed(1, FLOAT, 32, dev=CUDA, dev_id=0, shape=(4,)),
    "lanes_4": seed(1, FLOAT, 32, lanes=4, shape=(4,)),
    "dtype_f64": seed(1, FLOAT, 64, shape=(4,)),
    "dtype_code_200": seed(1, 200, 32, shape=(4,)),
    "data_null_with_elements": seed(1, FLOAT, 32, null=True, shape=(4,)),
    "data_null_empty": seed(1, FLOAT, 32, null=True, shape=(0,)),
    "byte_offset_huge": seed(1, FLOAT, 32, off=(1 << 64) - 8, shape=(4,)),
    "byte_offset_int64_max": seed(1, FLOAT, 32, off=(1 << 63), shape=(1,)),
    "short_input": b"\x02\x02",
    "empty_input": b"",
}

os.makedirs(OUT, exist_ok=True)
for name, data in CASES.items():
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)
print(f"{len(CASES)} seeds in {OUT}")
