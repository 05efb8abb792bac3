// The loop shared by every elementwise kernel: over [lo, hi) in steps of
// 4 vectors, then single vectors, then a scalar tail — all calling the same
// body.step<Ops>(i), so the tail does exactly the vector math.
#pragma once

#include <cstddef>

#include "simd_scalar.h"

namespace {

template <class V, class Body>
inline void vector_loop(size_t lo, size_t hi, const Body& body) {
    constexpr size_t W = V::W;
    size_t i = lo;
    for (; i + 4 * W <= hi; i += 4 * W) {
        body.template step<V>(i);
        body.template step<V>(i + W);
        body.template step<V>(i + 2 * W);
        body.template step<V>(i + 3 * W);
    }
    for (; i + W <= hi; i += W) body.template step<V>(i);
    for (; i < hi; ++i) body.template step<ScalarOps>(i);
}

// Chunk alignment for run_chunks: whole unrolled iterations.
template <class V>
constexpr size_t unroll_elems() {
    return 4 * V::W;
}

}  // namespace
