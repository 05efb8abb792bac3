// One checked product (gemm::Problem, ../cpu/gemm_engines.h) on the device:
// the degenerate cases as the CPU handles them, else one cuBLAS call planned
// by gemm_plan.h. Shared by the fp32 and bf16 entry points.
#pragma once

#include <cuda_runtime_api.h>
#include <library_types.h>

#include "../cpu/gemm_engines.h"

namespace ds::kernels::cu {

// m, n or batch 0: nothing. k 0 or alpha 0: C = beta C (scale_c; A and B not
// read). Else C = alpha op(A) op(B) + beta C with A, B of type ab_type
// (CUDA_R_32F or CUDA_R_16BF; `a`, `b` replace p.a, p.b, same layout), fp32
// C, fp32 accumulation (CUBLAS_COMPUTE_32F), on `stream`.
int device_gemm(const char* kernel, const gemm::Problem& p, const void* a, const void* b, cudaDataType ab_type,
                cudaStream_t stream);

// C = beta C over p's batch (beta 0: written, not read; beta 1: untouched). gemm_scale.cu.
int scale_c(const char* kernel, const gemm::Problem& p, cudaStream_t stream);

}  // namespace ds::kernels::cu
