// The GEMM engines behind dsk_cpu_gemm (kernels/nn_gemm.h). gemm.cpp checks
// the arguments, handles the degenerate cases (m, n or batch 0; k 0) and
// hands a validated problem to one of these.
#pragma once

#include <cstdint>
#include <string>

namespace ds::kernels::gemm {

// One (batched) product, arguments already checked; m, n, k, batch >= 1.
struct Problem {
    bool trans_a = false, trans_b = false;
    int64_t m = 0, n = 0, k = 0;
    float alpha = 1.0f, beta = 0.0f;
    const float* a = nullptr;
    int64_t lda = 0;
    const float* b = nullptr;
    int64_t ldb = 0;
    float* c = nullptr;
    int64_t ldc = 0;
    int64_t batch = 1, stride_a = 0, stride_b = 0, stride_c = 0;
};

// Matrix i of a batch.
inline Problem batch_item(const Problem& p, int64_t i) {
    Problem q = p;
    q.a = p.a + i * p.stride_a;
    q.b = p.b + i * p.stride_b;
    q.c = p.c + i * p.stride_c;
    q.batch = 1;
    return q;
}

// ---- oneDNN (gemm_onednn.cpp; without oneDNN every call is "unavailable")
// True when this build has oneDNN and it created a CPU engine; *name is
// "onednn 2.6.3", or why not.
bool onednn_init(std::string* name);
// DSK_OK, DSK_ERR_ENGINE with a message, or -1: the primitive was refused
// for this layout (the caller falls back to the blocked loop).
int onednn_gemm(const Problem& p);
// y = x w^T + bias, bias fused; with `pack` the weights are first reordered
// into the matmul's preferred (packed) layout for this call (see
// dsk_cpu_linear_fwd_packed). Same returns as onednn_gemm.
int onednn_linear_fwd(const float* x, const float* w, const float* bias, float* y, int64_t rows, int64_t in,
                      int64_t out, bool pack);

// C = alpha op(A) op(B) + beta C (+ bias [n] broadcast over rows, nullable)
// with A and B already rounded to bf16 (same layout as p describes; p.a and
// p.b are not read), fp32 accumulation and C. -1 when this oneDNN has no
// native bf16 matmul for it (the caller takes the fp32 fallback).
int onednn_gemm_bf16(const Problem& p, const uint16_t* a, const uint16_t* b, const float* bias);
// Whether a native bf16 matmul exists here (probed once by the caller).
bool onednn_bf16_native();

// ---- OpenBLAS through dlopen (gemm_openblas.cpp)
// Loads libopenblas once (see nn_gemm.h for the core-type check); true when
// it is usable; *name is "openblas 0.3.21 (SkylakeX)" or why it is not.
bool openblas_init(std::string* name);
// Runs cblas_sgemm per batch item; -1 when a size exceeds its 32-bit ints.
int openblas_gemm(const Problem& p);

// ---- the last resort (gemm_blocked.cpp): cache-blocked, OpenMP over rows.
void blocked_gemm(const Problem& p);

}  // namespace ds::kernels::gemm
