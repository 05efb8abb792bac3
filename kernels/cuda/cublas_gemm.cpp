// device_gemm (cublas_gemm.h): a planned cuBLAS call.
#include "cublas_gemm.h"

#include <cublas_v2.h>

#include "cublas_handle.h"
#include "cuda_check.h"
#include "gemm_plan.h"

#if !defined(CUBLAS_VER_MAJOR) || CUBLAS_VER_MAJOR < 12
#error "the CUDA GEMMs use cuBLAS 12's 64-bit API (cublasGemmEx_64): CUDA 12 or newer is needed"
#endif

namespace ds::kernels::cu {

int device_gemm(const char* kernel, const gemm::Problem& p, const void* a, const void* b, cudaDataType ab_type,
                cudaStream_t stream) {
    if (p.m == 0 || p.n == 0 || p.batch == 0) return DSK_OK;
    if (p.k == 0 || p.alpha == 0.0f) return scale_c(kernel, p, stream);
    const GemmPlan g = plan_gemm(p.trans_a, p.trans_b, p.m, p.n, p.k, p.lda, p.ldb, p.ldc, p.batch, p.stride_a,
                                 p.stride_b, p.stride_c);
    CublasLease lease;
    if (int s = lease.acquire(kernel, stream); s != DSK_OK) return s;
    const cublasOperation_t ta = g.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = g.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N;
    const void* x = plan_first(g, a, b);
    const void* y = plan_second(g, a, b);
    // CUBLAS_COMPUTE_32F (not _FAST_TF32 / _FAST_16BF): fp32 products and sums
    // for fp32 inputs, exact bf16 products summed in fp32 for bf16 inputs.
    if (g.batch == 1)
        return cublas_status(kernel, "cublasGemmEx",
                             cublasGemmEx_64(lease.get(), ta, tb, g.m, g.n, g.k, &p.alpha, x, ab_type, g.ld_first, y,
                                             ab_type, g.ld_second, &p.beta, p.c, CUDA_R_32F, g.ldc,
                                             CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return cublas_status(kernel, "cublasGemmStridedBatchedEx",
                         cublasGemmStridedBatchedEx_64(lease.get(), ta, tb, g.m, g.n, g.k, &p.alpha, x, ab_type,
                                                       g.ld_first, g.stride_first, y, ab_type, g.ld_second,
                                                       g.stride_second, &p.beta, p.c, CUDA_R_32F, g.ldc, g.stride_c,
                                                       g.batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace ds::kernels::cu
