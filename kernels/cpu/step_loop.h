// What the fused optimizer bodies (adam, sgd, lion) share: the gradient read
// (scaled by the fused unscale x clip factor) and the run-time dtype dispatch
// that instantiates a body for the gradient's and the w16 copy's dtypes and
// runs it over the chunks.
#pragma once

#include "kernel_args.h"
#include "parallel_chunks.h"
#include "simd_dtype.h"
#include "simd_loop.h"

namespace {

// The members of every fused optimizer body: buffers, constants, and whether
// w16 is written with non-temporal stores (see stream_w16). run_step builds
// a Body{{a, c, stream}}.
template <class Args, class Consts>
struct StepBodyBase {
    Args a;
    Consts c;
    bool stream;
};

// g[i] * grad_scale in fp32, g stored in dtype GD.
template <class V, int GD>
DSK_ALWAYS_INLINE typename V::F scaled_grad(const ds::kernels::StepArgs& a, float grad_scale, size_t i) {
    return V::mul(vload<V, GD>(a.g, i), V::set1(grad_scale));
}

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
