// Fuzz target for the DLTensor checks every entry point applies to a
// caller's tensor (core/dlpack_interop.cpp): the input bytes become the
// DLTensor fields, including values a C caller can produce but the types
// do not "allow" (an out-of-range DLDeviceType, ndim < 0 or > 32, negative
// or huge dims and strides, a zero dim beside a 2^62 one, byte_offset near
// 2^64, NULL or misaligned data). Every input must either be rejected with
// DS_ERR_INVALID_ARGUMENT or accepted with consistent answers; when the
// accepted tensor lies inside our buffer its elements are also read and
// converted (ds_convert, Tensor copies). No crash, no UB under UBSan.
//
// Input layout (little-endian; missing bytes read as 0):
//   0      int8   ndim
//   1..4   u8 dtype.code, u8 dtype.bits, u16 dtype.lanes
//   5..12  int32 device_type (raw: any value), int32 device_id
//   13..20 u64 byte_offset
//   21     u8 flags: bit0 data = NULL, bit1 strides present, bits 4-7 data misalignment
//   22..   int64 shape[k], then int64 strides[k] if bit1 (k = clamp(ndim, 0, 40))
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/allocator.h"
#include "core/dlpack_interop.h"
#include "core/error.h"
#include "deepspeed_c.h"

namespace {

struct Reader {
    const uint8_t* p;
    size_t n, pos = 0;
    void read(void* out, size_t k) {
        std::memset(out, 0, k);
        const size_t have = pos < n ? (n - pos < k ? n - pos : k) : 0;
        if (have) std::memcpy(out, p + pos, have);
        pos += k;
    }
    template <class T>
    T get() {
        T v;
        read(&v, sizeof v);
        return v;
    }
};

constexpr size_t kBuf = 1 << 16;
alignas(64) unsigned char g_buf[kBuf + 64];
alignas(64) unsigned char g_out[4 * kBuf + 64];

// Bytes the accepted tensor spans from its data pointer, or -1 if more than `limit`.
int64_t span_bytes(const DLTensor& t, size_t esize, int64_t limit) {
    __int128 extent = 0;  // largest element offset
    for (int i = 0; i < t.ndim; ++i)
        if (t.shape[i] == 0) return 0;  // empty: before any product (other dims may be huge)
    for (int i = 0; i < t.ndim; ++i) {
        const int64_t stride = t.strides ? t.strides[i] : 0;
        if (!t.strides) {
            __int128 n = 1;
            for (int j = 0; j < t.ndim; ++j) n *= t.shape[j];
            extent = n - 1;
            break;
        }
        extent += static_cast<__int128>(t.shape[i] - 1) * stride;
    }
    const __int128 bytes = (extent + 1) * static_cast<__int128>(esize) + t.byte_offset;
    return bytes > limit ? -1 : static_cast<int64_t>(bytes);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    Reader r{data, size};
    DLTensor t;
    std::memset(&t, 0, sizeof t);
    t.ndim = r.get<int8_t>();
    t.dtype.code = r.get<uint8_t>();
    t.dtype.bits = r.get<uint8_t>();
    t.dtype.lanes = r.get<uint16_t>();
    const int32_t device_type = r.get<int32_t>();
    std::memcpy(&t.device.device_type, &device_type, sizeof device_type);  // as a C caller can
    t.device.device_id = r.get<int32_t>();
    t.byte_offset = r.get<uint64_t>();
    const uint8_t flags = r.get<uint8_t>();
    const int k = t.ndim < 0 ? 0 : (t.ndim > 40 ? 40 : t.ndim);
    std::vector<int64_t> shape(static_cast<size_t>(k) + 1), strides(static_cast<size_t>(k) + 1);
    for (int i = 0; i < k; ++i) shape[i] = r.get<int64_t>();
    if (flags & 2)
        for (int i = 0; i < k; ++i) strides[i] = r.get<int64_t>();
    t.shape = shape.data();
    t.strides = (flags & 2) ? strides.data() : nullptr;
    t.data = (flags & 1) ? nullptr : g_buf + (flags >> 4);

    bool valid = false;
    try {
        ds::validate_dltensor(&t, "fuzz");
        valid = true;
    } catch (const ds::Error& e) {
        if (e.status() != DS_ERR_INVALID_ARGUMENT) __builtin_trap();
    } catch (...) {
        __builtin_trap();
    }
    if (!valid) {
        // The C entry point must agree, and never throw across the ABI.
        if (ds_convert(&t, &t) != DS_ERR_INVALID_ARGUMENT) __builtin_trap();
        return 0;
    }
    try {
        const int64_t numel = ds::dltensor_numel(&t);
        if (numel < 0 || (numel > 0 && t.data == nullptr)) __builtin_trap();
        const bool contiguous = ds::dltensor_is_contiguous(&t);
        ds::Tensor view = ds::from_dltensor(&t, "fuzz", false);
        if (view.numel() != numel) __builtin_trap();
        ds::expect_shape(&t, view.shape(), "fuzz");
        ds::expect_dtype(&t, view.dtype(), "fuzz");
        ds::expect_device(&t, view.device(), "fuzz");
        const size_t esize = ds::dtype_size(view.dtype());
        const int64_t span = span_bytes(t, esize, static_cast<int64_t>(kBuf));
        if (span < 0 || t.data == nullptr || view.device() != ds::Device::cpu()) return 0;
        // Inside our buffer: read the elements for real.
        if (ds::dtype_is_float(view.dtype()) && contiguous && numel > 0) {
            DLTensor out = t;
            out.data = g_out + 1;  // misaligned on purpose
            out.byte_offset = 0;
            out.strides = nullptr;
            out.dtype.code = kDLFloat;
            out.dtype.bits = 32;
            out.dtype.lanes = 1;
            if (static_cast<size_t>(numel) * 4 <= 4 * kBuf && ds_convert(&t, &out) != DS_OK) __builtin_trap();
        }
        if (numel > 0 && numel <= static_cast<int64_t>(kBuf)) {
            ds::Allocator alloc;
            ds::Tensor copy = ds::Tensor::empty(view.shape(), view.dtype(), ds::Device::cpu(), alloc,
                                                ds::MemCategory::Buffers);
            copy.copy_from(view);
        }
    } catch (const ds::Error& e) {
        __builtin_trap();  // accepted tensors must work
    }
    return 0;
}
