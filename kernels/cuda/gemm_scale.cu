// scale_c (cublas_gemm.h): C = beta C for the products that read neither A
// nor B (k 0, alpha 0), as the CPU's gemm does it; beta 0 writes zeros
// without reading C (NaN/Inf there do not propagate).
#include <cstdint>

#include "cublas_gemm.h"
#include "cuda_check.h"

namespace ds::kernels::cu {

__global__ void gemm_scale_c(float* c, int64_t m, int64_t n, int64_t ldc, int64_t stride_c, int64_t total,
                             float beta) {
    const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
        const int64_t j = i % n, r = (i / n) % m, b = i / (n * m);
        float* e = c + b * stride_c + r * ldc + j;
        *e = beta == 0.0f ? 0.0f : beta * *e;
    }
}

int scale_c(const char* kernel, const gemm::Problem& p, cudaStream_t stream) {
    if (p.m == 0 || p.n == 0 || p.batch == 0 || p.beta == 1.0f) return DSK_OK;
    const int64_t total = p.batch * p.m * p.n;  // C's spans fit int64 (checked), so does this
    const int64_t blocks = (total + 255) / 256;
    gemm_scale_c<<<static_cast<unsigned>(blocks < 65535 ? blocks : 65535), 256, 0, stream>>>(
        p.c, p.m, p.n, p.ldc, p.stride_c, total, p.beta);
    return cuda_launch_status(kernel);
}

}  // namespace ds::kernels::cu
