// ISA dispatch of the nn kernels' inner loops (nn_ops.h). The loops are
// plain C++ in nn_ops_body.h, compiled three times (nn_ops_isa_scalar.cpp,
// nn_ops_isa_avx2.cpp, nn_ops_isa_avx512.cpp, each with that ISA's flags) and
// vectorised by the compiler (`#pragma omp simd`); nn_isa_ops() picks the copy
// for dsk_cpu_isa(). The entry points (layernorm.cpp, ...) validate the
// arguments, split rows over OpenMP threads and call these per chunk.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nn_ops.h"

namespace ds::kernels {

// LayerNorm forward over rows [r0, r1).
struct LnFwdArgs {
    const float* x;
    const float* gamma;  // nullable (with beta): no affine
    const float* beta;
    float* y;
    float* mean;  // nullable
    float* rstd;  // nullable
    size_t dim;
    float eps;
};

// LayerNorm backward over rows [r0, r1). xhat comes from the input
// (x, mean, rstd) or, when inv_gamma/y are set, from the output:
// xhat = (y - beta) * inv_gamma (y itself without affine, from_output).
struct LnBwdArgs {
    const float* dy;
    const float* x;     // from the input
    const float* mean;  // from the input
    const float* y;     // from the output
    const float* rstd;
    const float* gamma;      // nullable: no affine
    const float* beta;       // from the output with affine
    const float* inv_gamma;  // from the output with affine: 1/gamma
    bool from_output;
    float* dx;
    size_t dim;
};

struct NnIsaOps {
    void (*gelu_fwd)(const float* x, float* y, size_t n);
    void (*gelu_bwd)(const float* x, const float* dy, float* dx, size_t n);
    void (*ln_fwd)(const LnFwdArgs& a, size_t r0, size_t r1);
    // Adds sum dy*xhat and sum dy of these rows into dgamma_part/dbeta_part
    // (nullable together).
    void (*ln_bwd)(const LnBwdArgs& a, size_t r0, size_t r1, float* dgamma_part, float* dbeta_part);
    // log(sum exp(row)), max-subtracted.
    float (*logsumexp)(const float* row, size_t V);
    // out = scale * exp(row - lse); the caller subtracts scale at the target.
    void (*softmax_scaled)(const float* row, size_t V, float lse, float scale, float* out);
    // y = keep(e) ? x * scale : 0 over elements [0, n) of the key's stream
    // (offset included); 0 <= thr < 2^32.
    void (*dropout)(const float* x, float* y, size_t n, uint32_t thr, float scale, const dsk_dropout_key& key);
    void (*add)(const float* a, const float* b, float* y, size_t n);
    void (*add_inplace)(float* y, const float* a, size_t n);
    double (*sq_diff_sum)(const float* a, const float* b, size_t n);
    void (*scaled_diff)(const float* a, const float* b, float scale, float* y, size_t n);
};

extern const NnIsaOps kNnScalarOps;
extern const NnIsaOps kNnAvx2Ops;
extern const NnIsaOps kNnAvx512Ops;

// The copy for dsk_cpu_isa() (nn_ops_isa.cpp, baseline code).
const NnIsaOps& nn_isa_ops();

}  // namespace ds::kernels
