// dsk_cuda_layernorm_fwd / _bwd (nn_ops.h semantics): one block per row for
// the statistics and dx (two-pass mean/variance in float, as the CPU);
// dgamma/dbeta by column over fixed groups of rows, the groups' partials
// then summed in order, so the result does not depend on scheduling.
#include <cmath>

#include "block_reduce.cuh"
#include "reduce2.cuh"

using namespace ds::kernels;
using namespace ds::kernels::cu;

namespace ds::kernels::cu {

constexpr int kColRows = 256;  // rows per dgamma/dbeta group

__global__ void __launch_bounds__(kRowThreads) ln_fwd(const float* x, const float* gamma, const float* beta,
                                                       float* y, float* mean, float* rstd, size_t rows,
                                                       size_t dim, float eps) {
    const float inv_dim = 1.0f / static_cast<float>(dim);
    for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* xr = x + r * dim;
        float* yr = y + r * dim;
        float s = 0.0f;
        for (size_t j = threadIdx.x; j < dim; j += kRowThreads) s += xr[j];
        const float mu = block_reduce(s, SumOp{}) * inv_dim;
        float ss = 0.0f;  // two passes: no cancellation for rows far from 0
        for (size_t j = threadIdx.x; j < dim; j += kRowThreads) {
            const float d = xr[j] - mu;
            ss += d * d;
        }
        const float rs = 1.0f / sqrtf(block_reduce(ss, SumOp{}) * inv_dim + eps);
        for (size_t j = threadIdx.x; j < dim; j += kRowThreads) {
            const float h = (xr[j] - mu) * rs;
            yr[j] = gamma ? h * gamma[j] + beta[j] : h;
        }
        if (threadIdx.x == 0) {
            if (mean) mean[r] = mu;
            if (rstd) rstd[r] = rs;
        }
    }
}

// Column partials of dgamma (dy*xhat) and dbeta (dy) over group blockIdx.y.
__global__ void ln_bwd_cols(const float* dy, const float* x, const float* mean, const float* rstd, size_t rows,
                            size_t dim, float* part_g, float* part_b) {
    const size_t j = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (j >= dim) return;
    const size_t r0 = static_cast<size_t>(blockIdx.y) * kColRows;
    const size_t r1 = r0 + kColRows < rows ? r0 + kColRows : rows;
    float ag = 0.0f, ab = 0.0f;
    for (size_t r = r0; r < r1; ++r) {
        const float d = dy[r * dim + j];
        ag += d * ((x[r * dim + j] - mean[r]) * rstd[r]);
        ab += d;
    }
    part_g[blockIdx.y * dim + j] = ag;
    part_b[blockIdx.y * dim + j] = ab;
}

__global__ void ln_bwd_cols_sum(const float* part_g, const float* part_b, size_t groups, size_t dim,
                                float* dgamma, float* dbeta) {
    const size_t j = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (j >= dim) return;
    float g = 0.0f, b = 0.0f;
    for (size_t k = 0; k < groups; ++k) {
        g += part_g[k * dim + j];
        b += part_b[k * dim + j];
    }
    dgamma[j] += g;
    dbeta[j] += b;
}

__global__ void __launch_bounds__(kRowThreads) ln_bwd_rows(const float* dy, const float* x, const float* mean,
                                                            const float* rstd, const float* gamma, float* dx,
                                                            size_t rows, size_t dim) {
    const float inv_dim = 1.0f / static_cast<float>(dim);
    for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* dyr = dy + r * dim;
        const float* xr = x + r * dim;
        const float mu = mean[r], rs = rstd[r];
        float sg = 0.0f, sgx = 0.0f;
        for (size_t j = threadIdx.x; j < dim; j += kRowThreads) {
            const float g = gamma ? dyr[j] * gamma[j] : dyr[j];
            sg += g;
            sgx += g * ((xr[j] - mu) * rs);
        }
        const float mg = block_reduce(sg, SumOp{}) * inv_dim;
        const float mgx = block_reduce(sgx, SumOp{}) * inv_dim;
        for (size_t j = threadIdx.x; j < dim; j += kRowThreads) {  // dx may alias dy: same thread, read first
            const float g = gamma ? dyr[j] * gamma[j] : dyr[j];
            dx[r * dim + j] = rs * (g - mg - ((xr[j] - mu) * rs) * mgx);
        }
    }
}

}  // namespace ds::kernels::cu

namespace {

int check_rows(ArgCheck& k, const char* kernel, size_t rows, size_t dim) {
    if (k.failed()) return k.status();
    if (dim == 0) return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: dim is 0", kernel);
    if (rows != 0 && rows * dim / rows != dim)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: rows * dim overflows (rows = %zu, dim = %zu)", kernel,
                              rows, dim);
    return DSK_OK;
}

}  // namespace

extern "C" int dsk_cuda_layernorm_fwd(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                                      float* rstd, size_t rows, size_t dim, float eps, void* stream) noexcept {
    const char* kernel = "dsk_cuda_layernorm_fwd";
    ArgCheck k(kernel);
    k.ptr("x", x, rows * dim).ptr("y", y, rows * dim);
    if ((gamma == nullptr) != (beta == nullptr))
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: gamma and beta must both be given or both be NULL",
                              kernel);
    if (const int rc = check_rows(k, kernel, rows, dim)) return rc;
    if (rows == 0) return DSK_OK;
    const unsigned grid = static_cast<unsigned>(rows < 65535 ? rows : 65535);
    ln_fwd<<<grid, kRowThreads, 0, static_cast<cudaStream_t>(stream)>>>(x, gamma, beta, y, mean, rstd, rows, dim,
                                                                         eps);
    return cuda_launch_status(kernel);
}

extern "C" int dsk_cuda_layernorm_bwd(const float* dy, const float* x, const float* mean, const float* rstd,
                                      const float* gamma, float* dx, float* dgamma, float* dbeta, size_t rows,
                                      size_t dim, void* stream) noexcept {
    const char* kernel = "dsk_cuda_layernorm_bwd";
    ArgCheck k(kernel);
    k.ptr("dy", dy, rows * dim).ptr("x", x, rows * dim).ptr("mean", mean, rows).ptr("rstd", rstd, rows);
    k.ptr("dx", dx, rows * dim);
    if ((dgamma == nullptr) != (dbeta == nullptr))
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: dgamma and dbeta must both be given or both be NULL",
                              kernel);
    if (gamma != nullptr && dgamma == nullptr)
        return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: dgamma/dbeta are NULL but gamma is given", kernel);
    if (const int rc = check_rows(k, kernel, rows, dim)) return rc;
    if (rows == 0) return DSK_OK;
    const cudaStream_t st = static_cast<cudaStream_t>(stream);
    StreamScratch scratch{st};
    if (dgamma) {  // before dx: dx may alias dy
        const size_t groups = (rows + kColRows - 1) / kColRows;
        if (groups > 65535)
            return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: rows = %zu exceeds %zu", kernel, rows,
                                  size_t{65535} * kColRows);
        if (const int rc = scratch.alloc(kernel, 2 * groups * dim * sizeof(float))) return rc;
        float* pg = static_cast<float*>(scratch.p);
        float* pb = pg + groups * dim;
        const dim3 cols(static_cast<unsigned>((dim + 255) / 256), static_cast<unsigned>(groups));
        ln_bwd_cols<<<cols, 256, 0, st>>>(dy, x, mean, rstd, rows, dim, pg, pb);
        ln_bwd_cols_sum<<<static_cast<unsigned>((dim + 255) / 256), 256, 0, st>>>(pg, pb, groups, dim, dgamma, dbeta);
    }
    const unsigned grid = static_cast<unsigned>(rows < 65535 ? rows : 65535);
    ln_bwd_rows<<<grid, kRowThreads, 0, st>>>(dy, x, mean, rstd, gamma, dx, rows, dim);
    return cuda_launch_status(kernel);
}
