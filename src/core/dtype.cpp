#include "core/dtype.h"

#include <cstring>

#include "core/error.h"

namespace ds {

namespace {

struct DTypeInfo {
    DType dtype;
    const char* name;
    uint8_t dl_code;
    uint8_t bits;
};

// One row per DType, in enum order.
constexpr DTypeInfo kTable[] = {
    {DType::F32, "fp32", kDLFloat, 32},  {DType::F16, "fp16", kDLFloat, 16},
    {DType::BF16, "bf16", kDLBfloat, 16}, {DType::I8, "int8", kDLInt, 8},
    {DType::U8, "uint8", kDLUInt, 8},     {DType::I32, "int32", kDLInt, 32},
    {DType::I64, "int64", kDLInt, 64},
};
constexpr int kCount = static_cast<int>(sizeof(kTable) / sizeof(kTable[0]));

const DTypeInfo& info(DType d) {
    int i = static_cast<int>(d);
    DS_CHECK(i >= 0 && i < kCount, DS_ERR_INTERNAL, "invalid DType value %d", i);
    return kTable[i];
}

}  // namespace

size_t dtype_size(DType d) { return info(d).bits / 8; }

const char* dtype_name(DType d) { return info(d).name; }

DType dtype_from_name(const char* name) {
    DS_CHECK(name != nullptr, DS_ERR_INVALID_ARGUMENT, "dtype name is NULL");
    for (const auto& row : kTable)
        if (std::strcmp(row.name, name) == 0) return row.dtype;
    fail(DS_ERR_INVALID_ARGUMENT,
         "unknown dtype \"%s\" (expected fp32, fp16, bf16, int8, uint8, int32 or int64)", name);
}

bool dtype_is_float(DType d) { return d == DType::F32 || d == DType::F16 || d == DType::BF16; }

DLDataType dtype_to_dl(DType d) {
    const DTypeInfo& r = info(d);
    DLDataType t;
    t.code = r.dl_code;
    t.bits = r.bits;
    t.lanes = 1;
    return t;
}

bool dtype_from_dl(DLDataType t, DType* out) noexcept {
    if (t.lanes != 1) return false;
    for (const auto& row : kTable) {
        if (row.dl_code == t.code && row.bits == t.bits) {
            *out = row.dtype;
            return true;
        }
    }
    return false;
}

DType dtype_from_dl(DLDataType t, const char* what) {
    if (!what) what = "tensor";
    DS_CHECK(t.lanes == 1, DS_ERR_INVALID_ARGUMENT,
             "%s.dtype {code=%u, bits=%u, lanes=%u}: lanes must be 1", what, unsigned(t.code),
             unsigned(t.bits), unsigned(t.lanes));
    DType d;
    if (!dtype_from_dl(t, &d))
        fail(DS_ERR_INVALID_ARGUMENT,
             "%s.dtype {code=%u, bits=%u, lanes=%u}: unsupported dtype (supported: float32, "
             "float16, bfloat16, int8, uint8, int32, int64)",
             what, unsigned(t.code), unsigned(t.bits), unsigned(t.lanes));
    return d;
}

int dtype_to_kernel(DType d) {
    if (!dtype_is_float(d))
        fail(DS_ERR_UNSUPPORTED, "dtype %s is not supported by the compute kernels (fp32, fp16, bf16 only)",
             dtype_name(d));
    return static_cast<int>(d);
}

DType dtype_from_kernel(int code) {
    if (code != DSK_F32 && code != DSK_F16 && code != DSK_BF16)
        fail(DS_ERR_INVALID_ARGUMENT, "unknown kernel dtype code %d", code);
    return static_cast<DType>(code);
}

}  // namespace ds
