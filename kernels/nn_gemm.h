/*
 * nn_gemm.h — fp32 matrix products for the built-in layers (Linear,
 * attention): C = alpha * op(A) * op(B) + beta * C, row-major, where op(X)
 * is X or its transpose (trans != 0). Same conventions as kernels.h: a
 * status per call, dsk_last_error() for the message, never an exception.
 *
 * Row-major leading dimensions: op(A) is m x k, so A is stored [m, k] with
 * lda >= k (trans_a = 0) or [k, m] with lda >= m (trans_a = 1); likewise B
 * is [k, n] (ldb >= n) or [n, k] (ldb >= k); C is [m, n] with ldc >= n.
 * beta == 0 means C is written without being read (NaN/Inf in C do not
 * propagate). k == 0 scales C by beta. C must not overlap A or B.
 *
 * The engine (dsk_cpu_gemm_engine()) is picked once, at first use:
 *  1. oneDNN matmul primitives (when built with it), cached per shape,
 *     transposes, leading dimensions, alpha and beta;
 *  2. OpenBLAS cblas_sgemm, loaded with dlopen at first use. Debian's 0.3.21
 *     (DYNAMIC_ARCH) misdetects some AVX-512 CPUs as "Prescott" and runs
 *     SSE3 kernels at ~20 % of peak, so on a CPU with AVX2/AVX-512 the
 *     library sets OPENBLAS_CORETYPE (SkylakeX / Haswell) for the load unless
 *     the user set it, then checks openblas_get_corename() and refuses an
 *     old/generic core (the engine then says why in its name);
 *  3. a blocked C++ loop ("reference").
 * DS_GEMM_ENGINE=onednn|openblas|reference at first use, or
 * dsk_cpu_gemm_set_engine(), picks one explicitly (tests, benchmarks).
 */
#ifndef DS_KERNELS_NN_GEMM_H
#define DS_KERNELS_NN_GEMM_H

#include "kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* DSK_ERR_ENGINE (kernels.h): the GEMM engine failed for a reason other
 * than the arguments (oneDNN could not create or run a primitive); the
 * message says what it reported. */

#define DSK_GEMM_ENGINE_REFERENCE 0
#define DSK_GEMM_ENGINE_OPENBLAS 1
#define DSK_GEMM_ENGINE_ONEDNN 2

int dsk_cpu_gemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                 int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) DSK_NOEXCEPT;

/** `batch` independent products: A_i = a + i*stride_a (elements), likewise
 *  B_i and C_i. A stride of 0 reuses one A (or B) for every product; the C
 *  matrices must not overlap (stride_c large enough) when batch > 1. */
int dsk_cpu_gemm_batched(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                         const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                         int64_t ldc, int64_t batch, int64_t stride_a, int64_t stride_b,
                         int64_t stride_c) DSK_NOEXCEPT;

/** y[rows, out] = x[rows, in] * w^T + bias, w stored [out, in] (PyTorch's
 *  Linear layout), bias [out] or NULL. On oneDNN one matmul with the bias
 *  fused, reading the weights as stored; elsewhere a GEMM plus a bias pass. */
int dsk_cpu_linear_fwd(const float* x, const float* w, const float* bias, float* y, int64_t rows, int64_t in,
                       int64_t out) DSK_NOEXCEPT;
/** The same with the weights first reordered into the matmul's preferred
 *  (packed, format_tag::any) layout, once per call (weights change every
 *  step). Kept for measurement: on the machines measured so far it did not
 *  pay (docs/PERFORMANCE.md, "Linear / GEMM"), so the layer uses the above. */
int dsk_cpu_linear_fwd_packed(const float* x, const float* w, const float* bias, float* y, int64_t rows, int64_t in,
                              int64_t out) DSK_NOEXCEPT;

/** bf16 products with fp32 accumulation (what autocast does on a CPU with
 *  bf16 matmuls): C = alpha * op(bf16(A)) * op(bf16(B)) + beta * C, where
 *  bf16() rounds each fp32 input to bfloat16 (nearest even); the products of
 *  two bf16 values are exact in fp32 and are summed in fp32 into fp32 C.
 *  Arguments and conventions as dsk_cpu_gemm. On oneDNN with a native bf16
 *  matmul for this CPU (AVX-512 and up) one bf16 primitive runs; anywhere
 *  else (AVX2-only, another engine) the rounded copies go through the fp32
 *  GEMM: the same inputs, the same fp32 accumulation, just slower. */
int dsk_cpu_gemm_bf16(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                      int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) DSK_NOEXCEPT;
/** y[rows, out] = bf16(x) bf16(w)^T + bias: dsk_cpu_linear_fwd with the
 *  products of dsk_cpu_gemm_bf16; bias (fp32, nullable) is added in fp32. */
int dsk_cpu_linear_fwd_bf16(const float* x, const float* w, const float* bias, float* y, int64_t rows, int64_t in,
                            int64_t out) DSK_NOEXCEPT;
/** Linear's backward with bf16 products: dx[rows, in] = bf16(dy) bf16(w)
 *  (overwritten), dw[out, in] += bf16(dy)^T bf16(x), and db[out] (nullable)
 *  += the column sums of the fp32 dy, as dsk_cpu_bias_grad (the same sums, bit
 *  for bit, computed in the pass that rounds dy). dy, x and w are
 *  rounded once, in one pass, for both products. */
int dsk_cpu_linear_bwd_bf16(const float* dy, const float* x, const float* w, float* dx, float* dw, float* db,
                            int64_t rows, int64_t in, int64_t out) DSK_NOEXCEPT;
/** The two above with w already bf16 (w16 [out, in]: a bf16 engine's working
 *  weights, read in place): y = bf16(x) w16^T + bias; dx = bf16(dy) w16,
 *  dw += bf16(dy)^T bf16(x), db as above. No copy of w is made on a CPU with
 *  a native bf16 matmul; the results equal dsk_cpu_linear_{fwd,bwd}_bf16 on
 *  the fp32 widening of w16, bit for bit. */
int dsk_cpu_linear_fwd_bf16w(const float* x, const uint16_t* w16, const float* bias, float* y, int64_t rows,
                             int64_t in, int64_t out) DSK_NOEXCEPT;
int dsk_cpu_linear_bwd_bf16w(const float* dy, const float* x, const uint16_t* w16, float* dx, float* dw, float* db,
                             int64_t rows, int64_t in, int64_t out) DSK_NOEXCEPT;
/** True (1) when dsk_cpu_gemm_bf16 runs a native bf16 primitive here, 0 when
 *  it takes the rounded-fp32 fallback (benchmarks, docs). */
int dsk_cpu_gemm_bf16_native(void) DSK_NOEXCEPT;

/** db[j] += sum over rows of dy[r, j] (dy [rows, out]), summed in a fixed
 *  order (deterministic for any thread count). */
int dsk_cpu_bias_grad(const float* dy, float* db, int64_t rows, int64_t out) DSK_NOEXCEPT;

/** What runs the products, e.g. "onednn 2.6.3", "openblas 0.3.21 (SkylakeX)",
 *  "reference (OpenBLAS refused: core Prescott on an avx512 CPU)". */
const char* dsk_cpu_gemm_engine(void) DSK_NOEXCEPT;
/** DSK_GEMM_ENGINE_* in use. */
int dsk_cpu_gemm_engine_id(void) DSK_NOEXCEPT;
/** Use `engine` (DSK_GEMM_ENGINE_*) from now on: DSK_OK, or
 *  DSK_ERR_UNSUPPORTED with a message when this build or machine lacks it. */
int dsk_cpu_gemm_set_engine(int engine) DSK_NOEXCEPT;

/* ---- scalar references (tests): plain triple loops, no checks -------- */
void dsk_ref_gemm_f64(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
                      int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc);
/** fp32 data, products summed in double, rounded once into C. */
void dsk_ref_gemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                  int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

#ifdef __cplusplus
}
#endif

#endif /* DS_KERNELS_NN_GEMM_H */
