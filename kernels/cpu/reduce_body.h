// Sum of squares (double accumulation) and axpy kernel bodies.
#pragma once

#include "parallel_chunks.h"
#include "simd_dtype.h"
#include "simd_loop.h"

namespace {

// One chunk: vector lanes accumulate in double, then the scalar tail; the
// per-chunk total is combined in chunk order (deterministic per thread count).
template <class V, int DT>
double sumsq_chunk(const void* x, size_t lo, size_t hi) {
    auto acc = V::dacc_zero();
    size_t i = lo;
    for (; i + V::W <= hi; i += V::W) V::dacc_add_sq(acc, vload<V, DT>(x, i));
    auto tail = ScalarOps::dacc_zero();
    for (; i < hi; ++i) ScalarOps::dacc_add_sq(tail, vload<ScalarOps, DT>(x, i));
    return V::dacc_sum(acc) + ScalarOps::dacc_sum(tail);
}

template <class V>
double sumsq_run(const void* x, int dtype, size_t n) {
    double parts[kMaxChunks];
    int used = 1;
    with_dtype(dtype, [&](auto dt) {
        used = run_chunks(n, unroll_elems<V>(), [&](size_t lo, size_t hi, int t) {
            parts[t] = sumsq_chunk<V, decltype(dt)::value>(x, lo, hi);
        });
    });
    double total = 0.0;
    for (int t = 0; t < used; ++t) total += parts[t];
    return total;
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

template <class V>
void axpy_run(void* dst, int dst_dtype, const void* src, int src_dtype, float scale, size_t n) {
    with_dtype(dst_dtype, [&](auto dd) {
        with_dtype(src_dtype, [&](auto sd) {
            const AxpyBody<decltype(dd)::value, decltype(sd)::value> body{dst, src, scale};
            run_chunks(n, unroll_elems<V>(),
                       [&](size_t lo, size_t hi, int) { vector_loop<V>(lo, hi, body); });
        });
    });
}

}  // namespace
