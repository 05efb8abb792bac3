// Dropout's stream (nn_ops.h: key and counter words of Philox4x32-10 from a
// dsk_dropout_key) and its per-element rule, shared by the CPU loop
// (kernels/cpu/nn_ops_body.h) and the CUDA kernel (kernels/cuda/dropout.cu).
#pragma once

#include <cstdint>

#include "../cpu/philox.h"
#include "hd.h"
#include "nn_ops.h"

// Named (plain data, no code): it is a CUDA kernel's parameter, and nvcc's
// launch stubs cannot name a type of a file's anonymous namespace.
namespace ds::kernels {
struct DropoutStream {
    uint32_t k[2];    // key = (seed_lo ^ stream_hi, seed_hi)
    uint32_t c2, c3;  // counter words 2, 3 = (module_id, stream_lo)
};
}  // namespace ds::kernels

namespace {

using ds::kernels::DropoutStream;

DSK_ALWAYS_INLINE DropoutStream dropout_stream(const dsk_dropout_key& key) {
    return DropoutStream{{static_cast<uint32_t>(key.seed) ^ static_cast<uint32_t>(key.stream >> 32),
                          static_cast<uint32_t>(key.seed >> 32)},
                         key.module_id,
                         static_cast<uint32_t>(key.stream)};
}

// x kept (scaled) when the element's word w >= thr, else 0 (x * 0: a dropped
// Inf or NaN gives NaN, as torch's x * mask * scale).
DSK_ALWAYS_INLINE float dropout_elem(float x, uint32_t w, uint32_t thr, float scale) {
    return x * (w >= thr ? scale : 0.0f);
}

// The CUDA kernel's unit of work (one thread): Philox block b of the
// buffer's stream, i.e. stream elements 4*(e0/4 + b) .. +3, those of them in
// [e0, e0 + n). blocks_for(e0, n) blocks cover the buffer.
DSK_HD inline uint64_t dropout_blocks_for(uint64_t e0, size_t n) { return ((e0 + n + 3) >> 2) - (e0 >> 2); }

DSK_ALWAYS_INLINE void dropout_block(const float* x, float* y, size_t n, uint64_t e0, uint64_t b,
                                     const DropoutStream& st, uint32_t thr, float scale) {
    const uint64_t blk = (e0 >> 2) + b;
    uint32_t w[4];
    ds::kernels::philox_block(blk, st.c2, st.c3, st.k, w);
    for (int j = 0; j < 4; ++j) {
        const uint64_t e = 4 * blk + static_cast<uint64_t>(j);
        if (e < e0 || e - e0 >= n) continue;
        const size_t i = static_cast<size_t>(e - e0);
        y[i] = dropout_elem(x[i], w[j], thr, scale);
    }
}

}  // namespace
