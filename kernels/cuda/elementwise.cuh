// The grid-stride kernel of the element-wise ops (convert, scale, axpy):
// body.step<ScalarOps>(i) for every i < n, the bodies of ../elem/.
#pragma once

#include <cuda_runtime.h>

#include "../elem/simd_dtype.h"
#include "../elem/simd_scalar.h"
#include "cuda_check.h"

namespace ds::kernels::cu {

constexpr int kEwThreads = 256;
constexpr size_t kEwMaxBlocks = 65535;

template <class Body>
__global__ void __launch_bounds__(kEwThreads) elementwise_kernel(const Body body, size_t n) {
    const size_t stride = static_cast<size_t>(gridDim.x) * kEwThreads;
    for (size_t i = static_cast<size_t>(blockIdx.x) * kEwThreads + threadIdx.x; i < n; i += stride)
        body.template step<ScalarOps>(i);
}

// One launch of body over [0, n) on stream (n > 0).
template <class Body>
int launch_elementwise(const char* kernel, const Body& body, size_t n, cudaStream_t stream) {
    const size_t want = (n + kEwThreads - 1) / kEwThreads;
    const unsigned blocks = static_cast<unsigned>(want < kEwMaxBlocks ? want : kEwMaxBlocks);
    elementwise_kernel<<<blocks, kEwThreads, 0, stream>>>(body, n);
    return cuda_launch_status(kernel);
}

}  // namespace ds::kernels::cu
