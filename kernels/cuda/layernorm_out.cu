// dsk_cuda_layernorm_bwd_from_output (nn_ops.h semantics): LayerNorm's
// backward from its output, xhat = (y - beta)/gamma, as layernorm.cu's
// ordinary backward otherwise (dx one block per row; dgamma/dbeta by column
// over fixed groups of rows, the groups summed in order). The per-thread
// code and the block's reduction order are ../elem/layernorm_out.h. With
// gamma, 1/gamma is formed on the device and checked for a zero gamma (the
// smallest such index, an integer atomicMin), and the call waits for that
// check so that the error comes back as on the CPU.
#include <cinttypes>

#include "../elem/layernorm_out.h"
#include "reduce2.cuh"

using namespace ds::kernels;
using namespace ds::kernels::cu;

namespace ds::kernels::cu {

__global__ void lno_inv(const float* gamma, float* inv, size_t dim, unsigned long long* first_zero) {
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t j = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < dim; j += stride)
        if (!lno_inv_gamma(gamma, inv, j)) atomicMin(first_zero, static_cast<unsigned long long>(j));
}

__global__ void lno_cols(LnoArgs a, size_t rows, size_t groups, float* part_g, float* part_b) {
    const size_t j = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (j >= a.dim) return;
    for (size_t g = blockIdx.y; g < groups; g += gridDim.y) lno_col_partial(a, rows, g, j, part_g, part_b);
}

__global__ void lno_cols_total(const float* part_g, const float* part_b, size_t groups, size_t dim, float* dgamma,
                               float* dbeta) {
    const size_t j = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (j < dim) lno_col_total(part_g, part_b, groups, dim, j, dgamma, dbeta);
}

__global__ void __launch_bounds__(kLnoThreads) lno_rows(LnoArgs a, size_t rows) {
    __shared__ float s0[kLnoThreads], s1[kLnoThreads];
    const unsigned t = threadIdx.x;
    const float inv_dim = 1.0f / static_cast<float>(a.dim);
    for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {
        lno_thread_sums(a, r, t, &s0[t], &s1[t]);
        __syncthreads();
        for (unsigned w = kLnoThreads / 2; w > 0; w /= 2) {
            lno_tree_step(s0, s1, t, w);
            __syncthreads();
        }
        const float mg = s0[0] * inv_dim, mgx = s1[0] * inv_dim;
        __syncthreads();  // s0/s1 are refilled by the next row
        lno_dx_thread(a, r, t, mg, mgx);
    }
}

}  // namespace ds::kernels::cu

extern "C" int dsk_cuda_layernorm_bwd_from_output(const float* dy, const float* y, const float* rstd,
                                                  const float* gamma, const float* beta, float* dx, float* dgamma,
                                                  float* dbeta, size_t rows, size_t dim, void* stream) noexcept {
    const char* kernel = "dsk_cuda_layernorm_bwd_from_output";
    const size_t n = rows * dim;
    ArgCheck k(kernel);
    if (k.ptr("dy", dy, n).ptr("rstd", rstd, rows).ptr("dx", dx, n).ptr("y", y, n).failed()) return k.status();
    if (rows != 0 && dim == 0)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: dim = 0 with rows = %zu", kernel, rows);
    if (rows != 0 && n / rows != dim)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: rows * dim overflows (rows = %zu, dim = %zu)", kernel,
                              rows, dim);
    if ((gamma == nullptr) != (beta == nullptr))
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: gamma and beta must be both set or both NULL", kernel);
    if ((dgamma == nullptr) != (dbeta == nullptr))
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: dgamma and dbeta must be both set or both NULL", kernel);
    if (gamma != nullptr && dgamma == nullptr && n != 0)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: dgamma/dbeta are NULL but gamma is set (affine)", kernel);
    if (n == 0) return DSK_OK;
    const cudaStream_t st = static_cast<cudaStream_t>(stream);
    const size_t groups = lno_groups(rows);
    const size_t inv_bytes = gamma ? (dim * sizeof(float) + 255) / 256 * 256 : 0;
    const size_t part_bytes = dgamma ? 2 * groups * dim * sizeof(float) : 0;
    StreamScratch scratch{st};
    if (const int rc = scratch.alloc(kernel, 256 + inv_bytes + part_bytes)) return rc;
    char* base = static_cast<char*>(scratch.p);
    LnoArgs a{dy, y, rstd, gamma, beta, nullptr, dx, dim};
    const unsigned col_blocks = static_cast<unsigned>((dim + 255) / 256);
    if (gamma) {
        auto* flag = reinterpret_cast<unsigned long long*>(base);
        float* inv = reinterpret_cast<float*>(base + 256);
        if (const int rc = cuda_status(kernel, "cudaMemsetAsync", cudaMemsetAsync(flag, 0xFF, sizeof *flag, st)))
            return rc;
        lno_inv<<<col_blocks < 4096 ? col_blocks : 4096, 256, 0, st>>>(gamma, inv, dim, flag);
        if (const int rc = cuda_launch_status(kernel)) return rc;
        unsigned long long first = 0;
        if (const int rc = cuda_status(kernel, "cudaMemcpyAsync (gamma check)",
                                       cudaMemcpyAsync(&first, flag, sizeof first, cudaMemcpyDeviceToHost, st)))
            return rc;
        if (const int rc = cuda_status(kernel, "cudaStreamSynchronize", cudaStreamSynchronize(st))) return rc;
        if (first != ~0ull)
            return set_last_error(DSK_ERR_INVALID_ARGUMENT,
                                  "%s: gamma[%llu] = 0: the input cannot be recovered from the output "
                                  "(normalize_invertible needs non-zero LayerNorm weights)",
                                  kernel, first);
        a.inv_gamma = inv;
    }
    if (dgamma) {  // before dx: dx may alias dy
        float* pg = reinterpret_cast<float*>(base + 256 + inv_bytes);
        float* pb = pg + groups * dim;
        const dim3 cols(col_blocks, static_cast<unsigned>(groups < 65535 ? groups : 65535));
        lno_cols<<<cols, 256, 0, st>>>(a, rows, groups, pg, pb);
        lno_cols_total<<<col_blocks, 256, 0, st>>>(pg, pb, groups, dim, dgamma, dbeta);
    }
    lno_rows<<<static_cast<unsigned>(rows < 65535 ? rows : 65535), kLnoThreads, 0, st>>>(a, rows);
    return cuda_launch_status(kernel);
}
