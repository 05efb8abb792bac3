// The CUDA attention kernels run on the host: a launcher for
// kernels/cuda/attention_plan.h whose steps execute the kernels' per-thread
// functions (kernels/cuda/attention_body.h) for every (block, thread) in the
// order the CUDA kernels do, shared memory as plain per-block arrays, each
// __syncthreads() as the end of a loop over the block's threads. Used by
// tests/unit/cuda_attention_test.cpp (against the references and the CPU
// kernels) and tests/gpu/test_gpu_attention.cpp (the device's bits against it).
#pragma once

#include <cstring>
#include <vector>

#include "cuda/attention_body.h"
#include "cuda/attention_plan.h"
#include "elem/dropout.h"

namespace attn_host {

using ds::kernels::AttnDims;
using ds::kernels::AttnGemm;
using ds::kernels::AttnTiles;
using ds::kernels::kAttnRowThreads;
using ds::kernels::kAttnTile;

struct HostLauncher {
    // The tiled kernels round the fp32 operands as they load them: nothing fused.
    static constexpr bool kFuses = false;

    // attn_gemm_kernel: per (item, tile) block, per k-step a load phase and an
    // accumulate phase over all 16 x 16 threads, then the stores.
    int gemm(const AttnGemm& g) const {
        const int64_t tm = attn_tiles(g.M), tn = attn_tiles(g.N);
        for (int64_t z = 0; z < g.items; ++z)
            for (int64_t bm = 0; bm < tm; ++bm)
                for (int64_t bn = 0; bn < tn; ++bn) {
                    const int64_t m0 = bm * kAttnTile, n0 = bn * kAttnTile;
                    if (!attn_gemm_tile_live(g, m0, n0)) continue;
                    AttnTiles s;
                    float acc[kAttnTile][kAttnTile] = {};
                    for (int64_t k0 = 0; k0 < g.K; k0 += kAttnTile) {
                        // Stale tile contents must never be read: poison them.
                        std::memset(&s, 0xFF, sizeof s);
                        for (int ty = 0; ty < kAttnTile; ++ty)
                            for (int tx = 0; tx < kAttnTile; ++tx) attn_gemm_load(g, z, m0, n0, k0, ty, tx, &s);
                        for (int ty = 0; ty < kAttnTile; ++ty)
                            for (int tx = 0; tx < kAttnTile; ++tx)
                                acc[ty][tx] = attn_gemm_accumulate(g, k0, ty, tx, &s, acc[ty][tx]);
                    }
                    for (int ty = 0; ty < kAttnTile; ++ty)
                        for (int tx = 0; tx < kAttnTile; ++tx) attn_gemm_store(g, z, m0, n0, ty, tx, acc[ty][tx]);
                }
        return 0;
    }

    template <class Op>
    static void tree(float* red, Op op) {
        for (int s = kAttnRowThreads / 2; s > 0; s /= 2)
            for (int t = 0; t < kAttnRowThreads; ++t) attn_tree_step(red, t, s, op);
    }

    // attn_softmax_kernel: one block per row.
    int softmax(float* P, int64_t rows, int64_t T, int32_t causal) const {
        float red_max[kAttnRowThreads], red_sum[kAttnRowThreads];
        for (int64_t r = 0; r < rows; ++r) {
            float* row = P + r * T;
            const int64_t jn = attn_visible(r % T, T, causal);
            for (int t = 0; t < kAttnRowThreads; ++t) red_max[t] = attn_row_max_part(row, jn, t, kAttnRowThreads);
            tree(red_max, AttnMax{});
            for (int t = 0; t < kAttnRowThreads; ++t)
                red_sum[t] = attn_row_exp_part(row, jn, red_max[0], t, kAttnRowThreads);
            tree(red_sum, AttnSum{});
            for (int t = 0; t < kAttnRowThreads; ++t) attn_row_normalize(row, jn, T, red_sum[0], t, kAttnRowThreads);
        }
        return 0;
    }

    // attn_softmax_bwd_kernel: one block per row.
    int softmax_bwd(float* G, const float* P, int64_t rows, int64_t T, int32_t causal, float scale) const {
        float red[kAttnRowThreads];
        for (int64_t r = 0; r < rows; ++r) {
            float* g = G + r * T;
            const float* p = P + r * T;
            const int64_t jn = attn_visible(r % T, T, causal);
            for (int t = 0; t < kAttnRowThreads; ++t) red[t] = attn_sbwd_dot_part(g, p, jn, t, kAttnRowThreads);
            tree(red, AttnSum{});
            for (int t = 0; t < kAttnRowThreads; ++t) attn_sbwd_write(g, p, jn, T, red[0], scale, t, kAttnRowThreads);
        }
        return 0;
    }

    // attn_dropout_kernel: one thread per Philox block.
    int dropout(const float* x, float* y, size_t n, const dsk_attention_args& a) const {
        const uint64_t e0 = a.dropout_key.offset;
        const uint64_t blocks = dropout_blocks_for(e0, n);
        const DropoutStream st = dropout_stream(a.dropout_key);
        const uint32_t thr = static_cast<uint32_t>(dsk_dropout_threshold(a.dropout_p));
        const float scale = 1.0f / (1.0f - a.dropout_p);
        for (uint64_t b = 0; b < blocks; ++b) dropout_block(x, y, n, e0, b, st, thr, scale);
        return 0;
    }
};

inline AttnDims dims_of(const dsk_attention_args& a) {
    return AttnDims{a.batch, a.seq, a.channels, a.heads, a.channels / a.heads};
}

// The kernels' forward / backward on host memory (scratch poisoned with NaN,
// as fresh device memory may hold anything).
inline void forward(const dsk_attention_args& a, const float* qkv, float* out, float* probs) {
    const AttnDims d = dims_of(a);
    HostLauncher l;
    std::vector<float> scratch(d.tt() * ds::kernels::attn_scratch_buffers(l, false, probs != nullptr, a) + 1, NAN);
    ds::kernels::attn_forward_steps(l, d, a, qkv, out, probs, scratch.data());
}
inline void backward(const dsk_attention_args& a, const float* qkv, const float* probs, const float* dout,
                     float* dqkv) {
    const AttnDims d = dims_of(a);
    HostLauncher l;
    std::vector<float> scratch(d.tt() * ds::kernels::attn_scratch_buffers(l, true, probs != nullptr, a) + 1, NAN);
    ds::kernels::attn_backward_steps(l, d, a, qkv, probs, dout, dqkv, scratch.data());
}

}  // namespace attn_host
