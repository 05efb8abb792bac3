// Block-wide float reductions of the row kernels (one block per row):
// warp shuffles, then the warps' results combined by warp 0. The order is
// fixed by the block size, so a row's result is the same run to run.
#pragma once

#include <cuda_runtime.h>

namespace ds::kernels::cu {

constexpr int kRowThreads = 256;  // a multiple of 32, at most 1024

template <class Op>
__device__ __forceinline__ float warp_reduce(float v, Op op) {
    for (int o = 16; o > 0; o /= 2) v = op(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
    return v;
}

// Every thread of the block passes v and gets the block's op-reduction.
template <class Op>
__device__ float block_reduce(float v, Op op) {
    __shared__ float warps[kRowThreads / 32];
    __shared__ float result;
    const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
    v = warp_reduce(v, op);
    if (lane == 0) warps[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float w = warps[0];
        for (int i = 1; i < kRowThreads / 32; ++i) w = lane == 0 ? op(w, warps[i]) : w;
        if (lane == 0) result = w;
    }
    __syncthreads();
    const float r = result;
    __syncthreads();  // `result` and `warps` are reused by the next call
    return r;
}

struct SumOp {
    __device__ float operator()(float a, float b) const { return a + b; }
};
struct MaxOp {
    __device__ float operator()(float a, float b) const { return fmaxf(a, b); }  // a NaN is skipped
};

}  // namespace ds::kernels::cu
