// Device side of the two-stage reductions (shape: ../elem/reduce_plan.h):
// K double sums per thread, tree-reduced per block into partials, then one
// block over the partials. Scratch for the partials comes from the kernels'
// scratch pool (scratch_pool.h) on the call's stream.
#pragma once

#include <cuda_runtime.h>

#include "../elem/reduce_plan.h"
#include "cuda_check.h"
#include "scratch_pool.h"

// A named namespace: nvcc's launch stubs cannot name a kernel in an
// anonymous namespace nested in a named one.
namespace ds::kernels::cu {

template <int K>
struct RedSums {
    double v[K];
};

// Every thread passes its K values; returns the block's sums (valid in thread 0).
template <int K>
__device__ RedSums<K> red_block_tree(RedSums<K> mine) {
    __shared__ double s[K][kRedThreads];
    const int t = static_cast<int>(threadIdx.x);
    for (int k = 0; k < K; ++k) s[k][t] = mine.v[k];
    __syncthreads();
    for (int w = kRedThreads / 2; w > 0; w /= 2) {
        if (t < w)
            for (int k = 0; k < K; ++k) s[k][t] += s[k][t + w];
        __syncthreads();
    }
    RedSums<K> r;
    for (int k = 0; k < K; ++k) r.v[k] = s[k][0];
    return r;
}

// Stage 2: one block of kRedThreads over `blocks` partials (K doubles each,
// partial j at parts[j*K + k]); fin(sums) runs in thread 0.
template <int K, class Fin>
__global__ void __launch_bounds__(kRedThreads) red_stage2(const double* parts, int blocks, Fin fin) {
    RedSums<K> mine;
    for (int k = 0; k < K; ++k) mine.v[k] = 0.0;
    for (int j = static_cast<int>(threadIdx.x); j < blocks; j += kRedThreads)
        for (int k = 0; k < K; ++k) mine.v[k] += parts[j * K + k];
    const RedSums<K> r = red_block_tree<K>(mine);
    if (threadIdx.x == 0) fin(r);
}

// Device scratch for one call, freed in stream order.
struct StreamScratch {
    cudaStream_t stream;
    void* p = nullptr;
    int alloc(const char* kernel, size_t bytes) {
        return scratch_alloc(kernel, "reduction scratch", &p, bytes, stream);
    }
    ~StreamScratch() { scratch_free(p, stream); }
};

}  // namespace ds::kernels::cu
