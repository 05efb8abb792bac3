// device_memory.h's runtime: the CUDA runtime.
#include <cuda_runtime.h>

#include "core/device_memory.h"
#include "core/error.h"
#include "cuda_kernels.h"

namespace ds::device_memory::runtime {

namespace {

void check(cudaError_t e, const char* op) {
    if (e == cudaSuccess) return;
    cudaGetLastError();  // clear the (non-sticky) error
    fail(DS_ERR_DEVICE, "%s failed: %s", op, cudaGetErrorString(e));
}

}  // namespace

bool available() noexcept { return true; }

void* alloc(size_t bytes, int32_t index, const char* what) {
    int prev = 0;
    cudaError_t e = cudaGetDevice(&prev);
    if (e == cudaSuccess && prev != index) e = cudaSetDevice(index);
    if (e != cudaSuccess) {
        cudaGetLastError();
        fail(DS_ERR_DEVICE, "cannot select cuda:%d: %s", index, cudaGetErrorString(e));
    }
    void* p = nullptr;
    e = cudaMalloc(&p, bytes);
    if (e == cudaErrorMemoryAllocation) {
        // The kernels' scratch pool keeps what it reserved (scratch_pool.h):
        // its free part goes back to the driver and cudaMalloc is tried again.
        cudaGetLastError();
        if (dsk_cuda_release_scratch(index) == DSK_OK) e = cudaMalloc(&p, bytes);
    }
    if (prev != index) cudaSetDevice(prev);
    if (e != cudaSuccess) {
        cudaGetLastError();
        if (e == cudaErrorMemoryAllocation)
            fail(DS_ERR_DEVICE_OUT_OF_MEMORY, "out of memory on cuda:%d allocating %zu bytes for %s", index, bytes,
                 what);
        fail(DS_ERR_DEVICE, "cudaMalloc of %zu bytes for %s on cuda:%d failed: %s", bytes, what, index,
             cudaGetErrorString(e));
    }
    return p;
}

// Failures ignored here (nobody to report to) must not stay the thread's last
// CUDA error, which the kernels' next launch check would report as its own.
void free(void* ptr) noexcept {
    if (cudaFree(ptr) != cudaSuccess) cudaGetLastError();
}

void release_kernel_scratch() noexcept { dsk_cuda_release_scratch(-1); }

void copy(void* dst, const void* src, size_t bytes, const char* what) {
    check(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), what);
}

void zero(void* ptr, size_t bytes, const char* what) { check(cudaMemset(ptr, 0, bytes), what); }

void copy_on_stream(void* dst, const void* src, size_t bytes, void* stream, const char* what) {
    const auto s = static_cast<cudaStream_t>(stream);
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s), what);
    check(cudaStreamSynchronize(s), what);
}

void order_after(void* waiter, void* signaler, const char* what) {
    // null means the legacy default stream here, also when a translation unit
    // was built with per-thread default streams.
    const auto stream = [](void* s) { return s ? static_cast<cudaStream_t>(s) : cudaStreamLegacy; };
    if (stream(waiter) == stream(signaler)) return;
    cudaEvent_t ev = nullptr;
    check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), what);
    cudaError_t e = cudaEventRecord(ev, stream(signaler));
    if (e == cudaSuccess) e = cudaStreamWaitEvent(stream(waiter), ev, 0);
    // Destroying an event that a stream still waits for is allowed: the
    // runtime releases it once the wait is over.
    cudaEventDestroy(ev);
    check(e, what);
}

static cudaStream_t as_stream(void* s) { return s ? static_cast<cudaStream_t>(s) : cudaStreamLegacy; }

void* stream_create(const char* what) {
    cudaStream_t s = nullptr;
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), what);
    return s;
}

void stream_destroy(void* stream) noexcept {
    if (stream == nullptr) return;
    auto s = static_cast<cudaStream_t>(stream);
    if (cudaStreamSynchronize(s) != cudaSuccess) cudaGetLastError();
    if (cudaStreamDestroy(s) != cudaSuccess) cudaGetLastError();
}

void* event_create(const char* what) {
    cudaEvent_t e = nullptr;
    check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), what);
    return e;
}

void event_destroy(void* event) noexcept {
    if (event != nullptr && cudaEventDestroy(static_cast<cudaEvent_t>(event)) != cudaSuccess) cudaGetLastError();
}

void event_record(void* event, void* stream, const char* what) {
    check(cudaEventRecord(static_cast<cudaEvent_t>(event), as_stream(stream)), what);
}

void event_synchronize(void* event, const char* what) {
    check(cudaEventSynchronize(static_cast<cudaEvent_t>(event)), what);
}

void stream_wait_event(void* stream, void* event, const char* what) {
    check(cudaStreamWaitEvent(as_stream(stream), static_cast<cudaEvent_t>(event), 0), what);
}

void copy_async(void* dst, const void* src, size_t bytes, void* stream, const char* what) {
    if (bytes == 0) return;
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, as_stream(stream)), what);
}

void pin(void* ptr, size_t bytes, const char* what) {
    check(cudaHostRegister(ptr, bytes, cudaHostRegisterDefault), what);
}

void unpin(void* ptr) noexcept {
    if (cudaHostUnregister(ptr) != cudaSuccess) cudaGetLastError();
}

int select(int32_t index) {
    int prev = 0;
    cudaError_t e = cudaGetDevice(&prev);
    if (e == cudaSuccess && prev != index) e = cudaSetDevice(index);
    if (e != cudaSuccess) {
        cudaGetLastError();
        fail(DS_ERR_DEVICE, "cannot select cuda:%d: %s", index, cudaGetErrorString(e));
    }
    return prev != index ? prev : -1;
}

void restore(int prev) noexcept {
    if (cudaSetDevice(prev) != cudaSuccess) cudaGetLastError();
}

}  // namespace ds::device_memory::runtime
