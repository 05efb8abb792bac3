// The one CUDA kernel of the multi-tensor optimizers: block b of a launch
// runs mt_step_block (kernels/elem/multi_tensor.h) on its chunk. The host
// tests run the same function for every (block, thread), so what is left
// untested without a GPU is this launch.
#pragma once

#include <cuda_runtime.h>

#include "../elem/optim_mt.h"
#include "cuda_check.h"

// A named namespace: nvcc's launch stubs cannot name a kernel in an
// anonymous namespace nested in a named one.
namespace ds::kernels::cu {

template <class Make>
__global__ void __launch_bounds__(kMtThreads) mt_step_kernel(const MtLaunch l, const Make make) {
    mt_step_block(l, static_cast<int>(blockIdx.x), static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x),
                  make);
}

// exec for adam_mt / sgd_mt / lion_mt: one launch on `stream`.
struct MtLaunchOn {
    cudaStream_t stream;
    const char* kernel;
    template <class Make>
    int operator()(const MtLaunch& l, const Make& make) const {
        mt_step_kernel<<<l.blocks, kMtThreads, 0, stream>>>(l, make);
        return cuda_launch_status(kernel);
    }
};

}  // namespace ds::kernels::cu
