// Sum of squares (double accumulation) and axpy kernel bodies.
#pragma once

#include "parallel_chunks.h"
#include "../elem/axpy.h"
#include "../elem/simd_dtype.h"
#include "simd_loop.h"

namespace {

// One chunk: four independent vector accumulators (so the FMA latency does
// not bound a memory-speed pass), then the scalar tail; the per-chunk total
// is combined in chunk order (deterministic per thread count).
template <class V, int DT>
double sumsq_chunk(const void* x, size_t lo, size_t hi) {
    auto a0 = V::dacc_zero(), a1 = V::dacc_zero(), a2 = V::dacc_zero(), a3 = V::dacc_zero();
    constexpr size_t W = V::W;
    size_t i = lo;
    for (; i + 4 * W <= hi; i += 4 * W) {
        V::dacc_add_sq(a0, vload<V, DT>(x, i));
        V::dacc_add_sq(a1, vload<V, DT>(x, i + W));
        V::dacc_add_sq(a2, vload<V, DT>(x, i + 2 * W));
        V::dacc_add_sq(a3, vload<V, DT>(x, i + 3 * W));
    }
    for (; i + W <= hi; i += W) V::dacc_add_sq(a0, vload<V, DT>(x, i));
    auto tail = ScalarOps::dacc_zero();
    for (; i < hi; ++i) ScalarOps::dacc_add_sq(tail, vload<ScalarOps, DT>(x, i));
    V::dacc_merge(a0, a1);
    V::dacc_merge(a2, a3);
    V::dacc_merge(a0, a2);
    return V::dacc_sum(a0) + ScalarOps::dacc_sum(tail);
}

template <class V, int DD, int SD, bool OVERWRITE, bool STREAM = false>
double axpy_sumsq_chunk(void* dst, const void* src, float scale, size_t lo, size_t hi) {
    auto a0 = V::dacc_zero(), a1 = V::dacc_zero(), a2 = V::dacc_zero(), a3 = V::dacc_zero();
    const typename V::F s = V::set1(scale);
    constexpr size_t W = V::W;
    size_t i = lo;
    for (; i + 4 * W <= hi; i += 4 * W) {
        axpy_sq_one<V, DD, SD, OVERWRITE, STREAM>(dst, src, s, i, a0);
        axpy_sq_one<V, DD, SD, OVERWRITE, STREAM>(dst, src, s, i + W, a1);
        axpy_sq_one<V, DD, SD, OVERWRITE, STREAM>(dst, src, s, i + 2 * W, a2);
        axpy_sq_one<V, DD, SD, OVERWRITE, STREAM>(dst, src, s, i + 3 * W, a3);
    }
    for (; i + W <= hi; i += W) axpy_sq_one<V, DD, SD, OVERWRITE, STREAM>(dst, src, s, i, a0);
    if constexpr (STREAM) V::stream_fence();  // visible before the threads join
    auto tail = ScalarOps::dacc_zero();
    for (; i < hi; ++i) axpy_sq_one<ScalarOps, DD, SD, OVERWRITE>(dst, src, scale, i, tail);
    V::dacc_merge(a0, a1);
    V::dacc_merge(a2, a3);
    V::dacc_merge(a0, a2);
    return V::dacc_sum(a0) + ScalarOps::dacc_sum(tail);
}

template <class V>
double axpy_sumsq_run(void* dst, int dst_dtype, const void* src, int src_dtype, float scale, bool overwrite,
                      size_t n) {
    double parts[kMaxChunks];
    int used = 1;
    with_dtype(dst_dtype, [&](auto dd) {
        with_dtype(src_dtype, [&](auto sd) {
            constexpr int DD = decltype(dd)::value, SD = decltype(sd)::value;
            // Non-temporal only where every vector store is aligned: chunk
            // bounds are multiples of 4 vectors from a 64-byte aligned base.
            const bool stream = overwrite && DD == DSK_F32 && n >= kStreamMinElems &&
                                reinterpret_cast<uintptr_t>(dst) % 64 == 0;
            used = run_chunks(n, unroll_elems<V>(), [&](size_t lo, size_t hi, int t) {
                if (stream)
                    parts[t] = axpy_sumsq_chunk<V, DD, SD, true, true>(dst, src, scale, lo, hi);
                else if (overwrite)
                    parts[t] = axpy_sumsq_chunk<V, DD, SD, true>(dst, src, scale, lo, hi);
                else
                    parts[t] = axpy_sumsq_chunk<V, DD, SD, false>(dst, src, scale, lo, hi);
            });
        });
    });
    double total = 0.0;
    for (int t = 0; t < used; ++t) total += parts[t];
    return total;
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
