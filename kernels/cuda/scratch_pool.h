// Stream-ordered scratch of the CUDA kernels: the reductions' partial sums,
// the bf16 copies of GEMM operands, the attention's [B, H, T, T] buffers.
//
// cudaMallocAsync draws from the device's default memory pool, whose release
// threshold is 0: at every synchronization (a host wait on an event or a
// stream, of which an engine's step has several) it hands its free memory
// back to the driver, and the next call's scratch is mapped afresh. These
// come from a pool of the library's own per device instead, which keeps
// what it reserved (release threshold unlimited, as a caching allocator
// does), so scratch freed before a synchronization is reused after it. The
// default pool, which the host program may use and tune, is left alone.
// Where a device has no memory pools (cudaDevAttrMemoryPoolsSupported 0) or
// the pool cannot be made, cudaMallocAsync serves as before.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace ds::kernels::cu {

// *p = `bytes` of memory on `stream`'s device (the current device for the
// legacy stream), for work queued on `stream` from now on. DSK_ERR_CUDA
// "<kernel>: <call> (<what>) failed: ..." when it cannot be had.
int scratch_alloc(const char* kernel, const char* what, void** p, size_t bytes, cudaStream_t stream);

// Back to its pool once the work queued on `stream` so far is done. An error
// is cleared (not left for the next launch to report).
void scratch_free(void* p, cudaStream_t stream) noexcept;

// The pool scratch comes from on `device`: null where cudaMallocAsync's
// default pool serves. For tests.
cudaMemPool_t scratch_pool(int device);

}  // namespace ds::kernels::cu
