// Memory on an accelerator (cuda:N), behind plain functions so that the
// allocator and Tensor never branch on the build: the CUDA runtime calls are
// in core/cuda/device_memory_cuda.cpp (built only with CUDA, target
// ds_core_cuda), and device_memory_nocuda.cpp is the same interface in a
// build without CUDA (available() false; the others are never reached, as
// their callers check available() first, and fail with DS_ERR_UNSUPPORTED).
// The allocator calls alloc/free through its block cache
// (core/device_block_cache.h), which reuses freed blocks.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ds::device_memory {

// Whether this build can hold memory on a CUDA device.
bool available() noexcept;
// cudaMalloc on device `index`, restoring the caller's current device.
// Failures: DS_ERR_DEVICE_OUT_OF_MEMORY naming `bytes` and `what`, or
// DS_ERR_DEVICE with the runtime's message.
void* alloc(size_t bytes, int32_t index, const char* what);
void free(void* ptr) noexcept;  // a failure here has no caller to report to
// Any direction (host <-> device, device <-> device), synchronous.
void copy(void* dst, const void* src, size_t bytes, const char* what);
void zero(void* ptr, size_t bytes, const char* what);

// Makes cuda:`index` the calling thread's current device while it lives and
// then restores the caller's: a library call that works on a device leaves
// the caller's current device as it found it. Construction fails with
// DS_ERR_DEVICE naming the ordinal (and the runtime's message).
class DeviceScope {
public:
    explicit DeviceScope(int32_t index);
    ~DeviceScope();
    DeviceScope(const DeviceScope&) = delete;
    DeviceScope& operator=(const DeviceScope&) = delete;

private:
    int prev_ = -1;  // the caller's device; -1: nothing to restore
};

}  // namespace ds::device_memory
