// dtype conversion per-element body (any of F32/F16/BF16 to any other),
// shared by the CPU and CUDA kernels.
#pragma once

#include "simd_dtype.h"

namespace {

template <int SD, int DD>
struct ConvertBody {
    const void* src;
    void* dst;
    template <class V>
    DSK_ALWAYS_INLINE void step(size_t i) const {
        vstore<V, DD>(dst, i, vload<V, SD>(src, i));
    }
};

}  // namespace
