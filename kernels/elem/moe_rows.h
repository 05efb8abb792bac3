// The MoE row kernels' per-element code (nn_moe.h), shared by the CPU
// kernels (kernels/cpu/moe_rows.cpp), the CUDA kernels
// (kernels/cuda/moe_rows.cu) and the host tests: element i = j * C + c of
// the rows [n, C]. The row dot is the CPU's c-ascending sum on the host; on
// the device 32 lanes each sum c = lane, lane + 32, ... and a shuffle tree
// adds them (moe_dot_emulate reproduces that order on the host).
#pragma once

#include <cstddef>
#include <cstdint>

#include "hd.h"

namespace ds::kernels {

// dst[j, c] = scale[j] * src[idx[j], c] (scale NULL: a copy).
DSK_HD inline void moe_gather_elem(const float* src, size_t C, const int32_t* idx, const float* scale, size_t i,
                                   float* dst) {
    const size_t j = i / C, c = i % C;
    const float v = src[static_cast<size_t>(idx[j]) * C + c];
    dst[i] = scale == nullptr ? v : scale[j] * v;
}

// dst[idx[j], c] += scale[j] * src[j, c] (scale NULL: 1).
DSK_HD inline void moe_scatter_add_elem(const float* src, size_t C, const int32_t* idx, const float* scale, size_t i,
                                        float* dst) {
    const size_t j = i / C, c = i % C;
    float* d = dst + static_cast<size_t>(idx[j]) * C + c;
    *d += scale == nullptr ? src[i] : scale[j] * src[i];
}

constexpr int kMoeDotLanes = 32;

// One device lane's part of the dot of rows x and y (C elements).
DSK_HD inline float moe_dot_lane(const float* x, const float* y, int64_t C, int lane) {
    float acc = 0.0f;
    for (int64_t c = lane; c < C; c += kMoeDotLanes) acc += x[c] * y[c];
    return acc;
}

// The device's row dot on the host: the lanes' parts, then the shuffle
// tree (offsets 16, 8, 4, 2, 1; lane 0's value is the result).
inline float moe_dot_emulate(const float* x, const float* y, int64_t C) {
    float v[kMoeDotLanes];
    for (int l = 0; l < kMoeDotLanes; ++l) v[l] = moe_dot_lane(x, y, C, l);
    for (int off = kMoeDotLanes / 2; off > 0; off /= 2)
        for (int l = 0; l < off; ++l) v[l] += v[l + off];
    return v[0];
}

}  // namespace ds::kernels
