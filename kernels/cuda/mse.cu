// dsk_cuda_mse_fwd / _bwd (nn_ops.h semantics): the sum of squared
// differences in double by the two-stage reduction of sumsq.cu (shape:
// ../elem/reduce_plan.h, order a function of n only), and the gradient with
// the CPU kernel's element expression (../elem/mse.h).
#include "../elem/mse.h"
#include "reduce2.cuh"

using namespace ds::kernels;
using namespace ds::kernels::cu;

namespace ds::kernels::cu {

__global__ void __launch_bounds__(kRedThreads) mse_stage1(const float* pred, const float* target, size_t n,
                                                           double* parts) {
    double acc = 0.0;
    const size_t stride = static_cast<size_t>(gridDim.x) * kRedThreads;
    for (size_t i = static_cast<size_t>(blockIdx.x) * kRedThreads + threadIdx.x; i < n; i += stride)
        acc += mse_term(pred, target, i);
    const RedSums<1> r = red_block_tree<1>(RedSums<1>{{acc}});
    if (threadIdx.x == 0) parts[blockIdx.x] = r.v[0];
}

struct StoreMse {
    double* out;
    __device__ void operator()(const RedSums<1>& r) const { *out = r.v[0]; }
};

__global__ void mse_grad(const float* pred, const float* target, size_t n, float scale, float* dpred) {
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
        dpred[i] = mse_grad_elem(pred[i], target[i], scale);
}

}  // namespace ds::kernels::cu

extern "C" int dsk_cuda_mse_fwd(const float* pred, const float* target, size_t n, double* sum_sq,
                                void* stream) noexcept {
    const char* kernel = "dsk_cuda_mse_fwd";
    ArgCheck k(kernel);
    if (k.ptr("pred", pred, n).ptr("target", target, n).ptr("sum_sq", sum_sq, 1).failed()) return k.status();
    double s = 0.0;
    if (n > 0) {
        const cudaStream_t st = static_cast<cudaStream_t>(stream);
        const int blocks = red_blocks(n);
        StreamScratch scratch{st};
        if (const int rc = scratch.alloc(kernel, sizeof(double) * (blocks + 1))) return rc;
        double* parts = static_cast<double*>(scratch.p);
        mse_stage1<<<blocks, kRedThreads, 0, st>>>(pred, target, n, parts);
        red_stage2<1><<<1, kRedThreads, 0, st>>>(parts, blocks, StoreMse{parts + blocks});
        if (const int rc = cuda_launch_status(kernel)) return rc;
        if (const int rc = cuda_status(kernel, "cudaMemcpyAsync (result)",
                                       cudaMemcpyAsync(&s, parts + blocks, sizeof s, cudaMemcpyDeviceToHost, st)))
            return rc;
        if (const int rc = cuda_status(kernel, "cudaStreamSynchronize", cudaStreamSynchronize(st))) return rc;
    }
    *sum_sq = s;
    return DSK_OK;
}

extern "C" int dsk_cuda_mse_bwd(const float* pred, const float* target, size_t n, float scale, float* dpred,
                                void* stream) noexcept {
    const char* kernel = "dsk_cuda_mse_bwd";
    ArgCheck k(kernel);
    if (k.ptr("pred", pred, n).ptr("target", target, n).ptr("dpred", dpred, n).failed()) return k.status();
    if (n == 0) return DSK_OK;
    const size_t want = (n + 255) / 256;
    mse_grad<<<static_cast<unsigned>(want < 65535 ? want : 65535), 256, 0, static_cast<cudaStream_t>(stream)>>>(
        pred, target, n, scale, dpred);
    return cuda_launch_status(kernel);
}
