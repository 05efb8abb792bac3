// dsk_cuda_dropout_fwd / _bwd / _apply: the mask of the CPU kernels (the
// same Philox4x32-10 stream, ../elem/dropout.h and ../cpu/philox.h),
// regenerated per call. One thread per Philox block of 4 stream elements.
#include <cmath>

#include "../elem/dropout.h"
#include "cuda_check.h"

using namespace ds::kernels;

namespace ds::kernels::cu {

constexpr int kDropThreads = 256;

// Thread b: Philox block b of the buffer (dropout_block, ../elem/dropout.h).
__global__ void __launch_bounds__(kDropThreads) dropout_kernel(const float* x, float* y, size_t n, uint64_t e0,
                                                                uint64_t blocks, DropoutStream st, uint32_t thr,
                                                                float scale) {
    const uint64_t stride = static_cast<uint64_t>(gridDim.x) * kDropThreads;
    for (uint64_t b = static_cast<uint64_t>(blockIdx.x) * kDropThreads + threadIdx.x; b < blocks; b += stride)
        dropout_block(x, y, n, e0, b, st, thr, scale);
}

}  // namespace ds::kernels::cu

namespace {

int dropout(const char* kernel, const char* in_name, const char* out_name, const float* x, float* y, size_t n,
            float p, const dsk_dropout_key* key, void* stream) {
    ArgCheck k(kernel);
    if (k.ptr(in_name, x, n).ptr(out_name, y, n).failed()) return k.status();
    if (key == nullptr) return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: key is NULL", kernel);
    if (!(p >= 0.0f && p <= 1.0f))
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: p = %g is not in [0, 1]", kernel, static_cast<double>(p));
    if (n == 0) return DSK_OK;
    const cudaStream_t st = static_cast<cudaStream_t>(stream);
    if (p == 1.0f)  // everything dropped (the scale 1/(1-p) would be infinite), as the CPU kernel
        return cuda_status(kernel, "cudaMemsetAsync", cudaMemsetAsync(y, 0, n * sizeof(float), st));
    const uint32_t thr = static_cast<uint32_t>(dsk_dropout_threshold(p));
    const float scale = 1.0f / (1.0f - p);
    const uint64_t e0 = key->offset;
    const uint64_t blocks = dropout_blocks_for(e0, n);
    const uint64_t want = (blocks + cu::kDropThreads - 1) / cu::kDropThreads;
    const unsigned grid = static_cast<unsigned>(want < 65535 ? want : 65535);
    cu::dropout_kernel<<<grid, cu::kDropThreads, 0, st>>>(x, y, n, e0, blocks, dropout_stream(*key), thr, scale);
    return cuda_launch_status(kernel);
}

}  // namespace

extern "C" int dsk_cuda_dropout_fwd(const float* x, float* y, size_t n, float p, const dsk_dropout_key* key,
                                    void* stream) noexcept {
    return dropout("dsk_cuda_dropout_fwd", "x", "y", x, y, n, p, key, stream);
}

extern "C" int dsk_cuda_dropout_bwd(const float* dy, float* dx, size_t n, float p, const dsk_dropout_key* key,
                                    void* stream) noexcept {
    return dropout("dsk_cuda_dropout_bwd", "dy", "dx", dy, dx, n, p, key, stream);
}

extern "C" int dsk_cuda_dropout_apply(float* x, size_t n, float p, const dsk_dropout_key* key, void* stream) noexcept {
    return dropout("dsk_cuda_dropout_apply", "x", "x", x, x, n, p, key, stream);
}
