// The MoE gate's multiplicative jitter (nn_moe.h, dsk_cpu_moe_jitter): the
// factor of stream index j is U(1 - eps, 1 + eps) = (1 - eps) + 2 eps u(j)
// in float (eps = 0.01, DeepSpeed's multiplicative_jitter), and the one
// element op the layer needs both ways: forward gin = x * f, backward
// dx += dg * f. Compiled into the CPU kernel (kernels/cpu/moe_jitter.cpp),
// the CUDA kernel (kernels/cuda/moe_jitter.cu; --fmad=false keeps the
// multiply and the add separately rounded) and the host tests.
#pragma once

#include <cstddef>
#include <cstdint>

#include "moe_draw.h"

namespace {

constexpr float kMoeJitterEps = 0.01f;

DSK_HD inline float moe_jitter_factor(const ds::kernels::DropoutStream& st, uint64_t offset, uint64_t j) {
    return (1.0f - kMoeJitterEps) + 2.0f * kMoeJitterEps * moe_uniform_f(st, offset, j);
}

// dst[i] = src[i] * factor(first + i), or dst[i] + that with accumulate.
DSK_HD inline void moe_jitter_elem(const float* src, const ds::kernels::DropoutStream& st, uint64_t offset,
                                   uint64_t first, int accumulate, size_t i, float* dst) {
    const float p = src[i] * moe_jitter_factor(st, offset, first + i);
    dst[i] = accumulate ? dst[i] + p : p;
}

}  // namespace
