// The loop shared by every elementwise kernel: over [lo, hi) in steps of
// 4 vectors, then single vectors, then a scalar tail — all calling the same
// body.step<Ops>(i), so the tail does exactly the vector math.
#pragma once

#include <cstddef>

#include "../elem/simd_dtype.h"
#include "../elem/simd_scalar.h"

namespace {

// The body is copied into a local first: the kernel's stores go through
// float pointers, and a body reached by reference could alias them, which
// would force every constant and pointer to be reloaded per vector.
template <class V, class Body>
DSK_ALWAYS_INLINE void vector_loop(size_t lo, size_t hi, const Body& body_in) {
    const Body body = body_in;
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

// vector_loop for bodies that may write w16 with non-temporal stores: fence
// before the chunk ends, so the data is visible once the threads join.
template <class V, class Body>
DSK_ALWAYS_INLINE void vector_loop_w16(size_t lo, size_t hi, const Body& body) {
    vector_loop<V>(lo, hi, body);
    if (body.stream) V::stream_fence();
}

// Chunk alignment for run_chunks: whole unrolled iterations.
template <class V>
constexpr size_t unroll_elems() {
    return 4 * V::W;
}

}  // namespace
