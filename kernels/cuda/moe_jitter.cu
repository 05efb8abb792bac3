// dsk_cuda_moe_jitter (nn_moe.h): the MoE gate's Jitter factors drawn on the
// device from the stream the CPU draws them from, with the per-element code
// of ../elem/moe_jitter.h (the CPU kernel's too): one thread per element,
// each computing its own Philox block (the tensor is [tokens, C], small
// next to the experts' matmuls), the CPU kernel's values bit for bit.
#include <cinttypes>

#include "../elem/moe_jitter.h"
#include "cuda_check.h"

using namespace ds::kernels;

namespace ds::kernels::cu {

__global__ void moe_jitter(const float* src, size_t n, DropoutStream st, uint64_t offset, uint64_t first,
                           int accumulate, float* dst) {
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
        moe_jitter_elem(src, st, offset, first, accumulate, i, dst);
}

}  // namespace ds::kernels::cu

extern "C" int dsk_cuda_moe_jitter(const float* src, int64_t n, const dsk_dropout_key* key, uint64_t first,
                                   int accumulate, float* dst, void* stream) noexcept {
    const char* kernel = "dsk_cuda_moe_jitter";
    if (n < 0) return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: n = %" PRId64 " is negative", kernel, n);
    ArgCheck k(kernel);
    if (k.ptr("src", src, static_cast<size_t>(n)).ptr("dst", dst, static_cast<size_t>(n)).failed()) return k.status();
    if (key == nullptr) return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: key is NULL", kernel);
    if (n == 0) return DSK_OK;
    const size_t want = (static_cast<size_t>(n) + 255) / 256;
    const unsigned grid = static_cast<unsigned>(want < 65535 ? want : 65535);
    cu::moe_jitter<<<grid, 256, 0, static_cast<cudaStream_t>(stream)>>>(src, static_cast<size_t>(n),
                                                                         dropout_stream(*key), key->offset, first,
                                                                         accumulate, dst);
    return cuda_launch_status(kernel);
}
