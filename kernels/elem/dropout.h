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

}  // namespace
