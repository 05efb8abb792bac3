// dtype conversion kernel body (any of F32/F16/BF16 to any other).
#pragma once

#include "parallel_chunks.h"
#include "simd_dtype.h"
#include "simd_loop.h"

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

template <class V>
void convert_run(const void* src, int src_dtype, void* dst, int dst_dtype, size_t n) {
    with_dtype(src_dtype, [&](auto sd) {
        with_dtype(dst_dtype, [&](auto dd) {
            const ConvertBody<decltype(sd)::value, decltype(dd)::value> body{src, dst};
            run_chunks(n, unroll_elems<V>(),
                       [&](size_t lo, size_t hi, int) { vector_loop<V>(lo, hi, body); });
        });
    });
}

}  // namespace
