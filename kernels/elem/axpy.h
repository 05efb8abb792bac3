// axpy per-element bodies (dst = dst + scale*src, or dst = scale*src with
// the square of the stored value added to a double accumulator), shared by
// the CPU and CUDA kernels.
#pragma once

#include "simd_dtype.h"

namespace {

// dst = scale * src (OVERWRITE) or dst + scale * src, stored in dst's dtype,
// and the sum of squares of the stored values: one streaming pass (the
// square is taken of what was stored, re-read from L1 for 16-bit dst).
// STREAM (fp32 overwrite of a large aligned buffer): non-temporal stores,
// which skip reading the destination lines that are about to be replaced.
template <class V, int DD, int SD, bool OVERWRITE, bool STREAM = false>
DSK_ALWAYS_INLINE void axpy_sq_one(void* dst, const void* src, typename V::F s, size_t i,
                                   decltype(V::dacc_zero())& acc) {
    typename V::F x;
    if constexpr (OVERWRITE)
        x = V::mul(s, vload<V, SD>(src, i));
    else
        x = V::fma(s, vload<V, SD>(src, i), vload<V, DD>(dst, i));
    if constexpr (STREAM)
        V::stream_f32(static_cast<float*>(dst) + i, x);
    else
        vstore<V, DD>(dst, i, x);
    if constexpr (DD != DSK_F32) x = vload<V, DD>(dst, i);
    V::dacc_add_sq(acc, x);
}

template <int DD, int SD>
struct AxpyBody {
    void* dst;
    const void* src;
    float scale;
    template <class V>
    DSK_ALWAYS_INLINE void step(size_t i) const {
        const typename V::F d = vload<V, DD>(dst, i);
        vstore<V, DD>(dst, i, V::fma(V::set1(scale), vload<V, SD>(src, i), d));
    }
};

}  // namespace
