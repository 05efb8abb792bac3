// The attention's six products on cuBLAS (attention_cublas_plan.h's calls),
// for attention.cu's launcher, and the choice between them and the tiled
// kernels (DSK_CUDA_ATTENTION_*, cuda_kernels.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "attention_body.h"
#include "attention_cublas_plan.h"

namespace ds::kernels::cu {

// Whether dsk_cuda_attention_* take cuBLAS for their products now.
bool attention_products_on_cublas();

// The products of one entry call. fp32 products are cuBLAS's fp32 GEMMs
// (CUBLAS_COMPUTE_32F, no TF32); bf16 products read bf16 copies of their
// operands (dsk_cuda_convert: the CPU's rounding), each buffer converted once
// per call into stream-ordered scratch and shared by the products reading
// it, with fp32 accumulation on the tensor cores. A step that writes a
// buffer must say so (written()): its copies are dropped.
class AttnCublasProducts {
public:
    AttnCublasProducts(const char* kernel, cudaStream_t stream) : kernel_(kernel), stream_(stream) {}
    ~AttnCublasProducts();  // frees the copies in stream order
    AttnCublasProducts(const AttnCublasProducts&) = delete;
    AttnCublasProducts& operator=(const AttnCublasProducts&) = delete;

    // A bf16 copy of [src, src + n) now, which products reading any part of
    // it share (qkv's q, k and v slices; dout).
    int prime(const float* src, int64_t n);
    // g on cuBLAS as `calls` (attn_cublas_calls(g, &calls) mapped it).
    int gemm(const AttnGemm& g, const AttnCublasCalls& calls);
    // [p, p + n) is being rewritten: its bf16 copies are stale.
    void written(const float* p, int64_t n);
    // A new bf16 copy standing for [src, src + n) (its old ones dropped),
    // which the caller's kernel fills instead of writing the fp32 buffer
    // (the fused steps, attention_fused_body.h).
    int fresh_copy(const float* src, int64_t n, uint16_t** dst);

private:
    struct Copy {
        const float* src;
        int64_t n;
        uint16_t* dst;
    };
    int bf16_of(const float* src, int64_t n, const uint16_t** out);
    int add_copy(const float* src, int64_t n, uint16_t** dst);
    const char* kernel_;
    cudaStream_t stream_;
    std::vector<Copy> copies_;
};

}  // namespace ds::kernels::cu
