// dsk_cuda_gemm, dsk_cuda_gemm_batched, dsk_cuda_linear_fwd: the fp32
// products of nn_gemm.h on cuBLAS (fp32 math, no TF32: cublas_handle.cpp).
// The arguments are checked by the CPU kernels' own checks
// (../cpu/gemm_check.h) before any CUDA call.
#include <algorithm>

#include "../cpu/gemm_check.h"
#include "cublas_gemm.h"
#include "cuda_check.h"

namespace {

namespace gemm = ds::kernels::gemm;

int gemm_entry(const char* kernel, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
               const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
               int64_t batch, int64_t stride_a, int64_t stride_b, int64_t stride_c, void* stream) {
    gemm::Problem p;
    p.trans_a = trans_a != 0, p.trans_b = trans_b != 0;
    p.m = m, p.n = n, p.k = k, p.alpha = alpha, p.beta = beta;
    p.a = a, p.lda = lda, p.b = b, p.ldb = ldb, p.c = c, p.ldc = ldc;
    p.batch = batch, p.stride_a = stride_a, p.stride_b = stride_b, p.stride_c = stride_c;
    if (int s = gemm::check_gemm(kernel, p, trans_a, trans_b); s != DSK_OK) return s;
    return ds::kernels::cu::device_gemm(kernel, p, a, b, CUDA_R_32F, static_cast<cudaStream_t>(stream));
}

}  // namespace

extern "C" int dsk_cuda_gemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                             int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
                             void* stream) noexcept {
    return gemm_entry("dsk_cuda_gemm", trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, 1, 0, 0, 0,
                      stream);
}

extern "C" int dsk_cuda_gemm_batched(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                                     const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                                     int64_t ldc, int64_t batch, int64_t stride_a, int64_t stride_b,
                                     int64_t stride_c, void* stream) noexcept {
    return gemm_entry("dsk_cuda_gemm_batched", trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                      batch, stride_a, stride_b, stride_c, stream);
}

extern "C" int dsk_cuda_linear_fwd(const float* x, const float* w, const float* bias, float* y, int64_t rows,
                                   int64_t in, int64_t out, void* stream) noexcept {
    const char* kernel = "dsk_cuda_linear_fwd";
    if (int s = gemm::check_linear_fwd(kernel, x, w, "w", y, rows, in, out); s != DSK_OK) return s;
    // y = x w^T (w [out, in]), then + bias: the CPU's non-oneDNN path.
    gemm::Problem p;
    p.trans_b = true;
    p.m = rows, p.n = out, p.k = in, p.a = x, p.lda = std::max<int64_t>(in, 1), p.b = w,
    p.ldb = std::max<int64_t>(in, 1), p.c = y, p.ldc = std::max<int64_t>(out, 1);
    if (int s = gemm::check_gemm(kernel, p, 0, 1); s != DSK_OK) return s;
    const cudaStream_t st = static_cast<cudaStream_t>(stream);
    if (int s = ds::kernels::cu::device_gemm(kernel, p, x, w, CUDA_R_32F, st); s != DSK_OK) return s;
    if (bias == nullptr || rows == 0 || out == 0) return DSK_OK;
    return dsk_cuda_bias_add(y, bias, static_cast<size_t>(rows), static_cast<size_t>(out), stream);
}
