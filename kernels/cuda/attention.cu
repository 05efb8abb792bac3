// dsk_cuda_attention_forward / _backward (nn_attention.h semantics): the
// steps of attention_plan.h (the six products, the row softmax and its
// backward, dropout on the probabilities) enqueued as kernels whose
// per-thread work is attention_body.h's, on [B, H, T, T] buffers of scores /
// probabilities in device scratch (or in probs when given). The products run
// on cuBLAS (attention_cublas.h, the default) or on the own tiled kernel
// (DSK_CUDA_ATTENTION_TILED: no atomics and fixed summation orders, so the
// bits depend on the shape only). Dropout draws the CPU's mask with
// ../elem/dropout.h's per-block function.
#include <cstdint>
#include <optional>

#include "../cpu/attention_check.h"
#include "../elem/dropout.h"
#include "attention_body.h"
#include "attention_cublas.h"
#include "attention_cublas_plan.h"
#include "attention_fused_body.h"
#include "attention_plan.h"
#include "cuda_check.h"
#include "scratch_pool.h"
#include "nn_attention.h"

using namespace ds::kernels;

namespace ds::kernels::cu {

// One block of kAttnTile x kAttnTile threads per output tile, every
// (item, tile) visited by a grid-stride loop (each loop bound is uniform
// over the block, so the barriers are too).
__global__ void __launch_bounds__(kAttnTile* kAttnTile) attn_gemm_kernel(AttnGemm g) {
    __shared__ AttnTiles s;
    const int ty = static_cast<int>(threadIdx.y), tx = static_cast<int>(threadIdx.x);
    const int64_t tm = attn_tiles(g.M), tn = attn_tiles(g.N);
    for (int64_t z = blockIdx.z; z < g.items; z += gridDim.z)
        for (int64_t bm = blockIdx.y; bm < tm; bm += gridDim.y)
            for (int64_t bn = blockIdx.x; bn < tn; bn += gridDim.x) {
                const int64_t m0 = bm * kAttnTile, n0 = bn * kAttnTile;
                if (!attn_gemm_tile_live(g, m0, n0)) continue;
                float acc = 0.0f;
                for (int64_t k0 = 0; k0 < g.K; k0 += kAttnTile) {
                    attn_gemm_load(g, z, m0, n0, k0, ty, tx, &s);
                    __syncthreads();
                    acc = attn_gemm_accumulate(g, k0, ty, tx, &s, acc);
                    __syncthreads();
                }
                attn_gemm_store(g, z, m0, n0, ty, tx, acc);
            }
}

template <class Op>
__device__ __forceinline__ void attn_tree(float* red, Op op) {
    for (int s = kAttnRowThreads / 2; s > 0; s /= 2) {
        attn_tree_step(red, static_cast<int>(threadIdx.x), s, op);
        __syncthreads();
    }
}

// One block per row of P: softmax in place (attention_body.h's three
// phases). With D16 (the fused bf16 step, attention_fused_body.h) the third
// phase also writes bf16(dropout(P)) there.
__global__ void __launch_bounds__(kAttnRowThreads) attn_softmax_kernel(float* P, uint16_t* D16, int64_t rows,
                                                                        int64_t T, int32_t causal, AttnDrop d) {
    __shared__ float red_max[kAttnRowThreads], red_sum[kAttnRowThreads];
    const int t = static_cast<int>(threadIdx.x);
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        float* row = P + r * T;
        const int64_t jn = attn_visible(r % T, T, causal);
        red_max[t] = attn_row_max_part(row, jn, t, kAttnRowThreads);
        __syncthreads();
        attn_tree(red_max, AttnMax{});
        red_sum[t] = attn_row_exp_part(row, jn, red_max[0], t, kAttnRowThreads);
        __syncthreads();
        attn_tree(red_sum, AttnSum{});
        if (D16 != nullptr)
            attn_row_normalize_d16(row, D16 + r * T, r, jn, T, red_sum[0], d, t, kAttnRowThreads);
        else
            attn_row_normalize(row, jn, T, red_sum[0], t, kAttnRowThreads);
        __syncthreads();  // red_max / red_sum are reused by the next row
    }
}

// One block per row: G (dA) -> dS in place, given the probabilities P.
__global__ void __launch_bounds__(kAttnRowThreads) attn_softmax_bwd_kernel(float* G, const float* P, int64_t rows,
                                                                            int64_t T, int32_t causal, float scale) {
    __shared__ float red[kAttnRowThreads];
    const int t = static_cast<int>(threadIdx.x);
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        float* g = G + r * T;
        const float* p = P + r * T;
        const int64_t jn = attn_visible(r % T, T, causal);
        red[t] = attn_sbwd_dot_part(g, p, jn, t, kAttnRowThreads);
        __syncthreads();
        attn_tree(red, AttnSum{});
        attn_sbwd_write(g, p, jn, T, red[0], scale, t, kAttnRowThreads);
        __syncthreads();
    }
}

constexpr int kAttnDropThreads = 256;

// Thread b: Philox block b of the [B, H, T, T] buffer's stream (as dropout.cu).
__global__ void __launch_bounds__(kAttnDropThreads) attn_dropout_kernel(const float* x, float* y, size_t n,
                                                                         uint64_t e0, uint64_t blocks,
                                                                         DropoutStream st, uint32_t thr, float scale) {
    const uint64_t stride = static_cast<uint64_t>(gridDim.x) * kAttnDropThreads;
    for (uint64_t b = static_cast<uint64_t>(blockIdx.x) * kAttnDropThreads + threadIdx.x; b < blocks; b += stride)
        dropout_block(x, y, n, e0, b, st, thr, scale);
}

// The other fused bf16 steps (attention_fused_body.h); the row kernel as the
// unfused one, so the reductions run in the same order.
__global__ void __launch_bounds__(kAttnDropThreads) attn_dropout_d16_kernel(const float* P, uint16_t* D16, uint64_t n,
                                                                             AttnDrop d) {
    const uint64_t stride = static_cast<uint64_t>(gridDim.x) * kAttnDropThreads;
    for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * kAttnDropThreads + threadIdx.x; i < n; i += stride)
        attn_drop_d16(P, D16, i, d);
}

__global__ void __launch_bounds__(kAttnRowThreads) attn_softmax_bwd_d16_kernel(const float* G, const float* P,
                                                                                uint16_t* G16, int64_t rows, int64_t T,
                                                                                int32_t causal, float scale, AttnDrop d) {
    __shared__ float red[kAttnRowThreads];
    const int t = static_cast<int>(threadIdx.x);
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* g = G + r * T;
        const float* p = P + r * T;
        const int64_t jn = attn_visible(r % T, T, causal);
        red[t] = attn_sbwd_dot_part_drop(g, p, r, jn, T, d, t, kAttnRowThreads);
        __syncthreads();
        attn_tree(red, AttnSum{});
        attn_sbwd_write_d16(g, p, G16 + r * T, r, jn, T, red[0], scale, d, t, kAttnRowThreads);
        __syncthreads();
    }
}

}  // namespace ds::kernels::cu

namespace {

unsigned cap(int64_t n, int64_t limit) { return static_cast<unsigned>(n < limit ? n : limit); }

// attention_plan.h's launcher: each step is one kernel (or, for a product
// on cuBLAS, one call per batch element) on the call's stream. With
// `cublas`, every step that writes a buffer tells it (its bf16 copies go).
struct DeviceLauncher {
    const char* kernel;
    cudaStream_t stream;
    cu::AttnCublasProducts* cublas = nullptr;  // null: the tiled kernel
    int gemm(const AttnGemm& g) const {
        cu::AttnCublasCalls calls;
        if (cublas != nullptr && cu::attn_cublas_calls(g, &calls)) return cublas->gemm(g, calls);
        if (cublas != nullptr) cublas->written(g.c, cu::attn_span_c(g));
        const dim3 grid(cap(attn_tiles(g.N), 65535), cap(attn_tiles(g.M), 65535), cap(g.items, 65535));
        cu::attn_gemm_kernel<<<grid, dim3(kAttnTile, kAttnTile), 0, stream>>>(g);
        return cuda_launch_status(kernel);
    }
    int softmax(float* P, int64_t rows, int64_t T, int32_t causal) const {
        if (cublas != nullptr) cublas->written(P, rows * T);
        cu::attn_softmax_kernel<<<cap(rows, 1 << 20), kAttnRowThreads, 0, stream>>>(P, nullptr, rows, T, causal,
                                                                                   AttnDrop{});
        return cuda_launch_status(kernel);
    }
    int softmax_bwd(float* G, const float* P, int64_t rows, int64_t T, int32_t causal, float scale) const {
        if (cublas != nullptr) cublas->written(G, rows * T);
        cu::attn_softmax_bwd_kernel<<<cap(rows, 1 << 20), kAttnRowThreads, 0, stream>>>(G, P, rows, T, causal, scale);
        return cuda_launch_status(kernel);
    }
    // Fused with bf16 products on cuBLAS: the steps between the products
    // write the bf16 copies the products read, not the fp32 buffers.
    static constexpr bool kFuses = true;
    bool fused_bf16(const dsk_attention_args& a) const { return cublas != nullptr && a.bf16_products != 0; }
    int softmax_d16(float* P, int64_t rows, int64_t T, const dsk_attention_args& a) const {
        uint16_t* d16 = nullptr;
        if (int st = cublas->fresh_copy(P, rows * T, &d16)) return st;  // drops P's old copies too
        cu::attn_softmax_kernel<<<cap(rows, 1 << 20), kAttnRowThreads, 0, stream>>>(P, d16, rows, T, a.causal,
                                                                                   attn_drop_of(a));
        return cuda_launch_status(kernel);
    }
    int dropout_d16(const float* P, const float* D, size_t n, const dsk_attention_args& a) const {
        uint16_t* d16 = nullptr;
        if (int st = cublas->fresh_copy(D, static_cast<int64_t>(n), &d16)) return st;
        const uint64_t want = (n + cu::kAttnDropThreads - 1) / cu::kAttnDropThreads;
        cu::attn_dropout_d16_kernel<<<cap(static_cast<int64_t>(want), 65535), cu::kAttnDropThreads, 0, stream>>>(
            P, d16, n, attn_drop_of(a));
        return cuda_launch_status(kernel);
    }
    int softmax_bwd_d16(const float* G, const float* P, int64_t rows, int64_t T, float scale,
                        const dsk_attention_args& a) const {
        uint16_t* g16 = nullptr;
        if (int st = cublas->fresh_copy(G, rows * T, &g16)) return st;
        cu::attn_softmax_bwd_d16_kernel<<<cap(rows, 1 << 20), kAttnRowThreads, 0, stream>>>(G, P, g16, rows, T,
                                                                                           a.causal, scale, attn_drop_of(a));
        return cuda_launch_status(kernel);
    }
    int dropout(const float* x, float* y, size_t n, const dsk_attention_args& a) const {
        if (cublas != nullptr) cublas->written(y, static_cast<int64_t>(n));
        const uint64_t e0 = a.dropout_key.offset;
        const uint64_t blocks = dropout_blocks_for(e0, n);
        const uint64_t want = (blocks + cu::kAttnDropThreads - 1) / cu::kAttnDropThreads;
        cu::attn_dropout_kernel<<<cap(static_cast<int64_t>(want), 65535), cu::kAttnDropThreads, 0, stream>>>(
            x, y, n, e0, blocks, dropout_stream(a.dropout_key), static_cast<uint32_t>(dsk_dropout_threshold(a.dropout_p)),
            1.0f / (1.0f - a.dropout_p));
        return cuda_launch_status(kernel);
    }
};

// The CPU kernels' argument rules (../cpu/attention_check.h, shared), then the dimensions.
int check_args(const char* kn, const dsk_attention_args* a, AttnDims* d) {
    if (int st = ds::kernels::attention::check_args(kn, a)) return st;
    *d = AttnDims{a->batch, a->seq, a->channels, a->heads, a->channels / a->heads};
    return DSK_OK;
}

int null_arg(const char* kn, const char* arg) {
    return set_last_error(DSK_ERR_INVALID_ARGUMENT, "%s: %s is NULL", kn, arg);
}

// Device scratch of `buffers` [B, H, T, T] buffers (scratch_pool.h), freed in stream order.
struct Scratch {
    cudaStream_t stream;
    void* p = nullptr;
    int alloc(const char* kn, const AttnDims& d, size_t buffers) {
        if (buffers == 0) return DSK_OK;
        const size_t tt = d.tt();
        if (tt > SIZE_MAX / sizeof(float) / buffers)
            return set_last_error(DSK_ERR_OUT_OF_MEMORY, "%s: %zu scratch buffers of %zu floats overflow size_t", kn,
                                  buffers, tt);
        return cu::scratch_alloc(kn, "attention scratch", &p, buffers * tt * sizeof(float), stream);
    }
    ~Scratch() { cu::scratch_free(p, stream); }
};

// The cuBLAS products when they are in use (their bf16 copies freed in
// stream order when the call returns); with bf16 products, qkv (and the
// backward's dout) converted once up front, so that the products reading
// their slices share one copy.
struct Inputs {
    const float* qkv;
    const float* dout;
};
int products_for(const char* kn, cudaStream_t s, const dsk_attention_args& a, const AttnDims& d, Inputs in,
                 std::optional<cu::AttnCublasProducts>* out) {
    if (!cu::attention_products_on_cublas()) return DSK_OK;
    out->emplace(kn, s);
    if (!a.bf16_products) return DSK_OK;
    if (int st = (*out)->prime(in.qkv, d.B * d.T * 3 * d.C)) return st;
    return in.dout != nullptr ? (*out)->prime(in.dout, d.B * d.T * d.C) : DSK_OK;
}

}  // namespace

extern "C" int dsk_cuda_attention_forward(const float* qkv, float* out, float* probs, const dsk_attention_args* a,
                                          void* stream) noexcept {
    const char* kn = "dsk_cuda_attention_forward";
    AttnDims d{};
    if (int st = check_args(kn, a, &d)) return st;
    if (qkv == nullptr) return null_arg(kn, "qkv");
    if (out == nullptr) return null_arg(kn, "out");
    const cudaStream_t s = static_cast<cudaStream_t>(stream);
    std::optional<cu::AttnCublasProducts> cublas;
    if (int st = products_for(kn, s, *a, d, {qkv, nullptr}, &cublas)) return st;
    DeviceLauncher l{kn, s, cublas ? &*cublas : nullptr};
    Scratch scratch{s};
    if (int st = scratch.alloc(kn, d, attn_scratch_buffers(l, false, probs != nullptr, *a))) return st;
    return attn_forward_steps(l, d, *a, qkv, out, probs, static_cast<float*>(scratch.p));
}

extern "C" int dsk_cuda_attention_backward(const float* qkv, const float* probs, const float* dout, float* dqkv,
                                           const dsk_attention_args* a, void* stream) noexcept {
    const char* kn = "dsk_cuda_attention_backward";
    AttnDims d{};
    if (int st = check_args(kn, a, &d)) return st;
    if (qkv == nullptr) return null_arg(kn, "qkv");
    if (dout == nullptr) return null_arg(kn, "dout");
    if (dqkv == nullptr) return null_arg(kn, "dqkv");
    const cudaStream_t s = static_cast<cudaStream_t>(stream);
    std::optional<cu::AttnCublasProducts> cublas;
    if (int st = products_for(kn, s, *a, d, {qkv, dout}, &cublas)) return st;
    DeviceLauncher l{kn, s, cublas ? &*cublas : nullptr};
    Scratch scratch{s};
    if (int st = scratch.alloc(kn, d, attn_scratch_buffers(l, true, probs != nullptr, *a))) return st;
    return attn_backward_steps(l, d, *a, qkv, probs, dout, dqkv, static_cast<float*>(scratch.p));
}
