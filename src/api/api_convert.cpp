// C ABI: ds_convert, the library's SIMD fp32/fp16/bf16 casts for hosts
// (bindings would otherwise each hand-write half/bfloat16 conversion), and
// the same casts on a GPU for tensors in its memory (the CUDA kernel table).
// No engine, no state: thread-safe.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "api/api_guard.h"
#include "core/device_memory.h"
#include "core/dlpack_interop.h"
#include "core/kernel_backend.h"

using ds::api::require_arg;

namespace {

// The kernel code of a dtype ds_convert takes (the DType's own value).
int kernel_dtype(ds::DType d, const char* what) {
    DS_CHECK(ds::dtype_is_float(d), DS_ERR_INVALID_ARGUMENT, "%s.dtype = %s: ds_convert takes fp32, fp16 or bf16",
             what, ds::dtype_name(d));
    return static_cast<int>(d);
}

// A contiguous tensor of a float dtype on `device`; returns its first byte.
unsigned char* checked_buffer(const DLTensor* t, const char* what, ds::Device device, ds::DType* dtype) {
    ds::validate_dltensor(t, what);
    ds::expect_device(t, device, what);
    *dtype = ds::dtype_from_dl(t->dtype, what);
    kernel_dtype(*dtype, what);
    DS_CHECK(ds::dltensor_is_contiguous(t), DS_ERR_INVALID_ARGUMENT,
             "%s.strides: ds_convert needs contiguous (row-major) tensors", what);
    return static_cast<unsigned char*>(ds::dltensor_data(t));
}

}  // namespace

extern "C" {

DS_API ds_status_t ds_convert(const DLTensor* src, DLTensor* dst) {
    return DS_GUARDED({
        require_arg(src, "src");
        require_arg(dst, "dst");
        ds::DType sd, dd;
        ds::validate_dltensor(src, "src");
        const ds::Device dev = ds::Device::from_dl(src->device, "src");
        DS_CHECK(!dev.is_cuda() || ds::device_memory::available(), DS_ERR_UNSUPPORTED,
                 "src.device = %s: this build has no CUDA (rebuild with DS_WITH_CUDA=ON)", dev.str().c_str());
        const unsigned char* s = checked_buffer(src, "src", dev, &sd);
        unsigned char* d = checked_buffer(dst, "dst", dev, &dd);
        ds::expect_shape(dst, std::vector<int64_t>(src->shape, src->shape + src->ndim), "dst");
        const int64_t n = ds::dltensor_numel(src);
        if (n == 0) return;
        const size_t ss = ds::dtype_size(sd), dsz = ds::dtype_size(dd);
        const uintptr_t s0 = reinterpret_cast<uintptr_t>(s), d0 = reinterpret_cast<uintptr_t>(d);
        const uintptr_t s1 = s0 + static_cast<uintptr_t>(n) * ss, d1 = d0 + static_cast<uintptr_t>(n) * dsz;
        const bool same = s0 == d0 && sd == dd;
        DS_CHECK(same || s1 <= d0 || d1 <= s0, DS_ERR_INVALID_ARGUMENT,
                 "src and dst overlap (only the identical tensor may be both)");
        if (same) return;
        const int sk = kernel_dtype(sd, "src"), dk = kernel_dtype(dd, "dst");
        if (dev.is_cuda()) {
            // The device kernels load typed elements: device pointers must be aligned to them.
            DS_CHECK(s0 % ss == 0 && d0 % dsz == 0, DS_ERR_INVALID_ARGUMENT,
                     "%s.data + byte_offset is not aligned to its %zu-byte elements on %s", s0 % ss ? "src" : "dst",
                     s0 % ss ? ss : dsz, dev.str().c_str());
            ds::device_memory::DeviceScope scope(dev.index);
            ds::kernels_for(dev).convert(s, sk, d, dk, static_cast<size_t>(n));
            return;
        }
        const ds::Kernels k = ds::cpu_kernels();
        if (s0 % ss == 0 && d0 % dsz == 0) {
            k.convert(s, sk, d, dk, static_cast<size_t>(n));
            return;
        }
        // Misaligned: the kernels load through typed pointers, so go through
        // aligned staging blocks (alignment is never assumed of a DLTensor).
        constexpr size_t kBlock = 4096;
        alignas(64) static thread_local unsigned char in[kBlock * 4], out[kBlock * 4];
        for (int64_t i = 0; i < n; i += static_cast<int64_t>(kBlock)) {
            const size_t m = static_cast<size_t>(std::min<int64_t>(n - i, static_cast<int64_t>(kBlock)));
            std::memcpy(in, s + static_cast<size_t>(i) * ss, m * ss);
            k.convert(in, sk, out, dk, m);
            std::memcpy(d + static_cast<size_t>(i) * dsz, out, m * dsz);
        }
    });
}

}  // extern "C"
