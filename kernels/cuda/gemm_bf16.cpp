// The bf16 products of nn_gemm.h on cuBLAS: the fp32 operands are rounded to
// bf16 (nearest even) on the device by dsk_cuda_convert (the CPU's bit
// conversion, ../elem/convert.h) into stream-ordered scratch, then one
// cublasGemmEx per product takes CUDA_R_16BF inputs, fp32 C and
// CUBLAS_COMPUTE_32F: the products of two bf16 values are exact in fp32 and
// summed in fp32, the function dsk_cpu_gemm_bf16 computes (up to summation
// order). The _bf16w entries read the bf16 weights in place. Bias and bias
// gradient are dsk_cuda_bias_add / dsk_cuda_bias_grad on the fp32 data.
#include <algorithm>
#include <cstdint>

#include "../cpu/gemm_check.h"
#include "cublas_gemm.h"
#include "cuda_check.h"
#include "scratch_pool.h"

namespace {

namespace gemm = ds::kernels::gemm;
using ds::kernels::cuda_status;

// Elements a rows x cols operand with leading dimension ld spans (checked: fits int64).
int64_t span(int64_t rows, int64_t cols, int64_t ld) { return rows == 0 || cols == 0 ? 0 : (rows - 1) * ld + cols; }

// bf16 copies of up to three operands in one stream-ordered allocation,
// freed in stream order when the call returns (after its products were enqueued).
struct Bf16Scratch {
    cudaStream_t stream;
    void* base = nullptr;
    uint16_t* part[3] = {};
    int alloc(const char* kernel, const int64_t (&n)[3]) {
        size_t off[3], total = 0;
        for (int i = 0; i < 3; ++i) {
            off[i] = total;
            total += (static_cast<size_t>(n[i]) * sizeof(uint16_t) + 255) / 256 * 256;  // 256-byte aligned parts
        }
        if (int s = ds::kernels::cu::scratch_alloc(kernel, "bf16 copies of the operands", &base, total, stream);
            s != DSK_OK)
            return s;
        for (int i = 0; i < 3; ++i) part[i] = reinterpret_cast<uint16_t*>(static_cast<char*>(base) + off[i]);
        return DSK_OK;
    }
    ~Bf16Scratch() { ds::kernels::cu::scratch_free(base, stream); }
};

int round_bf16(const float* src, uint16_t* dst, int64_t n, cudaStream_t st) {
    if (n == 0) return DSK_OK;
    return dsk_cuda_convert(src, DSK_F32, dst, DSK_BF16, static_cast<size_t>(n), st);
}

// Linear forward: w (fp32, rounded here) or, in_place, w16 (bf16, read as it is).
int linear_fwd(const char* kernel, bool in_place, const float* x, const float* w, const uint16_t* w16,
               const float* bias, float* y, int64_t rows, int64_t in, int64_t out, void* stream) {
    const void* wp = in_place ? static_cast<const void*>(w16) : static_cast<const void*>(w);
    if (int s = gemm::check_linear_fwd(kernel, x, wp, in_place ? "w16" : "w", y, rows, in, out); s != DSK_OK)
        return s;
    gemm::Problem p;  // y = x w^T, w [out, in]
    p.trans_b = true;
    p.m = rows, p.n = out, p.k = in, p.a = x, p.lda = std::max<int64_t>(in, 1),
    p.b = reinterpret_cast<const float*>(wp), p.ldb = std::max<int64_t>(in, 1), p.c = y,
    p.ldc = std::max<int64_t>(out, 1);
    if (int s = gemm::check_gemm(kernel, p, 0, 1); s != DSK_OK) return s;
    const cudaStream_t st = static_cast<cudaStream_t>(stream);
    if (rows == 0 || out == 0) return DSK_OK;
    if (in == 0) {
        if (int s = ds::kernels::cu::scale_c(kernel, p, st); s != DSK_OK) return s;  // y = 0
    } else {
        Bf16Scratch scratch{st};
        if (int s = scratch.alloc(kernel, {rows * in, in_place ? 0 : out * in, 0}); s != DSK_OK) return s;
        const uint16_t* wb = in_place ? w16 : scratch.part[1];
        if (int s = round_bf16(x, scratch.part[0], rows * in, st); s != DSK_OK) return s;
        if (!in_place)
            if (int s = round_bf16(w, scratch.part[1], out * in, st); s != DSK_OK) return s;
        if (int s = ds::kernels::cu::device_gemm(kernel, p, scratch.part[0], wb, CUDA_R_16BF, st); s != DSK_OK)
            return s;
    }
    if (bias == nullptr) return DSK_OK;
    return dsk_cuda_bias_add(y, bias, static_cast<size_t>(rows), static_cast<size_t>(out), stream);
}

// Linear backward: dx = bf16(dy) bf16(w), dw += bf16(dy)^T bf16(x), db += column sums of dy.
int linear_bwd(const char* kernel, bool in_place, const float* dy, const float* x, const float* w,
               const uint16_t* w16, float* dx, float* dw, float* db, int64_t rows, int64_t in, int64_t out,
               void* stream) {
    const void* wp = in_place ? static_cast<const void*>(w16) : static_cast<const void*>(w);
    if (int s = gemm::check_linear_bwd(kernel, dy, x, wp, dx, dw, rows, in, out); s != DSK_OK) return s;
    const cudaStream_t st = static_cast<cudaStream_t>(stream);
    if (rows == 0 || in == 0 || out == 0) {
        // As the CPU kernel: dx = dy w with out == 0 is zeros; dw and db gain nothing.
        if (rows > 0 && in > 0)
            return cuda_status(kernel, "cudaMemsetAsync (dx)",
                               cudaMemsetAsync(dx, 0, static_cast<size_t>(rows * in) * sizeof(float), st));
        return DSK_OK;
    }
    // db first: its own limits (dsk_cuda_bias_grad's row count) then fail before dx or dw is touched.
    if (db != nullptr)
        if (int s = dsk_cuda_bias_grad(dy, db, rows, out, stream); s != DSK_OK) return s;
    Bf16Scratch scratch{st};
    if (int s = scratch.alloc(kernel, {rows * out, rows * in, in_place ? 0 : out * in}); s != DSK_OK) return s;
    uint16_t *dy16 = scratch.part[0], *x16 = scratch.part[1];
    const uint16_t* wb = in_place ? w16 : scratch.part[2];
    if (int s = round_bf16(dy, dy16, rows * out, st); s != DSK_OK) return s;
    if (int s = round_bf16(x, x16, rows * in, st); s != DSK_OK) return s;
    if (!in_place)
        if (int s = round_bf16(w, scratch.part[2], out * in, st); s != DSK_OK) return s;
    gemm::Problem pdx;  // dx[rows, in] = dy[rows, out] w[out, in]
    pdx.m = rows, pdx.n = in, pdx.k = out, pdx.lda = out, pdx.ldb = in, pdx.ldc = in, pdx.c = dx;
    gemm::Problem pdw;  // dw[out, in] += dy^T x
    pdw.trans_a = true, pdw.m = out, pdw.n = in, pdw.k = rows, pdw.lda = out, pdw.ldb = in, pdw.ldc = in;
    pdw.beta = 1.0f, pdw.c = dw;
    if (int s = ds::kernels::cu::device_gemm(kernel, pdx, dy16, wb, CUDA_R_16BF, st); s != DSK_OK) return s;
    return ds::kernels::cu::device_gemm(kernel, pdw, dy16, x16, CUDA_R_16BF, st);
}

}  // namespace

extern "C" int dsk_cuda_gemm_bf16(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                                  const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                                  int64_t ldc, void* stream) noexcept {
    const char* kernel = "dsk_cuda_gemm_bf16";
    gemm::Problem p;
    p.trans_a = trans_a != 0, p.trans_b = trans_b != 0;
    p.m = m, p.n = n, p.k = k, p.alpha = alpha, p.beta = beta;
    p.a = a, p.lda = lda, p.b = b, p.ldb = ldb, p.c = c, p.ldc = ldc;
    if (int s = gemm::check_gemm(kernel, p, trans_a, trans_b); s != DSK_OK) return s;
    const cudaStream_t st = static_cast<cudaStream_t>(stream);
    if (m == 0 || n == 0 || k == 0 || alpha == 0.0f)  // A and B are not read
        return ds::kernels::cu::device_gemm(kernel, p, nullptr, nullptr, CUDA_R_16BF, st);
    // The spans as stored (leading dimensions kept; the gaps are rounded too, harmlessly).
    const int64_t sa = trans_a ? span(k, m, lda) : span(m, k, lda);
    const int64_t sb = trans_b ? span(n, k, ldb) : span(k, n, ldb);
    Bf16Scratch scratch{st};
    if (int s = scratch.alloc(kernel, {sa, sb, 0}); s != DSK_OK) return s;
    if (int s = round_bf16(a, scratch.part[0], sa, st); s != DSK_OK) return s;
    if (int s = round_bf16(b, scratch.part[1], sb, st); s != DSK_OK) return s;
    return ds::kernels::cu::device_gemm(kernel, p, scratch.part[0], scratch.part[1], CUDA_R_16BF, st);
}

extern "C" int dsk_cuda_linear_fwd_bf16(const float* x, const float* w, const float* bias, float* y, int64_t rows,
                                        int64_t in, int64_t out, void* stream) noexcept {
    return linear_fwd("dsk_cuda_linear_fwd_bf16", false, x, w, nullptr, bias, y, rows, in, out, stream);
}

extern "C" int dsk_cuda_linear_fwd_bf16w(const float* x, const uint16_t* w16, const float* bias, float* y,
                                         int64_t rows, int64_t in, int64_t out, void* stream) noexcept {
    return linear_fwd("dsk_cuda_linear_fwd_bf16w", true, x, nullptr, w16, bias, y, rows, in, out, stream);
}

extern "C" int dsk_cuda_linear_bwd_bf16(const float* dy, const float* x, const float* w, float* dx, float* dw,
                                        float* db, int64_t rows, int64_t in, int64_t out, void* stream) noexcept {
    return linear_bwd("dsk_cuda_linear_bwd_bf16", false, dy, x, w, nullptr, dx, dw, db, rows, in, out, stream);
}

extern "C" int dsk_cuda_linear_bwd_bf16w(const float* dy, const float* x, const uint16_t* w16, float* dx, float* dw,
                                         float* db, int64_t rows, int64_t in, int64_t out, void* stream) noexcept {
    return linear_bwd("dsk_cuda_linear_bwd_bf16w", true, dy, x, nullptr, w16, dx, dw, db, rows, in, out, stream);
}
