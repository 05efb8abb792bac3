// The CPU driver of the fused optimizer bodies (../elem/step_body.h): the
// run-time dtype dispatch that instantiates a body for the gradient's and
// the w16 copy's dtypes and runs it over the chunks.
#pragma once

#include "../elem/kernel_args.h"
#include "../elem/simd_dtype.h"
#include "../elem/step_body.h"
#include "parallel_chunks.h"
#include "simd_loop.h"

namespace {

// Body<GD, WD>{a, c, stream}.step<V>(i) over [0, a.n), for the run-time
// g_dtype (GD) and w16 dtype (WD; kNoStore when w16 is NULL).
template <class V, template <int, int> class Body, class Args, class Consts>
void run_step(const Args& a, const Consts& c) {
    with_dtype(a.g_dtype, [&](auto gd) {
        with_out16(a.w16, a.w_dtype, [&](auto wd) {
            const Body<decltype(gd)::value, decltype(wd)::value> body{{a, c, stream_w16(a.w16, a.n)}};
            run_chunks(a.n, unroll_elems<V>(),
                       [&](size_t lo, size_t hi, int) { vector_loop_w16<V>(lo, hi, body); });
        });
    });
}

}  // namespace
